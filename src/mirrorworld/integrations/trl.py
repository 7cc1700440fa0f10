"""A mirror world as a TRL ``GRPOTrainer(environment_factory=...)`` environment.

TRL's protocol (``trl.GRPOTrainer``, ``environment_factory``): the factory is
called with no arguments and returns an environment object; TRL calls
``reset(**row)`` with the dataset row before each rollout and appends the
string it returns to the last user message; every public method other than
``reset`` and ``get_reward`` is a tool the model may call, described to it by
its type hints and Google-style docstring; ``get_reward()`` scores the
finished rollout. TRL keeps one instance per concurrent rollout and reuses
instances across batches.

:func:`environment_factory` builds such a class for a world, with one typed,
documented method per tool, generated from the tool's declaration (so the
schema the model sees is the same one ``MirrorEnv`` and the MCP server
publish)::

    from trl import GRPOConfig, GRPOTrainer
    from mirrorworld.integrations.trl import environment_factory, task_rows

    trainer = GRPOTrainer(
        model=model,
        args=GRPOConfig(...),
        train_dataset=Dataset.from_list(task_rows("helpdesk", 256, split="train")),
        environment_factory=environment_factory("helpdesk"),
    )

* ``reset`` picks the task from the row: ``task_id`` (``"refund_damaged/3"``),
  or ``family`` + ``seed``, or ``index`` (the index-th task of ``split``);
  other columns (``prompt`` …) are ignored. It returns the task's instruction.
* A tool method returns the agent-visible JSON of the result, errors included
  (``{"error": {"code", "message"}}``): a malformed call is an observation,
  never an exception, and changes nothing.
* ``get_reward`` is the verifier's score of the episode (1.0 only when every
  gate passes), grading it first if the model never called ``respond``.

Episodes run in-process by default; with ``base_url`` they run on a session
server (``mirrorworld serve``), each environment holding one session, so the
trainer's GPUs and the worlds can live on different machines.

:func:`tiny_model` builds a model and tokenizer with nothing downloaded, for
runs that must work offline on a CPU (a smoke test of a training script).
"""

from __future__ import annotations

import inspect
import re
from decimal import Decimal
from typing import Any, ClassVar, Literal, Protocol

from mirrorworld.core.registry import Registry, default
from mirrorworld.core.task import Split, Task
from mirrorworld.core.tools import Param, ToolSpec
from mirrorworld.core.world import World
from mirrorworld.episodes import Episode, EpisodeOptions, select_task
from mirrorworld.errors import MirrorworldError, WorldError

__all__ = ["MirrorworldEnvironment", "environment_factory", "task_rows", "tiny_model", "tool_methods"]

PREAMBLE = (
    "You are a support agent. Use the tools to resolve the customer's request, following the support policy "
    "(the get_policy tool shows it), then call respond with your final message to the customer.\n\n"
)
"""The user message of :func:`task_rows`; ``reset`` appends the task's instruction to it."""

_RESERVED = {"reset", "get_reward"}


class _Backend(Protocol):
    def start(self, spec: dict[str, Any]) -> str: ...
    def call(self, tool: str, args: dict[str, Any]) -> str: ...
    def score(self) -> float: ...
    def close(self) -> None: ...


class _Local:
    """Episodes in this process."""

    def __init__(self, world: World, max_steps: int) -> None:
        self.world = world
        self.max_steps = max_steps
        self.episode: Episode | None = None

    def start(self, spec: dict[str, Any]) -> str:
        task = _task(self.world, spec)
        self.close()
        self.episode = Episode(self.world, task, EpisodeOptions(max_steps=spec.get("max_steps", self.max_steps)))
        return task.instruction

    def call(self, tool: str, args: dict[str, Any]) -> str:
        if self.episode is None:
            raise MirrorworldError("reset() the environment before calling a tool")
        return self.episode.step(tool, args).content()

    def score(self) -> float:
        if self.episode is None:
            return 0.0
        return self.episode.finish().score

    def close(self) -> None:
        if self.episode is not None:
            self.episode.close()
            self.episode = None


