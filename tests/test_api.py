"""The public API: pinned names, and an import that stays light."""

from __future__ import annotations

import json
import subprocess
import sys
import types

import mirrorworld

EXPORTED = {
    "Check",
    "Episode",
    "EpisodeOptions",
    "Event",
    "Fact",
    "Failure",
    "MirrorworldError",
    "Registry",
    "RegistryError",
    "Rule",
    "Seated",
    "Session",
    "StepOutcome",
    "Task",
    "TaskError",
    "TaskFamily",
    "TaskRef",
    "TeamEpisode",
    "ToolCall",
    "ToolError",
    "ToolResult",
    "ToolSpec",
    "Verdict",
    "Verifier",
    "VerifierError",
    "World",
    "WorldError",
    "WorldSpec",
    "__version__",
    "grade",
    "make_world",
    "tool",
}

PUBLIC_DUNDERS = {"__version__"}
"""Names starting with an underscore that are part of the API all the same."""


def test_exported_names_are_pinned() -> None:
    assert set(mirrorworld.__all__) == EXPORTED
    assert len(mirrorworld.__all__) == len(EXPORTED)
    for name in EXPORTED:
        assert hasattr(mirrorworld, name), name


def test_all_is_exactly_the_public_members() -> None:
    """Nothing leaks into the package namespace, and nothing in ``__all__`` is missing from it."""
    public = {
        name
        for name, value in vars(mirrorworld).items()
        if (not name.startswith("_") or name in PUBLIC_DUNDERS) and not isinstance(value, types.ModuleType)
    }
    assert public == set(mirrorworld.__all__)
    assert mirrorworld.__all__ == sorted(mirrorworld.__all__)


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
