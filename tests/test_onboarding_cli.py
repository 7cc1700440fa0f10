"""What a new user hit first: output paths checked before the work, 80-column tables, the fidelity page's
baseline comparison and twin options, and a missing extra named in one line.

* Every file a command in ``audit``, ``fidelity`` and ``review`` writes is checked before the work
  (:func:`mirrorworld.outputs.check_output_path`) and written whole (:func:`mirrorworld.outputs.write_atomic`).
* ``audit-verifiers`` and ``audit-run`` print at most 80 columns, whatever the terminal, and lose no figure.
* ``fidelity --html --against`` shows which baseline, what regressed or improved against it, and the twin's
  packages, modules and options.
* ``review serve`` and ``review stats`` without the ``review`` extra, ``fidelity`` and ``twin up`` without
  the ``twin`` extra: one error line naming the extra, exit 1, no traceback.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len
from rich.console import Console

from mirrorworld import make_world
from mirrorworld.agents import make_agent
from mirrorworld.audit import audit_verifiers
from mirrorworld.audit.report import _pct, print_audit
from mirrorworld.cli import main
from mirrorworld.errors import MirrorworldError
from mirrorworld.fidelity.baseline import baseline_identity, drift, load_baseline, save_baseline
from mirrorworld.fidelity.harness import FidelityRun
from mirrorworld.fidelity.report import drift_lines, fidelity_html, to_dict
from mirrorworld.outputs import check_output_path, write_atomic
from mirrorworld.review.store import ReviewStore
from mirrorworld.run import RunFile, run_episodes

ROOT = Path(__file__).resolve().parents[1]


def _widest(out: str) -> int:
    return max((cell_len(line) for line in out.splitlines()), default=0)


def _flat(out: str) -> str:
    """The output with every run of whitespace (line breaks included) one space: wrapped text reads whole."""
    return " ".join(out.split())


# -- 1. output paths: checked first, written whole ---------------------------------------------------------


def test_check_output_path_names_the_path_it_refuses(tmp_path: Path) -> None:
    assert check_output_path(tmp_path / "report.html") == tmp_path / "report.html"
    with pytest.raises(MirrorworldError, match=r"missing/dir/audit\.html: the folder .* does not exist"):
        check_output_path(tmp_path / "missing" / "dir" / "audit.html")
    with pytest.raises(MirrorworldError, match="it is a folder"):
        check_output_path(tmp_path)
    with pytest.raises(MirrorworldError, match="it is a folder"):
        check_output_path(f"{tmp_path}/new/")
    (tmp_path / "file").write_text("x")
    with pytest.raises(MirrorworldError, match="file is not a folder"):
        check_output_path(tmp_path / "file" / "report.html")
    with pytest.raises(MirrorworldError, match="file is not a folder"):
        check_output_path(tmp_path / "file" / "deeper" / "report.html", new_folders=True)
    assert check_output_path(tmp_path / "new" / "deeper" / "x.jsonl", new_folders=True).name == "x.jsonl"
    assert not (tmp_path / "new").exists()


def test_write_atomic_leaves_the_old_file_and_no_temporary_one_when_it_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "report.html"
    write_atomic(target, "old")
    assert target.read_text() == "old" and oct(target.stat().st_mode & 0o777) != oct(0o600)

    def fail(src: Any, dst: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(MirrorworldError, match=r"cannot write .*report\.html: No space left on device"):
        write_atomic(target, "new " * 1000)
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]


def _no_work(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the long work ran before the output path was checked")


@pytest.mark.parametrize("where", ["missing/dir/audit.html", "."])
def test_audit_verifiers_checks_html_before_auditing(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import mirrorworld.audit.verifiers as verifiers

    monkeypatch.setattr(verifiers, "audit_verifiers", _no_work)
    out = tmp_path if where == "." else tmp_path / where
    code = main(["audit-verifiers", "--world", "helpdesk", "--seeds", "200", "--html", str(out)])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and err.startswith("mirrorworld: error: cannot write ")
    assert str(out) in err
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize("option", ["--html", "--save-baseline"])
def test_fidelity_checks_its_outputs_before_building_the_twin(
    option: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from mirrorworld.twin import db

    monkeypatch.setattr(db, "ensure", _no_work)
    out = tmp_path / "missing" / "report"
    code = main(["fidelity", "--world", "sales", "--calls", "0", "--seeds", "1", option, str(out)])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and f"cannot write {out}: the folder" in err


def test_review_export_checks_its_out_before_reading_the_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A case file's missing folder is made (as it always was); a folder or a file in the way is refused first."""
    missing = str(tmp_path / "no.sqlite")
    assert main(["review", "export-disagreements", "--db", missing, "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot write {tmp_path}: it is a folder" in err
    (tmp_path / "file").write_text("x")
    out = tmp_path / "file" / "cases" / "verifier_cases.jsonl"
    assert main(["review", "export-disagreements", "--db", missing, "--out", str(out)]) == 1
    assert f"cannot write {out}: {tmp_path / 'file'} is not a folder" in capsys.readouterr().err
    db = tmp_path / "review.sqlite"
    ReviewStore(db)
    out = tmp_path / "new" / "verifier_cases.jsonl"
    assert main(["review", "export-disagreements", "--db", str(db), "--out", str(out)]) == 0
    assert out.is_file()


# -- 2. 80 columns ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("world", ["helpdesk", "sales"])
@pytest.mark.parametrize("columns", ["80", "200"])
def test_the_audit_table_fits_80_columns_and_keeps_every_figure(
    world: str, columns: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    code = main(["audit-verifiers", "--world", world, "--seeds", "1", "--no-cross-process"])
    out = capsys.readouterr().out
    assert code == 0 and _widest(out) <= 80, out
    data = audit_verifiers(make_world(world), seeds=1, cross_process=False).to_dict()
    for name, f in data["families"].items():
        row = next(line for line in out.splitlines() if line.startswith(name + " "))
        cells = row.split()
        pct = {k: _pct(f[k]) for k in ("mutation_score", "invariance", "determinism")}
        killed = f"{f['mutants_killed']}/{f['mutants_total'] - f['mutants_equivalent']}"
        assert cells == [
            name,
            f"{f['solved']}/{f['tasks']}",
            str(f["null_passes"]),
            pct["mutation_score"],
            killed,
            str(f["mutants_equivalent"]),
            pct["invariance"],
            pct["determinism"],
            str(f["lint_issues"]),
        ], row
    for probe, v in data["probes"].items():
        assert any(line.split() == [probe, str(v["successes"]), str(v["episodes"])] for line in out.splitlines())
    assert "all quality bars met" in out and "mutation score >= 95.0%" in out


def test_long_names_and_details_wrap_within_80_columns_and_stay_whole() -> None:
    """A family name too long for its column is cut there and written out whole below; details wrap."""
    family = {
        "tasks": 2,
        "solved": 2,
        "solvability": 1.0,
        "null_passes": 0,
        "mutation_score": 0.9496,
        "mutants_killed": 6570,
        "mutants_total": 6600,
        "mutants_equivalent": 30,
        "invariance": 1.0,
        "determinism": 1.0,
        "lint_issues": 0,
        "survivors": [{"task": "t/1", "operator": "wrong_value", "mutant": "set " + "word " * 60 + "END"}],
        "failures": [{"task": "t/2", "case": "null:spray", "evidence": ["passed although " + "it said " * 30]}],
    }
    long_name = "a_family_name_much_longer_than_its_column"
    report = {
        "world": "mirrorworld/Tiny-v0",
        "seeds": 200,
        "families": {long_name: family},
        "quality_bars": {"mutation_score": 0.95},
        "probes": {},
        "determinism": {"cross_process": None},
        "probe_findings": [{"probe": "fact_stuffer", "task": "t/3", "evidence": "stuffed " * 40}],
        "meets_bars": False,
        "failed_bars": [f"mutation score of {long_name} 94.9% < 95.0%"],
    }
    for width in (80, 200):
        buf = io.StringIO()
        print_audit(report, Console(file=buf, width=width, highlight=False))
        out = buf.getvalue()
        if width == 80:
            assert _widest(out) <= 80, out
        assert "94.9%" in out and "6570/6570" in out  # never rounded up to the bar; killed of non-equivalent
        assert f"= {long_name}" in out and "a_family_name_much_…" in out
        assert _flat(family["survivors"][0]["mutant"]) in _flat(out)  # type: ignore[index]
        assert _flat("stuffed " * 40) in _flat(out)


def _record(path: Path, agent: str, episodes: int) -> Path:
    world = make_world("helpdesk")
    with RunFile.create(path, {"world": world.id}) as run:
        run_episodes(world, make_agent(agent), episodes=episodes, split="test", on_record=run.add)
    return path


@pytest.mark.parametrize("columns", ["80", "200"])
def test_audit_run_fits_80_columns_and_keeps_every_flag(
    columns: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from mirrorworld.audit.runlog import audit_run

    run = _record(tmp_path / "random.sqlite", "random", 18)
    result = audit_run(run, make_world("helpdesk"))
    assert result["flagged"] > 0, "a random agent's run should raise flags, or the test proves nothing"
    monkeypatch.setenv("COLUMNS", columns)
    assert main(["audit-run", str(run)]) == 0
    out = capsys.readouterr().out
    if columns == "80":
        assert _widest(out) <= 80, out
    else:  # the table is laid out for 80 columns; only free text (the path, evidence) may use a wider terminal
        assert all(cell_len(line) <= 80 for line in out.splitlines()[1:] if not line.startswith("    ")), out
    flat = _flat(out)
    for ep in result["episodes_flagged"]:
        for flag in ep["flags"]:
            assert f"{ep['index']} {ep['task']} {'passed' if ep['passed'] else 'failed'} {flag['rule']}" in flat
            assert _flat(flag["evidence"]) in flat
    assert f"{result['flagged']} of {result['episodes']} episodes flagged" in out
    assert all(f"{rule} {n}" in out for rule, n in result["by_rule"].items())


# -- 3. the fidelity page against a baseline ---------------------------------------------------------------


def _fidelity_run(agreed: int, calls: int, *, family_agreed: int) -> FidelityRun:
    run = FidelityRun("mirrorworld/Sales-v0", {"trytond": "8.2.1", "proteus": "8.2.0"}, calls, agreed)
    run.by_tool = {"quote_sale<&>": [agreed, calls], "get_sale": [10, 10]}
    run.by_family = {"random": [family_agreed, 100, 1, 1]}
    run.gold_final = [3, 3]
    run.mirror_seconds, run.twin_seconds = 0.001, 2.0
    return run


def test_fidelity_html_shows_the_baseline_comparison_and_the_twin_options(tmp_path: Path) -> None:
    path = tmp_path / "base&<1>.json"
    save_baseline(to_dict(_fidelity_run(1000, 1000, family_agreed=90)), path)
    base = load_baseline(path)
    data = to_dict(_fidelity_run(950, 1000, family_agreed=100))
    data["twin_options"] = {"tax_rounding": "line"}
    data["twin_modules"] = ["sale", "sale_opportunity"]
    data["run_options"] = {"--calls": 1000, "--seeds": 2}
    data["drift"] = drift(data, base)
    data["drift"]["baseline"] = baseline_identity(path, base)
    page = fidelity_html(data)
    assert "Against the baseline" in page and "2 regressions" in page
    assert "base&amp;&lt;1&gt;.json" in page and data["drift"]["baseline"]["sha256"] in page
    assert "quote_sale<&>" not in page
    rows = [line for line in page.splitlines() if line.startswith("<tr class=")]
    assert any("regressed" in r and "quote_sale&lt;&amp;&gt;" in r and "100.00%" in r and "95.00%" in r for r in rows)
    assert any("regressed" in r and "call agreement" in r for r in rows)
    assert any("improved" in r and "random" in r and "+10.00%" in r for r in rows)
    assert "tax_rounding=line" in page and "sale_opportunity" in page and "8.2.1" in page and "proteus" in page
    assert "--calls 1000" in page
    lines = drift_lines(data)
    assert lines[0].startswith(f"against baseline {path} (sha256 ") and any("REGRESSION" in x for x in lines)


def test_fidelity_against_a_baseline_writes_the_comparison_into_the_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command end to end, the twin's build and replay stood in for."""
    from mirrorworld.fidelity import harness
    from mirrorworld.twin import backend, db

    runs = iter([_fidelity_run(1000, 1000, family_agreed=100), _fidelity_run(900, 1000, family_agreed=100)])
    monkeypatch.setattr(db, "ensure", lambda world, options=None, log=None: tmp_path / "twin.sqlite")
    monkeypatch.setattr(backend, "TwinBackend", lambda world, database: contextlib.nullcontext())
    monkeypatch.setattr(harness, "run_fidelity", lambda world, twin, traces, progress=None: next(runs))
    argv = ["fidelity", "--world", "sales", "--calls", "0", "--seeds", "1", "--no-audit"]
    base, page = tmp_path / "base.json", tmp_path / "report.html"
    assert main([*argv, "--save-baseline", str(base)]) == 0
    capsys.readouterr()
    code = main([*argv, "--against", str(base), "--html", str(page), "--twin-option", "tax_rounding=line"])
    assert code == 1  # regressed against the baseline
    out, html = capsys.readouterr().out, page.read_text()
    assert f"against baseline {base}" in out and "twin options: tax_rounding=line" in out
    assert "REGRESSION: tool quote_sale<&>: agreement 100.00% -> 90.00%" in out
    assert "Against the baseline" in html and "quote_sale&lt;&amp;&gt;" in html and "tax_rounding=line" in html
    assert "twin options changed" in html and "account_invoice" in html


# -- 4. a missing extra ------------------------------------------------------------------------------------


def _without(modules: list[str], argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``mirrorworld ARGV`` in a process where ``modules`` cannot be imported (as without their extra)."""
    code = (
        "import sys\n"
        f"for m in {modules!r}: sys.modules[m] = None\n"
        "from mirrorworld.cli import main\n"
        f"sys.exit(main({argv!r}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "MIRRORWORLD_DEBUG"}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, env=env, timeout=120, check=False
    )


@pytest.mark.parametrize("module", ["starlette", "jinja2", "uvicorn", "itsdangerous", "sklearn"])
def test_review_serve_without_the_review_extra_is_one_line(module: str, tmp_path: Path) -> None:
    db = tmp_path / "review.sqlite"
    done = _without([module], ["review", "serve", str(tmp_path / "run.sqlite"), "--db", str(db)], tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stderr == (
        "mirrorworld: error: review serve needs the review extra: pip install -e '.[review]' "
        "(or pip install 'mirrorworld[review]')\n"
    )
    assert "Traceback" not in done.stderr and done.stdout == "" and not db.exists()


@pytest.mark.parametrize("module", ["sklearn", "scipy", "krippendorff"])
def test_review_stats_without_the_review_extra_is_one_line(module: str, tmp_path: Path) -> None:
    db = tmp_path / "review.sqlite"
    ReviewStore(db)
    done = _without([module], ["review", "stats", "--db", str(db)], tmp_path)
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("mirrorworld: error: review stats needs the review extra: pip install -e '.[review]'")


@pytest.mark.parametrize("argv", [["fidelity", "--calls", "0", "--seeds", "1", "--no-audit"], ["twin", "up"]])
def test_the_twin_commands_without_the_twin_extra_are_one_line(argv: list[str], tmp_path: Path) -> None:
    done = _without(["trytond", "proteus"], [*argv, "--world", "sales"], tmp_path)
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("mirrorworld: error: ") and "mirrorworld[twin]" in done.stderr


def test_the_review_extra_lists_what_the_check_looks_for() -> None:
    """The modules ``review serve``/``stats`` look for are the review extra's (a renamed package fails here)."""
    from mirrorworld.review.cli import _NEEDS

    extra = (ROOT / "pyproject.toml").read_text().split("review = [", 1)[1].split("]", 1)[0]
    names = {"sklearn": "scikit-learn"}
    for module in _NEEDS["serve"]:
        assert names.get(module, module) in extra, module
