"""Hostile run files, JSONL and traces: every reader refuses them in one line or reads them, never more.

(And hostile numbers handed to ``Session.call`` from Python: a refused call, never an exception.)

A corpus of files broken one way each (a format value that is not JSON,
missing tables and columns, JSON null or 100,000 levels deep, wrong record
shapes, tasks without keys, seeds of 5,000 digits, invalid UTF-8, views over
an endless recursive query...) is fed to every command that reads such a
file: ``show`` (three ways), ``audit-run``, ``fidelity --trajectories`` and
``run --agent replay``. None may end in an internal error (exit 70), print a
traceback, print more than one line on stderr or run on; a file the reader
refuses is exit 2 with a line naming the file.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mirrorworld.agents import make_agent
from mirrorworld.cli import main
from mirrorworld.core.registry import default
from mirrorworld.core.session import ToolResult
from mirrorworld.errors import RunFileError
from mirrorworld.fidelity.traces import recorded_traces
from mirrorworld.run import RunFile, run_episodes, summarize
from mirrorworld.worlds.helpdesk import HelpdeskWorld

DEEP = "[" * 100_000 + "]" * 100_000
DEEP_OBJECT = '{"a":' * 100_000 + "1" + "}" * 100_000
NESTED_500 = "[" * 500 + "]" * 500
SEED_5000 = "9" * 5000
RECURSIVE = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r)"


def base_run(path: Path, world: HelpdeskWorld) -> Path:
    """A real run file of two oracle episodes, the material every hostile variant is cut from."""
    with RunFile.create(path, {"world": world.id, "agent": "oracle", "split": "test"}) as run:
        records = run_episodes(world, make_agent("oracle"), episodes=2, on_record=run.add)
        run.set_meta("summary", summarize(records))
    return path


def _edit(*statements: str | tuple[str, tuple[Any, ...]]) -> Callable[[sqlite3.Connection], None]:
    def apply(conn: sqlite3.Connection) -> None:
        for statement in statements:
            sql, params = statement if isinstance(statement, tuple) else (statement, ())
            conn.execute(sql, params)

    return apply


def _loosened(conn: sqlite3.Connection, table: str) -> None:
    """Rebuild ``table`` without types or NOT NULL, so a column can hold anything."""
    cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
    decl = ", ".join(("idx INTEGER PRIMARY KEY" if c == "idx" else c) for c in cols)
    conn.execute(f"CREATE TABLE loose ({decl})")
    conn.execute(f"INSERT INTO loose SELECT * FROM {table}")
    conn.execute(f"DROP TABLE {table}")
    conn.execute(f"ALTER TABLE loose RENAME TO {table}")


def _set(column: str, value: Any, *, loose: bool = False) -> Callable[[sqlite3.Connection], None]:
    def apply(conn: sqlite3.Connection) -> None:
        if loose:
            _loosened(conn, "episodes")
        conn.execute(f"UPDATE episodes SET {column}=? WHERE idx=0", (value,))

    return apply


def _meta(key: str, value: Any, *, loose: bool = False) -> Callable[[sqlite3.Connection], None]:
    def apply(conn: sqlite3.Connection) -> None:
        if loose:
            _loosened(conn, "meta")
        conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    return apply


def _view(table: str) -> Callable[[sqlite3.Connection], None]:
    """``table`` replaced by a view over an endless recursive query (sorted, so SQLite spills it to disk)."""

    def apply(conn: sqlite3.Connection) -> None:
        cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
        conn.execute(f"ALTER TABLE {table} RENAME TO real_{table}")
        picked = ", ".join(f"t.{c}" for c in cols)
        conn.execute(f"CREATE VIEW {table} AS {RECURSIVE} SELECT {picked} FROM r, real_{table} t ORDER BY r.n DESC")

    return apply


def _virtual(conn: sqlite3.Connection) -> None:
    cols = [r[1] for r in conn.execute("PRAGMA table_info(episodes)")]
    conn.execute("ALTER TABLE episodes RENAME TO real_episodes")
    conn.execute(f"CREATE VIRTUAL TABLE episodes USING fts5({', '.join(cols)})")
    conn.execute("INSERT INTO episodes SELECT * FROM real_episodes")


RUN_FILES: dict[str, Callable[[sqlite3.Connection], None] | bytes | None] = {
    # meta
    "format-not-json": _meta("format", "mirrorworld-run/1"),
    "format-null": _meta("format", None, loose=True),
    "format-other": _meta("format", json.dumps("mirrorworld-run/9")),
    "format-missing": _edit("DELETE FROM meta WHERE key='format'"),
    "meta-missing": _edit("DROP TABLE meta"),
    "meta-value-not-json": _meta("agent", "{oops"),
    "meta-value-null": _meta("agent", None, loose=True),
    "meta-value-deep": _meta("summary", DEEP),
    "meta-value-invalid-utf8": _edit("UPDATE meta SET value=CAST(X'22ff22' AS TEXT) WHERE key='agent'"),
    "meta-key-blob": _meta(b"\xff\x00", "1"),  # type: ignore[arg-type]
    "meta-world-not-text": _meta("world", '{"name": [1, 2]}'),
    "summary-not-a-summary": _meta("summary", '{"families": {"x": 1}}'),
    "summary-infinite": _meta("summary", '{"episodes": 1e999, "families": {}}'),
    "summary-nested": _meta("summary", '{"families": ' + NESTED_500 + "}"),
    # the episodes table
    "episodes-missing": _edit("DROP TABLE episodes"),
    "column-missing": _edit("ALTER TABLE episodes DROP COLUMN calls"),
    "messages-null": _set("messages", "null"),
    "messages-deep": _set("messages", DEEP),
    "messages-nested": _set("messages", '[{"role": "user", "content": ' + NESTED_500 + "}]"),
    "messages-blob": _set("messages", b"\x00\xff"),
    "messages-bad-shapes": _set(
        "messages",
        json.dumps(
            [
                {"role": 5, "content": {"a": [1]}, "tool_calls": "abc"},
                {"role": "assistant", "tool_calls": [1, {"function": 5}, {"function": {"name": [1], "arguments": {}}}]},
                {"role": "tool", "content": None},
            ]
        ),
    ),
    "messages-not-objects": _set("messages", "[1, 2]"),
    "verdict-deep": _set("verdict", DEEP_OBJECT),
    "verdict-bad-shape": _set("verdict", '{"passed": true, "score": "x"}'),
    "task-empty": _set("task", "{}"),
    "task-deep": _set("task", DEEP_OBJECT),
    "task-seed-5000-digits": _set("task", '{"world": "helpdesk", "family": "triage", "seed": ' + SEED_5000 + "}"),
    "task-wrong-shapes": _set(
        "task",
        json.dumps(
            {
                "world": 1,
                "family": [2],
                "seed": "x",
                "instruction": None,
                "setup": 5,
                "gold": {"a": 1},
                "scope": "s",
                "targets": [1],
                "checks": [[]],
                "facts": [{}],
            }
        ),
    ),
    "seed-5000-digits": _set("seed", SEED_5000),
    "seed-huge-real": _set("seed", 1e308),
    "task-id-int": _set("task_id", 5),
    "task-id-invalid-utf8": _edit("UPDATE episodes SET task_id=CAST(X'41ff42' AS TEXT) WHERE idx=0"),
    "calls-junk": _set("calls", '[{"x": 1}, {"tool": 10, "args": [1, 2]}]'),
    "calls-deep": _set("calls", DEEP),
    "failure-list": _set("failure", "[1]"),
    "failure-deep": _set("failure", DEEP),
    "error-int": _set("error", 5, loose=True),
    "steps-null": _set("steps", None, loose=True),
    # the database itself
    "view-episodes": _view("episodes"),
    "view-meta": _view("meta"),
    "virtual-episodes": _virtual,
    "trigger-on-episodes": _edit("CREATE TRIGGER t AFTER INSERT ON episodes BEGIN SELECT 1; END"),
    "generated-column": _edit("ALTER TABLE episodes ADD COLUMN g BLOB GENERATED ALWAYS AS (zeroblob(100000000))"),
    "empty-file": b"",
    "junk-bytes": b"not a database at all" * 200,
    "truncated": None,  # the first page of the base file only
}
"""Run-file variants: an edit of the base file, the file's bytes, or None for the truncated base."""