class _Remote:
    """Episodes on a session server, one session per environment."""

    def __init__(self, base_url: str, world: str, max_steps: int, token: str | None) -> None:
        from mirrorworld.client import Client

        self.client = Client(base_url, token=token, transport="ws")
        self.world = world
        self.max_steps = max_steps
        self.session: Any = None

    def start(self, spec: dict[str, Any]) -> str:
        spec = {"max_steps": self.max_steps, **spec}
        if self.session is None:
            self.session = self.client.create(self.world, **spec)
        else:
            self.session.reset(**spec)
        return str(self.session.info.instruction)

    def call(self, tool: str, args: dict[str, Any]) -> str:
        if self.session is None:
            raise MirrorworldError("reset() the environment before calling a tool")
        return str(self.session.step(tool, args).content)

    def score(self) -> float:
        return float(self.session.verdict().score) if self.session is not None else 0.0

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None


def _task(world: World, spec: dict[str, Any]) -> Task:
    return select_task(
        world,
        split=spec.get("split", "train"),
        families=spec.get("families"),
        task_id=spec.get("task_id"),
        family=spec.get("family"),
        seed=spec.get("seed"),
        index=spec.get("index", 0),
    )


def _row_int(row: dict[str, Any], key: str) -> int:
    """A dataset row's integer field: an int, or its decimal ASCII digits (rows are untrusted input)."""
    value: Any = row.get(key)
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 10:
        value = int(value)
    elif hasattr(value, "dtype") and getattr(value, "ndim", None) == 0 and value.dtype.kind in "iu":
        value = int(value)  # a NumPy integer, as datasets may give
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MirrorworldError(f"row field {key} must be a non-negative integer, not {str(value)[:40]!r}")
    return value


def _spec_from_row(row: dict[str, Any], split: Split) -> dict[str, Any]:
    """The task a row names: ``task_id``, or ``family`` and ``seed``, or ``index`` (or ``seed``) of ``split``."""
    spec: dict[str, Any] = {}
    if row.get("task_id") is not None:
        spec["task_id"] = row["task_id"]
    elif row.get("family") is not None:
        spec["family"] = str(row["family"])
        spec["seed"] = _row_int(row, "seed")
    else:
        key = "index" if row.get("index") is not None else "seed"
        spec["index"] = _row_int(row, key) if row.get(key) is not None else 0
        spec["split"] = row.get("split") or split
    return spec


class MirrorworldEnvironment:
    """Base class of the generated environments (see the module docstring).

    Everything here but ``reset`` and ``get_reward`` is private, because TRL
    exposes every public method as a tool.
    """

    world_name: ClassVar[str]
    split: ClassVar[Split] = "train"
    _make_backend: ClassVar[Any]

    def __init__(self) -> None:
        self._backend: _Backend = type(self)._make_backend()

    def reset(self, **row: Any) -> str:
        """Start the episode a dataset row names; return the task's instruction."""
        return self._backend.start(_spec_from_row(row, self.split))

    def get_reward(self) -> float:
        """The verifier's score of the episode (1.0 only when every gate passes)."""
        return self._backend.score()

    def _call(self, tool: str, args: dict[str, Any]) -> str:
        return self._backend.call(tool, args)

    def _close(self) -> None:
        """Discard the current episode (and, remote, close the session)."""
        self._backend.close()


_JSON_TO_PY: dict[str, Any] = {"integer": int, "number": float, "string": str, "boolean": bool}


def _annotation(param: Param) -> Any:
    schema = param.schema
    kind = schema.get("type")
    if "enum" in schema:
        base: Any = Literal[tuple(schema["enum"])]
    elif kind == "array":
        base = list[str]
    else:
        base = _JSON_TO_PY[str(kind)]
    return base if param.required else base | None


def _docstring(spec: ToolSpec) -> str:
    lines = [spec.description or spec.name, ""]
    if spec.params:
        lines.append("Args:")
        for p in spec.params:
            # TRL/transformers read "(choices: [...])" at a line's end as an enum; keep prose free of it.
            text = re.sub(r"\s+", " ", str(p.schema.get("description", p.name))).strip() or p.name
            lines.append(f"    {p.name}: {text}")
        lines.append("")
    lines.append("Returns:")
    lines.append('    The tool result as JSON (an error is {"error": {"code", "message"}}).')
    return "\n".join(lines)


def _method(spec: ToolSpec) -> Any:
    name = spec.name

    def method(self: MirrorworldEnvironment, **kwargs: Any) -> str:
        args = {k: (str(v) if isinstance(v, Decimal) else v) for k, v in kwargs.items()}
        return self._call(name, args)

    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    for p in spec.params:
        annotations[p.name] = _annotation(p)
        default = inspect.Parameter.empty if p.required else (p.default if not isinstance(p.default, Decimal) else None)
        params.append(
            inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotations[p.name])
        )
    annotations["return"] = str
    method.__name__ = name
    method.__qualname__ = name
    method.__doc__ = _docstring(spec)
    method.__annotations__ = annotations
    method.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    return method


