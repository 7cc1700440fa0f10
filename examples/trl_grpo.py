"""GRPO with TRL on a mirror world: the model calls the world's tools, the verifier's score is the reward.

TRL's ``GRPOTrainer`` plays each prompt ``--generations`` times through
``environment_factory`` (:mod:`mirrorworld.integrations.trl`: one typed method
per tool, ``reset(**row)`` starts the row's train-split task, ``get_reward()``
grades the episode), and pushes the model towards the rollouts the verifier
scored above their group's mean. Before and after training the script plays
``--eval-tasks`` test-split tasks greedily and prints the pass rate, so a run
says whether the model got better on tasks it never trained on.

    python examples/trl_grpo.py --smoke      # CPU, offline: a tiny model built here, one GRPO step
    python examples/trl_grpo.py --model Qwen/Qwen2.5-1.5B-Instruct --families update_email,cancel_order \\
        --steps 200 --generations 8            # a real model, on a GPU

``--model`` takes a Hugging Face model id or a local folder (anything
``AutoModelForCausalLM`` loads, with a chat template that writes tool calls as
``<tool_call>{...}</tool_call>``, as Qwen2.5's does). The default, ``tiny``, is
:func:`~mirrorworld.integrations.trl.tiny_model`: an untrained one-layer model
that exercises the pipeline end to end and scores 0.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from typing import Any

_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.S)


def load(name: str, world: str) -> tuple[Any, Any]:
    """The model and tokenizer to train (``tiny``: built here, nothing downloaded)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if name == "tiny":
        from mirrorworld.integrations.trl import tiny_model

        return tiny_model(world)
    tokenizer = AutoTokenizer.from_pretrained(name)
    dtype = torch.bfloat16 if torch.cuda.is_available() else torch.float32
    model = AutoModelForCausalLM.from_pretrained(name, dtype=dtype)
    if torch.cuda.is_available():
        model = model.to("cuda")
    return model, tokenizer


def play(model: Any, tokenizer: Any, env: Any, row: dict[str, Any], *, turns: int, new_tokens: int) -> float:
    """One greedy episode of ``row``'s task, the model calling tools as in a GRPO rollout; the verifier's score."""
    import torch

    instruction = env.reset(**row)
    messages: list[dict[str, Any]] = [{"role": "user", "content": row["prompt"][-1]["content"] + instruction}]
    from mirrorworld.integrations.trl import tool_methods

    tools = tool_methods(env)
    for _ in range(turns):
        text = tokenizer.apply_chat_template(
            messages, tools=list(tools.values()), add_generation_prompt=True, tokenize=False
        )
        inputs = tokenizer(text, return_tensors="pt", add_special_tokens=False).to(model.device)
        with torch.no_grad():
            out = model.generate(
                **inputs, max_new_tokens=new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id
            )
        reply = tokenizer.decode(out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=False)
        for marker in {tokenizer.eos_token, tokenizer.pad_token} - {None}:
            reply = reply.replace(marker, "")
        messages.append({"role": "assistant", "content": reply})
        calls = _CALL.findall(reply)
        if not calls:
            break
        ended = False
        for raw in calls:
            try:
                call = json.loads(raw)
                name, arguments = call["name"], call.get("arguments") or {}
                result = tools[name](**arguments)
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                result = json.dumps({"error": {"code": "invalid_call", "message": str(e)[:200]}})
                name = ""
            messages.append({"role": "tool", "content": result})
            ended = ended or name == "respond"
        if ended:
            break
    return float(env.get_reward())


def pass_rate(model: Any, tokenizer: Any, factory: Any, rows: list[dict[str, Any]], *, new_tokens: int) -> float:
    env = factory()
    try:
        scores = [play(model, tokenizer, env, row, turns=12, new_tokens=new_tokens) for row in rows]
    finally:
        env._close()
    return sum(s >= 1.0 for s in scores) / max(len(scores), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="a model id or folder ('tiny': built here, offline)")
    parser.add_argument("--world", default="helpdesk")
    parser.add_argument("--families", default="", help="comma-separated task families (default: all)")
    parser.add_argument("--tasks", type=int, default=256, help="train-split tasks in the dataset")
    parser.add_argument("--steps", type=int, default=100, help="GRPO optimiser steps")
    parser.add_argument("--generations", type=int, default=8, help="rollouts per prompt (GRPO's group)")
    parser.add_argument("--batch", type=int, default=8, help="rollouts per device per step")
    parser.add_argument("--lr", type=float, default=1e-6)
    parser.add_argument("--max-completion", type=int, default=2048, help="tokens per rollout, tool results included")
    parser.add_argument("--eval-tasks", type=int, default=32, help="test-split tasks played before and after")
    parser.add_argument("--out", default="runs/grpo")
    parser.add_argument("--smoke", action="store_true", help="the tiny model, one GRPO step, 2 test tasks")
    ns = parser.parse_args()
    if ns.smoke:
        ns.model, ns.tasks, ns.steps, ns.generations, ns.batch = "tiny", 2, 1, 2, 2
        ns.max_completion, ns.eval_tasks = 64, 2
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from mirrorworld.integrations.trl import environment_factory, task_rows

    families = [f for f in ns.families.split(",") if f] or None
    model, tokenizer = load(ns.model, ns.world)
    train_rows = task_rows(ns.world, ns.tasks, split="train", families=families)
    test_rows = task_rows(ns.world, ns.eval_tasks, split="test", families=families)
    factory = environment_factory(ns.world, split="train")
    test_factory = environment_factory(ns.world, split="test")
    new_tokens = min(ns.max_completion, 512)
    before = pass_rate(model, tokenizer, test_factory, test_rows, new_tokens=new_tokens)
    print(f"before training: {before:.0%} of {len(test_rows)} test tasks passed", flush=True)

    gpu = torch.cuda.is_available()
    config = GRPOConfig(
        output_dir=ns.out,
        per_device_train_batch_size=ns.batch,
        num_generations=ns.generations,
        max_completion_length=ns.max_completion,
        max_tool_calling_iterations=12,
        max_steps=ns.steps,
        learning_rate=ns.lr,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=not gpu,
        bf16=gpu,
    )
    trainer = GRPOTrainer(
        model=model,
        args=config,
        train_dataset=Dataset.from_list(train_rows),
        processing_class=tokenizer,
        environment_factory=factory,
    )
    start = time.perf_counter()
    trainer.train()
    took = time.perf_counter() - start
    rewards = [e["reward"] for e in trainer.state.log_history if "reward" in e]
    after = pass_rate(model, tokenizer, test_factory, test_rows, new_tokens=new_tokens)
    print(f"trained {ns.steps} GRPO steps in {took:.0f} s; mean reward by step: {[round(r, 3) for r in rewards]}")
    print(f"after training: {after:.0%} of {len(test_rows)} test tasks passed (before: {before:.0%})")


if __name__ == "__main__":
    main()