JSONL: dict[str, bytes] = {
    "not-json": b"{oops\n",
    "a-list": b"[1, 2]\n",
    "no-task-id": b'{"messages": []}\n',
    "task-id-without-seed": b'{"task_id": "triage", "messages": []}\n',
    "task-id-int": b'{"task_id": 5, "messages": []}\n',
    "seed-5000-digits": b'{"task_id": "triage/' + SEED_5000.encode() + b'", "messages": []}\n',
    "seed-negative": b'{"task_id": "triage/-1", "messages": []}\n',
    "unknown-family": b'{"task_id": "no_such_family/0", "messages": []}\n',
    "messages-null": b'{"task_id": "triage/0", "messages": null}\n',
    "messages-not-objects": b'{"task_id": "triage/0", "messages": [1, "x"]}\n',
    "messages-nested": b'{"task_id": "triage/0", "messages": [{"role": "assistant", "content": '
    + NESTED_500.encode()
    + b"}]}\n",
    "deep": DEEP.encode() + b"\n",
    "invalid-utf8": b'{"task_id": "triage/0", "messages": [{"role": "assistant", "content": "\xff\xfe"}]}\n',
    "nul-bytes": b"\x00\x00\x00\n",
}
"""``audit-run`` JSONL variants (``{"task_id": ..., "messages": [...]}`` per line)."""