def environment_factory(
    world: str | World = "helpdesk",
    *,
    split: Split = "train",
    max_steps: int = 30,
    tools: list[str] | tuple[str, ...] | None = None,
    base_url: str | None = None,
    token: str | None = None,
    registry: Registry | None = None,
) -> type[MirrorworldEnvironment]:
    """A class to pass as ``GRPOTrainer(environment_factory=...)`` (see the module docstring).

    ``tools`` limits the methods to those tools (the terminal tool is always
    kept). With ``base_url`` every environment plays its episodes on that
    session server.
    """
    w = (registry or default).get(world) if isinstance(world, str) else world
    specs = list(w.tools)
    if tools is not None:
        unknown = set(tools) - set(w.tool_names)
        if unknown:
            raise MirrorworldError(f"world {w.name} has no tool {sorted(unknown)[0]!r}")
        specs = [s for s in specs if s.name in tools or s.kind == "terminal"]
    clash = {s.name for s in specs} & _RESERVED
    if clash or any(s.name.startswith("_") for s in specs):
        raise WorldError(f"world {w.name} has a tool named like a TRL hook or a private method: {sorted(clash)}")

    def make_backend() -> _Backend:
        if base_url is not None:
            return _Remote(base_url, w.name, max_steps, token)
        return _Local(w, max_steps)

    namespace: dict[str, Any] = {s.name: _method(s) for s in specs}
    namespace["world_name"] = w.name
    namespace["split"] = split
    namespace["_make_backend"] = staticmethod(make_backend)
    namespace["__doc__"] = f"{w.id} as a TRL environment: one method per tool, reset(**row), get_reward()."
    namespace["__module__"] = __name__
    title = "".join(part.capitalize() for part in w.name.split("_"))
    return type(f"{title}Environment", (MirrorworldEnvironment,), namespace)


def task_rows(
    world: str | World = "helpdesk",
    count: int = 64,
    *,
    split: Split = "train",
    families: list[str] | None = None,
    preamble: str = PREAMBLE,
    registry: Registry | None = None,
) -> list[dict[str, Any]]:
    """Dataset rows for GRPO: a conversational ``prompt`` and the ``task_id`` that ``reset`` starts."""
    w = (registry or default).get(world) if isinstance(world, str) else world
    rows = []
    for i in range(count):
        task = w.task_for(split, i, families)
        rows.append({"prompt": [{"role": "user", "content": preamble}], "task_id": task.id})
    return rows


def tool_methods(env: MirrorworldEnvironment) -> dict[str, Any]:
    """The tools TRL exposes to the model, by name: every public method but ``reset`` and ``get_reward``
    (as ``GRPOTrainer`` lists them), bound to ``env``. A script that plays the model outside the
    trainer (an evaluation) calls these."""
    return {
        name: getattr(env, name)
        for name, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
        if name not in _RESERVED and not name.startswith("_")
    }


TINY_SPECIAL = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
)
"""The special tokens of the Qwen2.5 chat template, which :func:`tiny_model`'s tokenizer keeps whole."""


def tiny_model(world: str | World = "helpdesk", *, seed: int = 0, registry: Registry | None = None) -> tuple[Any, Any]:
    """A one-layer Qwen2 with random weights and a tokenizer for it, built here: ``(model, tokenizer)``.

    The tokenizer is a byte-level BPE (800 tokens) trained on the world's tool
    schemas and a few instructions, with the Qwen2.5 chat template TRL ships
    (so TRL parses its ``<tool_call>`` blocks as it parses a real Qwen's). The
    model is untrained: it exercises a training pipeline end to end, it does
    not solve tasks. Needs ``transformers``, ``tokenizers`` and ``trl``.
    """
    import json

    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
    from trl.chat_template_utils import qwen2_5_chat_template

    w = (registry or default).get(world) if isinstance(world, str) else world
    corpus = [json.dumps(t.openai_schema()) for t in w.tools]
    corpus += [w.task_for("train", i).instruction for i in range(20)]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(
        corpus,
        trainers.BpeTrainer(
            vocab_size=800,
            special_tokens=list(TINY_SPECIAL),
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    tokenizer = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>", padding_side="left"
    )
    tokenizer.chat_template = qwen2_5_chat_template
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=16384,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    with torch.random.fork_rng(devices=[]):  # seeded weights, the caller's random state untouched
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    return model, tokenizer
