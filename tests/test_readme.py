"""Every snippet of the README runs as written.

A fenced block tagged ``bash`` or ``python`` is a snippet (a block tagged
``text`` shows output and is not run). Each runs in a fresh temporary folder,
holding a link to the checkout's ``examples/`` (a snippet runs from the
checkout's root), with this environment's ``bin`` first on ``PATH`` (as an activated virtual
environment has it) and a private version store, cache of artifacts and
``runs/``. In a ``bash`` snippet the setup steps a fresh machine needs and
this one has done (``python3 -m venv``, activating it, ``pip install``) and
the test command itself (which is what runs this test) are left out of the
``&&`` chains they open; everything else runs, in order, and must exit 0.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BLOCK = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```\s*$", re.S | re.M)
SETUP = re.compile(r"^\s*(python3 -m venv\b|\. \.venv/bin/activate|source \.venv/bin/activate|pip install\b)")
TESTS = re.compile(r"^\s*(python -m pytest|\.venv/bin/python -m pytest|make check)\b")


def snippets() -> list[tuple[int, str, str]]:
    """``(line, language, code)`` of every runnable block of the README."""
    text = README.read_text(encoding="utf-8")
    out = []
    for m in BLOCK.finditer(text):
        lang = m.group(1)
        if lang in ("bash", "python"):
            out.append((text[: m.start()].count("\n") + 1, lang, m.group(2)))
    return out


def runnable(code: str) -> str:
    """A bash snippet without the setup steps and the test command (see the module docstring)."""
    lines = []
    for line in code.splitlines():
        kept = [part for part in line.split("&&") if not SETUP.match(part) and not TESTS.match(part)]
        if any(part.strip() for part in kept):
            lines.append("&&".join(kept).strip())
    return "\n".join(lines)


def test_the_readme_has_snippets_and_the_two_commands_first() -> None:
    found = snippets()
    assert len(found) >= 8
    first, second = found[0][2].strip(), found[1][2].strip()
    assert first.startswith("python3 -m venv .venv") and "mirrorworld run" in first
    assert second.startswith("python3 -m venv .venv") and "pytest" in second
    assert second in (ROOT / ".ci" / "run").read_text(encoding="utf-8"), "CI must run the README's test command"


@pytest.mark.parametrize(("line", "lang", "code"), snippets(), ids=[f"line{n}" for n, _l, _c in snippets()])
def test_snippet_runs(line: int, lang: str, code: str, tmp_path: Path) -> None:
    (tmp_path / "examples").symlink_to(ROOT / "examples")  # snippets run from the checkout's root
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "MIRRORWORLD_STORE": str(tmp_path / "store"),
        "PYTHONWARNINGS": "ignore",
        "NO_COLOR": "1",
    }
    if lang == "python":
        argv = [sys.executable, "-c", code]
    else:
        script = runnable(code)
        if not script.strip():
            pytest.skip("setup and the test command only")
        argv = ["bash", "-euo", "pipefail", "-c", script]
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"README line {line}:\n{code}\n--- stderr:\n{done.stderr[-3000:]}"