TRACES: dict[str, bytes] = {
    "not-json": b"{oops\n",
    "a-list": b"[1]\n",
    "no-calls": b'{"name": "x"}\n',
    "calls-not-a-list": b'{"calls": {"tool": "get_sale"}}\n',
    "calls-junk": b'{"calls": [1, "x", null]}\n',
    "tool-not-text": b'{"calls": [{"tool": {"a": 1}, "args": {}}]}\n',
    "args-not-an-object": b'{"calls": [{"tool": "get_sale", "args": 5}]}\n',
    "args-nested": b'{"calls": [{"tool": "get_sale", "args": {"sale_id": ' + NESTED_500.encode() + b"}}]}\n",
    "deep": DEEP.encode() + b"\n",
    "invalid-utf8": b'{"calls": [{"tool": "get_sale\xff"}]}\n',
}
"""``fidelity --trajectories`` JSONL variants (``{"name": ..., "calls": [{"tool", "args"}]}`` per line)."""

COMMANDS = ("show", "show 0", "show --json", "audit-run", "replay", "fidelity")
READ_BY: dict[str, frozenset[str]] = {
    # odd but well-formed: read by every reader (replay records an errored episode where the task is not covered)
    "messages-bad-shapes": frozenset(COMMANDS),
    "task-id-int": frozenset(COMMANDS),
    # only ``show`` prints the stored summary
    "summary-not-a-summary": frozenset(COMMANDS) - {"show"},
    "summary-infinite": frozenset(COMMANDS) - {"show"},
    # only ``audit-run`` replays the stored task, and looks up the world that meta names
    "task-empty": frozenset(COMMANDS) - {"audit-run"},
    "task-wrong-shapes": frozenset(COMMANDS) - {"audit-run"},
    "meta-world-not-text": frozenset(COMMANDS) - {"audit-run"},
}
"""The readers (of :data:`COMMANDS`) that read a run-file variant (exit 0); every other reader refuses it."""


def make_run_file(name: str, base: Path, folder: Path) -> Path:
    """The run-file variant ``name``, cut from ``base`` into ``folder``."""
    path = folder / f"{name}.sqlite"
    variant = RUN_FILES[name]
    if isinstance(variant, bytes):
        path.write_bytes(variant)
    elif variant is None:
        path.write_bytes(base.read_bytes()[:4096])
    else:
        shutil.copy(base, path)
        conn = sqlite3.connect(path)
        with conn:
            variant(conn)
        conn.close()
    return path


def reader_commands(path: Path, out: Path) -> dict[str, list[str]]:
    """Every command that reads a run file, on ``path``, by its name in :data:`COMMANDS`."""
    return {
        "show": ["show", str(path)],
        "show 0": ["show", str(path), "0"],
        "show --json": ["show", str(path), "--json"],
        "audit-run": ["audit-run", str(path)],
        "replay": [
            "run",
            "--agent",
            "replay",
            "--replay",
            str(path),
            "--episodes",
            "1",
            "--no-progress",
            "--out",
            str(out),
        ],
        "fidelity": fidelity_command(path),
    }


def fidelity_command(path: Path) -> list[str]:
    return ["fidelity", "--world", "sales", "--calls", "0", "--seeds", "1", "--no-audit", "--trajectories", str(path)]


def _check(argv: list[str], code: int, err: str, refused: bool, path: Path) -> None:
    assert code != 70, (argv, err)
    assert "Traceback" not in err, (argv, err)
    if refused:
        assert code == 2, (argv, code, err)
        assert err.startswith("mirrorworld: error: ") and str(path) in err, (argv, err)
        assert err.count("\n") == 1, (argv, err)
    else:
        # Read and used: a replay that finds nothing to play errors its episodes, which `run` says with status 3.
        assert code in ((0, 3) if argv[0] == "run" else (0,)), (argv, err)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return base_run(tmp_path_factory.mktemp("base") / "base.sqlite", HelpdeskWorld())


