"""``mirrorworld export RUN --format jsonl|parquet|hf``: a run as a dataset, arguments as objects."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from mirrorworld.cli import main
from mirrorworld.run.export import FORMATS, JSON_COLUMNS, export_run, load_rows

pytest.importorskip("datasets")
SECRET = "sk-export-test-secret-4242"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """An oracle run of every family, and a run against a failing endpoint (errored episodes)."""
    from mirrorworld.agents.endpoint import ScriptedEndpoint
    from mirrorworld.core.registry import default
    from mirrorworld.run import plan_episodes

    world = default.get("helpdesk")
    ids = [world.task_at(p.task).id for p in plan_episodes(world, episodes=4, split="test")]
    root = tmp_path_factory.mktemp("export")
    oracle = root / "oracle.sqlite"
    assert main(["run", "--agent", "oracle", "--episodes", "9", "--out", str(oracle)]) == 0
    faulty = root / "faulty.sqlite"
    faults = {ids[1]: "http500", ids[2]: "bad_arguments"}
    os.environ["MW_EXPORT_KEY"] = SECRET
    try:
        with ScriptedEndpoint.for_run(world, episodes=4, faults=faults) as endpoint:
            argv = ["run", "--agent", "openai", "--model", "scripted", "--base-url", endpoint.url, "--retries", "0"]
            main([*argv, "--api-key-env", "MW_EXPORT_KEY", "--episodes", "4", "--out", str(faulty), "--no-progress"])
    finally:
        del os.environ["MW_EXPORT_KEY"]
    return {"oracle": oracle, "faulty": faulty}


def path_text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _calls(row: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for m in row["messages"] if m.get("role") == "assistant" for c in m.get("tool_calls") or []]


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_reads_back_the_same_rows(runs: dict[str, Path], tmp_path: Path, fmt: str) -> None:
    jsonl, n, tools = export_run(runs["oracle"], "jsonl", tmp_path / "a.jsonl")
    assert n == 9 and tools
    out = {"jsonl": tmp_path / "b.jsonl", "parquet": tmp_path / "b.parquet", "hf": tmp_path / "b-hf"}[fmt]
    path, n, _ = export_run(runs["oracle"], fmt, out)  # type: ignore[arg-type]
    assert n == 9 and path == out
    got, want = load_rows(path), load_rows(jsonl)
    if got != want:  # name the first differing column
        diff = next((i, k) for i, (g, w) in enumerate(zip(got, want, strict=True)) for k in w if g.get(k) != w[k])
        raise AssertionError(
            f"row {diff[0]} column {diff[1]}: {got[diff[0]][diff[1]]!r:.600} != {want[diff[0]][diff[1]]!r:.600}"
        )


def test_rows_hold_messages_with_argument_objects_tools_and_verdicts(runs: dict[str, Path], tmp_path: Path) -> None:
    from mirrorworld.core.registry import default
    from mirrorworld.run import RunFile

    path, _, _ = export_run(runs["oracle"], "jsonl", tmp_path / "o.jsonl")
    rows = load_rows(path)
    with RunFile.open(runs["oracle"]) as run:
        records = list(run.episodes())
    tools = [t.openai_schema() for t in default.get("helpdesk").tools]
    for row, record in zip(rows, records, strict=True):
        assert row["task_id"] == record.task_id and row["family"] == record.family and row["episode"] == record.index
        assert row["status"] == "passed" and row["passed"] is True
        assert row["verdict"]["passed"] is True and row["verdict"]["breakdown"]
        assert row["tools"] == tools
        assert row["world"] == "mirrorworld/Helpdesk-v0" and row["meta"]["agent"] == "oracle"
        calls = _calls(row)
        assert calls, row["task_id"]
        for call, recorded in zip(calls, record.calls, strict=True):
            args = call["function"]["arguments"]
            assert isinstance(args, dict), "arguments are an object, not JSON text"
            assert call["function"]["name"] == recorded["tool"] and set(args) <= set(recorded["args"])
        # Tool results stay what the agent read (message content is text in the OpenAI format).
        assert all(isinstance(m["content"], str) for m in row["messages"] if m["role"] == "tool")


def test_errored_episodes_are_errored_with_their_failure(runs: dict[str, Path], tmp_path: Path) -> None:
    rows = load_rows(export_run(runs["faulty"], "jsonl", tmp_path / "f.jsonl")[0])
    status = {r["episode"]: r["status"] for r in rows}
    assert status[1] == "errored" and status[0] == "passed" and status[3] == "passed"
    errored = next(r for r in rows if r["episode"] == 1)
    assert errored["failure"]["boundary"] == "infrastructure" and "500" in errored["failure"]["message"]
    assert errored["verdict"] is None
    assert rows[0]["model"] == "scripted" and rows[0]["usage"]["total_tokens"] > 0
    # A malformed call is kept as the text the model wrote: that is what was graded.
    bad = next(r for r in rows if r["episode"] == 2)
    assert any(isinstance(c["function"]["arguments"], str) for c in _calls(bad))
    assert (
        SECRET not in path_text(tmp_path / "f.jsonl")
        and rows[0]["meta"]["agent_config"]["api_key_env"] == "MW_EXPORT_KEY"
    )


def test_hf_dataset_is_native_messages_for_chat_templates(runs: dict[str, Path], tmp_path: Path) -> None:
    import datasets

    path, _, _ = export_run(runs["oracle"], "hf", tmp_path / "ds")
    ds = datasets.load_from_disk(str(path))
    assert len(ds) == 9 and ds.features["passed"].dtype == "bool"
    message = next(m for m in ds[0]["messages"] if m.get("tool_calls"))
    assert isinstance(message["tool_calls"][0]["function"]["arguments"], dict)
    assert isinstance(ds[0]["tools"][0]["function"]["parameters"], dict)
    # Filtering on a typed column works as a user would write it.
    assert len(ds.filter(lambda r: r["status"] == "passed")) == 9


def test_parquet_columns_are_typed_and_nested_values_json(runs: dict[str, Path], tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    path, _, _ = export_run(runs["oracle"], "parquet", tmp_path / "o.parquet")
    table = pq.read_table(path)
    assert str(table.schema.field("seed").type) == "int64" and str(table.schema.field("passed").type) == "bool"
    for column in JSON_COLUMNS:
        assert str(table.schema.field(column).type) == "string"
    first = json.loads(table.column("messages")[0].as_py())
    assert first[0]["role"] in ("system", "user")


def test_cli_export_default_paths_and_json(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "copy.sqlite"
    run.write_bytes(runs["oracle"].read_bytes())
    assert main(["export", str(run), "--format", "jsonl"]) == 0
    assert "wrote 9 episodes" in capsys.readouterr().out
    assert (tmp_path / "copy.jsonl").is_file()
    assert main(["export", str(run), "--format", "hf", "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["rows"] == 9 and facts["tools"] is True and Path(facts["path"]) == tmp_path / "copy-hf"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: ["export", str(d / "missing.sqlite"), "--format", "jsonl"], "no run file"),
        (lambda d: ["export", "{run}", "--format", "jsonl", "--out", str(d / "nowhere" / "x.jsonl")], "does not exist"),
        (lambda d: ["export", "{run}", "--format", "jsonl", "--out", str(d)], "is a folder"),
        (lambda d: ["export", "{run}", "--format", "hf", "--out", str(d)], "not an empty folder"),
        (lambda d: ["export", "{bad}", "--format", "jsonl", "--out", str(d / "y.jsonl")], "run file"),
    ],
)
def test_cli_errors_are_one_line_and_write_nothing(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], make: Any, message: str
) -> None:
    bad = tmp_path / "bad.sqlite"
    sqlite3.connect(bad).execute("CREATE TABLE meta (x)").connection.commit()
    (tmp_path / "keep.txt").write_text("x")
    argv = [a.replace("{run}", str(runs["oracle"])).replace("{bad}", str(bad)) for a in make(tmp_path)]
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(argv) != 0
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_hostile_text_is_data(tmp_path: Path) -> None:
    """Agent text in a run (control characters, markup, JSON look-alikes) is exported as data, unchanged."""
    from mirrorworld.run import RunFile
    from mirrorworld.run.runner import EpisodeRecord

    hostile = '\x1b[2J<script>alert(1)</script>", "passed": true, "x": "\u202e'
    run = RunFile.create(
        tmp_path / "h.sqlite", {"world": "mirrorworld/helpdesk-v0", "world_hash": "0" * 64, "agent": "x"}
    )
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "respond", "arguments": json.dumps({"message": hostile})},
    }
    run.add(
        EpisodeRecord(
            index=0,
            task_id="t",
            family="f",
            seed=0,
            split="test",
            trial=0,
            agent="x",
            passed=False,
            score=0.0,
            reward=0.0,
            steps=1,
            messages=[
                {"role": "user", "content": hostile},
                {"role": "assistant", "content": None, "tool_calls": [call]},
            ],
            calls=[{"tool": "respond", "args": {"message": hostile}}],
            verdict={},
            task={},
            world_hash="0" * 64,
            error=None,
            seconds=0.0,
        )
    )
    run.close()
    path, n, tools = export_run(tmp_path / "h.sqlite", "jsonl", tmp_path / "h.jsonl")
    assert n == 1 and tools is False  # that world build is not installed: no tool schemas claimed
    (row,) = load_rows(path)
    assert row["messages"][0]["content"] == hostile and row["passed"] is False
    assert _calls(row)[0]["function"]["arguments"] == {"message": hostile}
    assert "\x1b" not in path.read_text(encoding="utf-8")  # escaped as \u001b in the JSON text


def test_hf_reads_back_floats_exactly(tmp_path: Path) -> None:
    """``datasets`` decodes JSON with pandas' ujson, which reads 0.036 as 0.036000000000000004: the folder
    stores the text :mod:`json` wrote and :func:`load_rows` decodes that text itself."""
    from mirrorworld.run import export

    pa = pytest.importorskip("pyarrow")
    row: dict[str, Any] = {f.name: None for f in export._arrow_schema(pa)} | {"run": "r", "seconds": 0.036}
    row |= {"meta": {"summary": {"seconds": 0.036}}, "messages": [{"role": "user", "content": "0.1+0.2"}], "tools": []}
    assert export._hf(iter([row]), tmp_path / "ds") == 1
    (got,) = load_rows(tmp_path / "ds")
    assert got["meta"] == {"summary": {"seconds": 0.036}} and got["seconds"] == 0.036
    assert got["messages"] == row["messages"] and got["tools"] == [] and got["verdict"] is None
    import datasets

    assert datasets.load_from_disk(str(tmp_path / "ds"))[0]["messages"] == row["messages"]  # objects for datasets users
