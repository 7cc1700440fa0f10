"""The TRL adapter: TRL's own schema extraction, and GRPO training steps on CPU with a tiny random model.

Nothing is downloaded: :func:`~mirrorworld.integrations.trl.tiny_model` builds a
byte-level BPE on the world's own text, with the Qwen2.5 chat template TRL
ships, and a one-layer Qwen2 with random weights. A random model never emits a tool
call, so the end-to-end test scripts the policy with a logits processor: in
each group, the first rollout plays the task's gold solution and the second
only replies, so the environment's rewards differ (1 and 0) and the update
has a signal.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
trl = pytest.importorskip("trl")

from mirrorworld import make_world  # noqa: E402
from mirrorworld.integrations.trl import (  # noqa: E402
    environment_factory,
    task_rows,
    tiny_model,
    tool_methods,
)
from mirrorworld.server import BackgroundServer, ServerConfig  # noqa: E402


def test_every_tool_is_a_typed_documented_method_transformers_can_describe() -> None:
    from transformers.utils import get_json_schema

    world = make_world("helpdesk")
    env = environment_factory("helpdesk")()
    methods = tool_methods(env)
    assert sorted(methods) == sorted(world.tool_names)
    for spec in world.tools:
        schema = get_json_schema(methods[spec.name])["function"]
        ours = spec.parameters_schema
        assert schema["name"] == spec.name and schema["description"] == spec.description
        assert set(schema["parameters"]["properties"]) == set(ours["properties"])
        assert sorted(schema["parameters"].get("required", [])) == sorted(ours["required"])
        for name, prop in ours["properties"].items():
            theirs = schema["parameters"]["properties"][name]
            assert theirs.get("enum") == prop.get("enum"), (spec.name, name)
    only = environment_factory("helpdesk", tools=["get_order"])()
    assert sorted(tool_methods(only)) == ["get_order", "respond"]


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    with BackgroundServer(ServerConfig(access_log=False)) as s:
        yield s


@pytest.mark.parametrize("where", ["local", "remote"])
def test_reset_tools_and_reward(where: str, server: BackgroundServer) -> None:
    world = make_world("helpdesk")
    task = world.task("update_email", 1)
    factory = environment_factory("helpdesk", base_url=server.url if where == "remote" else None)
    env = factory()
    row = {"prompt": [{"role": "user", "content": "hi"}], "task_id": task.id}
    assert env.reset(**row) == task.instruction
    bad = json.loads(tool_methods(env)["get_customer"](customer_id="x"))
    assert bad["error"]["code"] == "invalid_arguments"
    for call in task.gold:
        out = json.loads(tool_methods(env)[call.tool](**call.args))
        assert "error" not in out, out
    assert env.get_reward() == 1.0
    assert env.reset(**{"family": "update_email", "seed": 1}) == task.instruction  # a fresh episode
    assert env.get_reward() == 0.0
    assert env.reset(index=0, split="test") == world.task_for("test", 0).instruction
    env._close()


def scripted(tokenizer: Any, gold: Any) -> Any:
    """A logits processor that makes the model play a script: gold calls for even rows, one reply for odd ones."""
    from transformers import LogitsProcessor

    ids = tokenizer.convert_tokens_to_ids
    im_start, response, eos = ids("<|im_start|>"), ids("<tool_response>"), tokenizer.eos_token_id
    header = len(tokenizer.encode("assistant\n", add_special_tokens=False))

    def call(tool: str, args: dict[str, Any]) -> list[int]:
        text = f"<tool_call>\n{json.dumps({'name': tool, 'arguments': args})}\n</tool_call>"
        return [*tokenizer.encode(text, add_special_tokens=False), eos]

    good = [call(c.tool, c.args) for c in gold]
    lazy = call("respond", {"message": "Done, everything is resolved."})

    class Script(LogitsProcessor):
        def __call__(self, input_ids: Any, scores: Any) -> Any:
            forced = torch.full_like(scores, -1e9)
            for i, row in enumerate(input_ids.tolist()):
                turn = row.count(response)
                start = len(row) - 1 - row[::-1].index(im_start)
                n = len(row) - (start + 1 + header)
                if turn == 0:
                    script = good[0] if i % 2 == 0 else lazy
                elif "Done, everything" in tokenizer.decode(row):
                    script = [eos]
                else:
                    script = good[turn] if turn < len(good) else [eos]
                forced[i, script[n] if n < len(script) else eos] = 0.0
            return forced

    return Script()


@pytest.mark.filterwarnings("ignore::FutureWarning")  # transformers: gradient_checkpointing renamed (v6)
def test_grpo_trains_on_cpu_with_the_environment_factory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from datasets import Dataset
    from transformers import LogitsProcessorList
    from trl import GRPOConfig, GRPOTrainer

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    world = make_world("helpdesk")
    task = world.task("update_email", 1)
    model, tokenizer = tiny_model(world)
    model.generate = functools.partial(  # type: ignore[method-assign]
        model.generate, logits_processor=LogitsProcessorList([scripted(tokenizer, task.gold)])
    )
    before = [p.detach().clone() for p in model.parameters()]
    rows = [{**row, "task_id": task.id} for row in task_rows("helpdesk", 2)]
    args = GRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=1024,
        max_tool_calling_iterations=len(task.gold) + 1,
        max_steps=2,
        learning_rate=1e-2,
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        bf16=False,
    )
    factory = environment_factory("helpdesk")
    trainer = GRPOTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        environment_factory=factory,
    )
    trainer.train()

    logs = [h for h in trainer.state.log_history if "reward" in h]
    assert len(logs) == 2
    for log in logs:
        assert log["tools/call_frequency"] > 0 and log["tools/failure_frequency"] == 0
        assert log[f"rewards/{factory.__name__}/mean"] == pytest.approx(0.5)  # gold 1.0, lazy 0.0
    envs = trainer._environment_pool[None]
    assert sorted(e.get_reward() for e in envs) == [0.0, 1.0]
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
