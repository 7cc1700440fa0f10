"""A run file as a dataset: one row per episode, for fine-tuning, analysis or a hub.

:func:`episode_rows` turns each episode of a :class:`~mirrorworld.run.trajectories.RunFile`
into one JSON-ready row; :func:`export_run` writes the rows as

==========  ===================================================================
``jsonl``   one JSON object per line (no dependency)
``parquet`` one Parquet file (needs ``pyarrow``: the ``train`` or ``hf`` extra)
``hf``      a Hugging Face ``datasets`` folder (``Dataset.save_to_disk``; load
            it with ``datasets.load_from_disk``)
==========  ===================================================================

A row holds:

* ``messages``: the conversation in OpenAI chat format, as the agent saw and
  wrote it, except that each tool call's ``function.arguments`` is the JSON
  **object** the agent sent, not its text: chat templates render an object as
  the call's arguments and a string as a quoted string, so a dataset of
  strings teaches a model double-encoded calls. Arguments that are not a JSON
  object (an agent's malformed call, kept because it is what was graded) stay
  the text the agent wrote;
* ``tools``: the world's tools in OpenAI form (``mirrorworld tools --format
  openai``), when the world the run names is installed with the same content
  hash; ``None`` otherwise (the caller is told);
* the episode's place and outcome: ``run``, ``episode``, ``task_id``,
  ``family``, ``seed``, ``split``, ``trial``, ``agent``, ``status``
  (``passed``, ``failed`` or ``errored``: an errored episode is an endpoint,
  world or infrastructure failure, not a failing score), ``passed``, ``score``,
  ``reward``, ``steps``, ``seconds``;
* ``verdict`` (every check and its evidence), ``failure`` (what stopped an
  errored episode), ``usage`` (tokens, when the agent reported them);
* ``world``, ``world_hash`` and ``model``, and ``meta``: the run's metadata
  (agent configuration, sampling, versions, options; never a secret, since a
  run file holds none).

The nested values whose shape differs from row to row (``messages``,
``tools``, ``verdict``, ``failure``, ``usage``, ``meta``) are never given a
columnar struct type: one inferred from tool arguments would merge every
tool's argument names into one struct, and each call would read back with
every other tool's arguments as ``null``. In ``hf`` they are ``datasets.Json``
features (``messages`` and ``tools`` lists of them), so ``ds[0]["messages"]``
is the list of message dicts, arguments as objects, ready for a chat template
or TRL's ``SFTTrainer``; in ``parquet`` they are JSON text columns (read them
with ``json.loads``, or :func:`load_rows`, which reads every format back to
the rows :func:`episode_rows` gave). The ``hf`` folder stores the exact JSON
text Python's ``json`` writes; ``datasets`` decodes it with pandas' ujson,
which may read a float one unit in its last place off (``0.036`` as
``0.036000000000000004``), so :func:`load_rows` decodes the stored text itself.

A run file is untrusted input: it is read through :class:`RunFile` (checked,
bounded), and only data is written, never evaluated.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal, get_args

from mirrorworld.errors import MirrorworldError
from mirrorworld.run.runner import EpisodeRecord
from mirrorworld.run.trajectories import RunFile

__all__ = ["FORMATS", "JSON_COLUMNS", "ExportFormat", "episode_rows", "export_run", "load_rows", "row_of"]

ExportFormat = Literal["jsonl", "parquet", "hf"]
FORMATS: tuple[ExportFormat, ...] = get_args(ExportFormat)
JSON_COLUMNS = ("messages", "tools", "verdict", "failure", "usage", "meta")
"""The columns ``parquet`` and ``hf`` store as JSON text (see the module docstring)."""


def _arguments(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, dict) else text


def _messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for message in messages:
        calls = message.get("tool_calls")
        if isinstance(calls, list):
            message = {**message, "tool_calls": [_call(c) for c in calls]}
        out.append(message)
    return out


def _call(call: Any) -> Any:
    if isinstance(call, dict) and isinstance(call.get("function"), dict):
        function = call["function"]
        return {**call, "function": {**function, "arguments": _arguments(function.get("arguments"))}}
    return call


def _status(record: EpisodeRecord) -> str:
    if record.errored:
        return "errored"
    return "passed" if record.passed else "failed"


def row_of(record: EpisodeRecord, meta: dict[str, Any], tools: list[dict[str, Any]] | None, run: str) -> dict[str, Any]:
    """One episode as an export row (see the module docstring)."""
    return {
        "run": run,
        "episode": record.index,
        "task_id": record.task_id,
        "family": record.family,
        "seed": record.seed,
        "split": record.split,
        "trial": record.trial,
        "agent": record.agent,
        "model": meta.get("model") if isinstance(meta.get("model"), str) else None,
        "world": meta.get("world") if isinstance(meta.get("world"), str) else None,
        "world_hash": record.world_hash,
        "status": _status(record),
        "passed": bool(record.passed),
        "score": float(record.score),
        "reward": float(record.reward),
        "steps": record.steps,
        "seconds": float(record.seconds),
        "messages": _messages(record.messages),
        "tools": tools,
        "verdict": record.verdict or None,
        "failure": record.failure.to_dict() if record.failure is not None else None,
        "usage": record.usage,
        "meta": meta,
    }


def _world_tools(meta: dict[str, Any], registry: Any) -> list[dict[str, Any]] | None:
    """The run's world's tools in OpenAI form, if that exact build is installed."""
    from mirrorworld.core.schemas import tool_schemas

    options = meta.get("options")
    names = [meta.get("world")]
    if isinstance(options, dict):
        names.insert(0, options.get("world"))
    for name in names:
        if not isinstance(name, str) or "@" in name:
            continue
        try:
            world = registry.get(registry.spec(name).name)
        except (MirrorworldError, KeyError, ValueError):
            continue
        if world.content_hash == meta.get("world_hash"):
            return tool_schemas(world.tools, "openai")
    return None


def episode_rows(run: RunFile, *, registry: Any = None) -> tuple[Iterator[dict[str, Any]], bool]:
    """Every episode of ``run`` as a row, in order, and whether the rows carry the world's tools."""
    from mirrorworld.core.registry import default

    meta = run.meta
    tools = _world_tools(meta, registry or default)
    name = run.path.name

    def rows() -> Iterator[dict[str, Any]]:
        for record in run.episodes():
            yield row_of(record, meta, tools, name)

    return rows(), tools is not None


