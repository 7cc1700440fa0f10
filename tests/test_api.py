"""The public API: pinned names, and an import that stays light."""

from __future__ import annotations

import json
import subprocess
import sys

import mirrorworld

EXPORTED = {
    "Check",
    "Event",
    "Fact",
    "MirrorworldError",
    "Registry",
    "RegistryError",
    "Rule",
    "Session",
    "Task",
    "TaskError",
    "TaskFamily",
    "ToolCall",
    "ToolError",
    "ToolResult",
    "ToolSpec",
    "Verdict",
    "Verifier",
    "VerifierError",
    "World",
    "WorldError",
    "__version__",
    "grade",
    "make_world",
    "tool",
}


def test_exported_names_are_pinned() -> None:
    assert set(mirrorworld.__all__) == EXPORTED
    for name in EXPORTED:
        assert hasattr(mirrorworld, name), name


def test_import_stays_light() -> None:
    code = (
        "import sys, json, mirrorworld; "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('rich','fastapi','uvicorn','torch','pettingzoo','mcp','trl','starlette','ray','hypothesis') "
        "or m in ('mirrorworld.cli','mirrorworld.audit','mirrorworld.bench','mirrorworld.server'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert json.loads(out.stdout) == []


def test_gymnasium_ids_are_registered_on_import() -> None:
    import gymnasium

    assert "mirrorworld/Helpdesk-v0" in gymnasium.registry


def test_the_command_line_needs_no_optional_extra() -> None:
    """Building the CLI loads no optional dependency, so a core install runs every core command."""
    code = (
        "import sys, json; from mirrorworld.cli import _parser; _parser(); "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('fastapi','uvicorn','starlette','pettingzoo','trytond','proteus','sklearn','scipy','krippendorff',"
        "'torch','trl','mcp','openenv','ray','httpx','websockets','selenium'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert json.loads(out.stdout) == []