def test_the_corpus_is_large() -> None:
    assert len(RUN_FILES) + len(JSONL) + len(TRACES) >= 30


@pytest.mark.parametrize("name", sorted(RUN_FILES))
def test_every_reader_refuses_a_hostile_run_file_in_one_line(
    name: str, base: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = make_run_file(name, base, tmp_path)
    read_by = READ_BY.get(name, frozenset())
    for command, argv in reader_commands(path, tmp_path / "replayed.sqlite").items():
        if command == "fidelity" and command in read_by:
            # replaying it would need the twin: the reading alone is what is under test
            assert [t.kind for t in recorded_traces(path)] == ["recorded"] * 2
            continue
        code = main(argv)
        _out, err = capsys.readouterr()
        _check(argv, code, err, command not in read_by, path)
        (tmp_path / "replayed.sqlite").unlink(missing_ok=True)


@pytest.mark.parametrize("name", sorted(JSONL))
def test_audit_run_refuses_hostile_jsonl_in_one_line(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(JSONL[name])
    argv = ["audit-run", str(path), "--world", "helpdesk"]
    code = main(argv)
    _check(argv, code, capsys.readouterr().err, True, path)


@pytest.mark.parametrize("name", sorted(TRACES))
def test_fidelity_refuses_hostile_traces_in_one_line(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(TRACES[name])
    with pytest.raises(RunFileError):
        list(recorded_traces(path))
    code = main(fidelity_command(path))
    _check(fidelity_command(path), code, capsys.readouterr().err, True, path)


_OPEN_AND_READ = """
import sys
from mirrorworld.errors import RunFileError
from mirrorworld.run import RunFile
try:
    with RunFile.open({path!r}) as run:
        run.meta, list(run.episodes()), len(run)
except RunFileError as err:
    sys.exit(f"{{err}}")
"""
"""What a library reader (the review store's import, ``compare``, the gate) does with a run file."""


def _py(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv],
        capture_output=True,
        text=True,
        errors="replace",
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        timeout=30,
    )


@pytest.mark.parametrize("name", ["view-episodes", "view-meta"])
def test_an_endless_view_ends_every_reader_promptly_and_fills_no_disk(name: str, base: Path, tmp_path: Path) -> None:
    """A view over an endless recursive query, as ``episodes`` or as ``meta``, fed to every reader in a subprocess."""
    path = make_run_file(name, base, tmp_path)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = {**os.environ, "SQLITE_TMPDIR": str(scratch), "TMPDIR": str(scratch)}
    commands = [["-m", "mirrorworld", *argv] for argv in reader_commands(path, tmp_path / "replayed.sqlite").values()]
    commands += [
        ["-m", "mirrorworld", "compare", str(path), str(base)],
        ["-m", "mirrorworld.review", "serve", str(path), "--db", str(tmp_path / "review.sqlite")],
        ["-c", _OPEN_AND_READ.format(path=str(path))],
    ]
    for argv in commands:
        done = _py(argv, env, tmp_path)  # a hang is a TimeoutExpired here, after 30 s
        assert done.returncode != 0 and "Traceback" not in done.stderr, (argv, done.stderr[-2000:])
        assert "is a view, not a table" in done.stderr and done.stderr.count("\n") == 1, (argv, done.stderr)
        if argv[:2] == ["-m", "mirrorworld"]:
            assert done.returncode == 2, (argv, done.stderr)
    written = sum(f.stat().st_size for f in tmp_path.rglob("*") if f.is_file() and f not in (path, base))
    assert written < 1 << 20


def test_a_statement_that_runs_past_its_budget_is_interrupted(base: Path) -> None:
    """The step budget holds whatever the schema: a query that reads more than the file holds is stopped."""
    with RunFile.open(base) as run:
        endless = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT max(n) FROM r"
        with pytest.raises(RunFileError, match="interrupted"):
            list(run._rows(endless))
        assert len(run) == 2  # the budget is per statement: the file still reads


def test_show_of_an_episode_number_out_of_range_is_one_line(base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(base), str(10**30)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has no episode" in err


def test_run_refuses_an_out_path_that_is_a_dangling_link(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    link = tmp_path / "out.sqlite"
    link.symlink_to(tmp_path / "nowhere" / "run.sqlite")
    assert main(["run", "--episodes", "1", "--no-progress", "--out", str(link)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"mirrorworld: error: {link} already exists") and err.count("\n") == 1
    assert not (tmp_path / "nowhere").exists()


def test_a_well_formed_run_file_still_reads_whole(base: Path) -> None:
    with RunFile.open(base) as run:
        assert len(run) == 2 and [e.index for e in run.episodes()] == [0, 1]
        assert run.meta["summary"]["episodes"] == 2 and run.episode(1).passed


# -- huge numbers through Session.call ----------------------------------------------------------------------------

HUGE: tuple[Any, ...] = (
    10**5000,
    -(10**5000),
    10**4300 + 1,
    1e308,
    -1e308,
    float("inf"),
    float("nan"),
    Decimal("9" * 5000),
    Decimal("-1e999999"),
    Decimal("sNaN"),
)
"""Numbers an agent's harness may hand ``Session.call`` from Python: integers too long to print, extreme floats."""


def _plausible(schema: dict[str, Any]) -> Any:
    if "enum" in schema:
        return schema["enum"][0]
    return {"integer": 1, "string": "some text", "number": "1", "boolean": True, "array": []}[schema["type"]]


def test_huge_numbers_are_refused_calls_never_exceptions() -> None:
    """Each huge number, bare or nested, as the tool name and as every argument of every tool of every world."""
    for name in default.names():
        world = default.get(name)
        session = world.session(world.task(world.families[0].name, 0))
        for value in HUGE:
            for shape in (value, [value], {"x": value}, [[{"y": (value,)}]]):
                result = session.call(shape, {})  # type: ignore[arg-type]
                assert not result.ok and result.error is not None and result.error["code"] == "unknown_tool"
                for spec in world.tools:
                    for p in spec.params:
                        args = {q.name: _plausible(q.schema) for q in spec.params} | {p.name: shape}
                        result = session.call(spec.name, args)
                        assert not result.ok, (name, spec.name, p.name, value)
                        assert result.error is not None and result.error["code"] == "invalid_arguments"
                        assert len(result.error["message"]) < 300
                    extra = session.call(spec.name, {"no_such_argument": shape})
                    assert not extra.ok
        assert not session.done and session.changes() == []
        session.close()


_HUGE_INTS = st.builds(lambda digits, sign: sign * (10**digits + 7), st.integers(4300, 6000), st.sampled_from((1, -1)))
"""Integers of 4,301 to 6,001 digits (built from their size: a strategy holding one could not even describe itself)."""
_SCALARS = _HUGE_INTS | st.integers() | st.floats() | st.decimals() | st.text(max_size=8) | st.booleans() | st.none()
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_no_value_raises_out_of_session_call(data: st.DataObject) -> None:
    world = default.get("helpdesk")
    names = [t.name for t in world.tools]
    tool = data.draw(st.sampled_from(names) | _VALUES, label="tool")
    params = sorted({p.name for t in world.tools for p in t.params})
    args = data.draw(st.dictionaries(st.sampled_from(params) | st.text(max_size=6), _VALUES, max_size=4) | _VALUES)
    with world.session(world.task("triage", 0)) as session:
        result = session.call(tool, args)
        assert isinstance(result, ToolResult)
        json.dumps(result.error)


def test_non_finite_numbers_and_repeated_indexes_are_refused(tmp_path: Path) -> None:
    import sqlite3 as _sqlite3

    from mirrorworld.cli import main as cli_main

    good = tmp_path / "good.sqlite"
    assert cli_main(["run", "--episodes", "3", "--out", str(good), "--no-progress", "--json"]) == 0
    cases = {
        "inf.sqlite": "UPDATE episodes SET score=9e999, reward=-9e999 WHERE idx=1",
        "passed.sqlite": "UPDATE episodes SET passed=2 WHERE idx=1",
        "steps.sqlite": "UPDATE episodes SET steps=-4 WHERE idx=1",
    }
    for name, sql in cases.items():
        path = tmp_path / name
        path.write_bytes(good.read_bytes())
        conn = _sqlite3.connect(path)
        conn.execute(sql)
        conn.commit()
        conn.close()
    dup = tmp_path / "dup.sqlite"
    dup.write_bytes(good.read_bytes())
    conn = _sqlite3.connect(dup)
    conn.executescript(
        "CREATE TABLE e2 AS SELECT * FROM episodes; DROP TABLE episodes; "
        "CREATE TABLE episodes AS SELECT * FROM e2 UNION ALL SELECT * FROM e2; DROP TABLE e2;"
    )
    conn.close()
    for path in [tmp_path / n for n in cases] + [dup]:
        for argv in (["show", str(path)], ["show", str(path), "--json"], ["audit-run", str(path)]):
            assert cli_main(argv) == 2, (path.name, argv)