def _jsonl(rows: Iterator[dict[str, Any]], out: Path) -> int:
    n = 0
    with out.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False, sort_keys=False) + "\n")
            n += 1
    return n


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (json.dumps(v, ensure_ascii=False) if k in JSON_COLUMNS else v) for k, v in row.items()}


def _json_text(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with each nested value as the JSON text :mod:`json` writes (``messages`` and ``tools`` item by
    item): ``datasets.Json`` stores a string as it is, where it would encode an object with ujson."""

    def text(k: str, v: Any) -> Any:
        if k not in JSON_COLUMNS or v is None:
            return v
        if k in _LISTED:
            return [json.dumps(x, ensure_ascii=False) for x in v]
        return json.dumps(v, ensure_ascii=False)

    return {k: text(k, v) for k, v in row.items()}


_LISTED = ("messages", "tools")


def _need(module: str, extra: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        name = module.split(".")[0]
        raise MirrorworldError(f"this export format needs {name}: pip install -e '.[{extra}]'") from None


def _parquet(rows: Iterator[dict[str, Any]], out: Path) -> int:
    pa = _need("pyarrow", "hf")
    pq = _need("pyarrow.parquet", "hf")
    flat = [_flat(r) for r in rows]
    table = pa.Table.from_pylist(flat, schema=_arrow_schema(pa)) if flat else _arrow_schema(pa).empty_table()
    pq.write_table(table, out)
    return len(flat)


def _arrow_schema(pa: Any) -> Any:
    text, integer, number, flag = pa.string(), pa.int64(), pa.float64(), pa.bool_()
    kinds = {
        "run": text, "episode": integer, "task_id": text, "family": text, "seed": integer, "split": text,
        "trial": integer, "agent": text, "model": text, "world": text, "world_hash": text, "status": text,
        "passed": flag, "score": number, "reward": number, "steps": integer, "seconds": number,
    }  # fmt: skip
    return pa.schema([*kinds.items(), *((c, text) for c in JSON_COLUMNS)])


def _hf(rows: Iterator[dict[str, Any]], out: Path) -> int:
    datasets = _need("datasets", "hf")
    if not hasattr(datasets, "Json"):
        raise MirrorworldError(f"the hf export needs datasets>=5.2 (installed: {datasets.__version__})")
    scalar = {"string": "string", "int64": "int64", "double": "float64", "bool": "bool"}
    pa = _need("pyarrow", "hf")
    features = datasets.Features(
        {
            **{f.name: datasets.Value(scalar[str(f.type)]) for f in _arrow_schema(pa) if f.name not in JSON_COLUMNS},
            **{c: datasets.List(datasets.Json()) if c in _LISTED else datasets.Json() for c in JSON_COLUMNS},
        }
    )
    listed = [_json_text(r) for r in rows]
    ds = datasets.Dataset.from_list(listed, features=features)
    ds.save_to_disk(str(out))
    return len(listed)


_WRITERS: dict[str, Callable[[Iterator[dict[str, Any]], Path], int]] = {"jsonl": _jsonl, "parquet": _parquet, "hf": _hf}


def check_out(out: str | Path, fmt: ExportFormat) -> Path:
    """The output path, checked before anything is read (:func:`mirrorworld.outputs.check_output_path`);
    an ``hf`` folder must also be new or empty."""
    from mirrorworld.outputs import check_output_path

    path = Path(out)
    if fmt != "hf":
        return check_output_path(out)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise MirrorworldError(f"cannot write the dataset to {out}: it exists and is not an empty folder")
    if not path.parent.is_dir():
        raise MirrorworldError(f"cannot write {out}: the folder {path.parent} does not exist")
    return path


def export_run(
    run_path: str | Path, fmt: ExportFormat, out: str | Path, *, registry: Any = None
) -> tuple[Path, int, bool]:
    """Write the run at ``run_path`` as ``fmt`` to ``out``; return the path, the rows written and whether tools are in.

    The export is written beside ``out`` and moved into place whole, so an
    interrupted or failed export leaves no partial file.
    """
    if fmt not in _WRITERS:
        raise MirrorworldError(f"unknown export format {fmt!r} (known: {', '.join(FORMATS)})")
    path = check_out(out, fmt)
    with RunFile.open(run_path) as run:
        rows, with_tools = episode_rows(run, registry=registry)
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
        try:
            target = tmp / ("data" if fmt == "hf" else path.name)
            n = _WRITERS[fmt](rows, target)
            if fmt == "hf" and path.is_dir():
                path.rmdir()
            os.replace(target, path)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return path, n, with_tools


def load_rows(path: str | Path) -> list[dict[str, Any]]:
    """The rows of an export (any format) with their nested values decoded: what :func:`episode_rows` gave."""
    p = Path(path)
    if p.is_dir():
        datasets = _need("datasets", "hf")
        table = datasets.load_from_disk(str(p)).data.table  # the stored JSON text, decoded exactly below
        return [_decoded(r) for r in table.to_pylist()]
    if p.suffix == ".jsonl":
        return [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]
    else:
        pq = _need("pyarrow.parquet", "hf")
        records = pq.read_table(p).to_pylist()
    return [{k: (json.loads(v) if k in JSON_COLUMNS and v is not None else v) for k, v in r.items()} for r in records]


def _decoded(record: dict[str, Any]) -> dict[str, Any]:
    def value(k: str, v: Any) -> Any:
        if k not in JSON_COLUMNS or v is None:
            return v
        return [json.loads(x) for x in v] if k in _LISTED else json.loads(v)

    return {k: value(k, v) for k, v in record.items()}
