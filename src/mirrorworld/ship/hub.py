"""Exports of a world artifact in the formats peers' users already pull: an OpenEnv environment and a verifiers package.

Each export is a directory derived from one artifact (:mod:`mirrorworld.ship.artifact`)
and from nothing else: the artifact's wheel copied in, a manifest in the
target's own format naming the env id, the world version, the world's content
hash and the artifact's SHA-256, and the glue code, generated.

**OpenEnv** (:func:`export_openenv`), laid out as ``openenv init`` lays out an
environment and as ``openenv push`` uploads one (a Docker Space)::

    openenv.yaml              the environment manifest: name, version, runtime, app, port, the
                              ``validation:`` block (reward range, declared tools) and a
                              ``mirrorworld:`` block (env id, version, content hash, artifact)
    pyproject.toml            the package, with the ``server`` script OpenEnv runs
    README.md                 the Space's front matter; how to build, run and connect
    __init__.py, client.py    the client: OpenEnv's generic client, with the bearer token
    server/app.py             the ASGI app: mirrorworld's own server for this one world, so the
                              OpenEnv routes (/health /schema /metadata /reset /step /state /mcp,
                              WS /ws) are the ones ``mirrorworld serve`` answers
    server/requirements.txt   the pinned artifact, with the server's extras
    Dockerfile                installs the bundled wheel and starts the server on port 8000

**verifiers** (:func:`export_verifiers`), a package ``vf-install`` (``uv pip
install -e``) installs and ``verifiers.load_environment`` imports::

    pyproject.toml            the package, ``[tool.verifiers.eval]`` and ``[tool.mirrorworld]``
    README.md
    <module>/__init__.py      load_environment(**kwargs) -> a vf.MultiTurnEnv with a vf.Rubric
    <module>/rollout.py       the core, without verifiers: one mirrorworld Episode per rollout

The verifiers environment's dataset rows are tasks of the world's splits
(``prompt``: the policy in the system message, the instruction as the user's;
``info``: the task id, family, seed and split; ``answer`` is empty: the gold
solution never leaves the world). The model's tools are the world's, with
their argument JSON schemas; each tool call is one step of a mirrorworld
:class:`~mirrorworld.episodes.Episode` (through
:class:`~mirrorworld.envs.chat.ChatEnv`, so a reply without tool calls is the
final message to the customer, as everywhere); the reward is the verifier's
score of the episode. It speaks verifiers' classic API (``MultiTurnEnv``,
``Rubric``), which verifiers 0.4 removed; the package pins ``verifiers<0.4``.

Both exports also hold ``mirrorworld-export.json`` (the same facts as JSON,
with the artifact's whole manifest) and ``wheels/<the artifact>``.

**Installing exactly the artifact.** The generated requirements pin
``mirrorworld==<the wheel's version>``, whose local label names the world,
its version and its content hash (``0.1.0+helpdesk.v0.90a2ec42dcb98832``). No
public index holds local versions, so only the bundled wheel satisfies the pin
(``pip install --find-links wheels``, or the ``[tool.uv.sources]`` path uv
reads). At start-up the generated code checks the installed world's content
hash against the manifest's and refuses to run another build.

**Determinism.** Every file is a function of the artifact: no dates, paths
or host names are written, mappings are written sorted, and the output
directory is written whole (a previous export in it is replaced, never
merged), so exporting one artifact twice gives byte-identical trees.

**Untrusted input.** The artifact's manifest was checked when it was opened
(:meth:`Artifact.open`); every value written into generated code or config is
written as a JSON string literal (valid Python, TOML and YAML alike), never
spliced as code.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Any, Literal

from mirrorworld.errors import MirrorworldError
from mirrorworld.ship.artifact import Artifact
from mirrorworld.ship.hub_templates import (
    OPENENV_APP,
    OPENENV_CLIENT,
    OPENENV_DOCKERFILE,
    OPENENV_INIT,
    OPENENV_PYPROJECT,
    OPENENV_README,
    OPENENV_REQUIREMENTS,
    VERIFIERS_INIT,
    VERIFIERS_PYPROJECT,
    VERIFIERS_README,
    VERIFIERS_ROLLOUT,
)
from mirrorworld.ship.manifest import Manifest

__all__ = ["EXPORT_FILE", "FORMATS", "Export", "Format", "export", "export_openenv", "export_verifiers"]

Format = Literal["openenv", "verifiers"]
FORMATS: tuple[Format, ...] = ("openenv", "verifiers")

EXPORT_FILE = "mirrorworld-export.json"
"""The export's own manifest, in every export: what ``mirrorworld export`` recognises and may replace."""

EXPORT_FORMAT = "mirrorworld-export/1"

VERIFIERS_REQUIREMENT = "verifiers>=0.1.9,<0.4"
"""The verifiers releases with the classic API the generated package uses (0.4 kept only ``verifiers.v1``)."""

PORT = 8000
"""The port an OpenEnv Space serves on (``app_port``)."""


@dataclass(frozen=True)
class Export:
    """What every export is derived from: the artifact, its manifest and the names it gets."""

    artifact: Artifact
    manifest: Manifest
    wheel_version: str
    """The artifact's distribution version (``0.1.0+helpdesk.v0.<content hash>``): the exact pin."""

    @classmethod
    def of(cls, artifact: Artifact | str | Path) -> Export:
        art = artifact if isinstance(artifact, Artifact) else Artifact.open(artifact)
        return cls(art, art.manifest, _wheel_version(art))

    @property
    def wheel_name(self) -> str:
        """The name pip requires of the wheel: distribution, version, tags."""
        return f"mirrorworld-{self.wheel_version}-py3-none-any.whl"

    @property
    def wheel_path(self) -> str:
        return f"wheels/{self.wheel_name}"

    @property
    def slug(self) -> str:
        """``mirrorworld_helpdesk_v0``: the Python name of the export's package."""
        return f"mirrorworld_{self.manifest.world}_v{self.manifest.version}"

    @property
    def dist_name(self) -> str:
        """``mirrorworld-helpdesk-v0``: the distribution name (and verifiers' environment id)."""
        return self.slug.replace("_", "-")

    @property
    def public_version(self) -> str:
        """The export's own version: the world version, which a score-relevant change must bump."""
        return f"{self.manifest.version}.0.0"

    def requirement(self, extras: tuple[str, ...] = ()) -> str:
        """``mirrorworld[extras]==<wheel version>``, with only the extras the artifact declares."""
        known = sorted(e for e in extras if e in self.manifest.extras)
        return f"mirrorworld{'[' + ','.join(known) + ']' if known else ''}=={self.wheel_version}"

    def facts(self, target: Format) -> dict[str, Any]:
        """The export manifest (``mirrorworld-export.json``)."""
        m = self.manifest
        return {
            "format": EXPORT_FORMAT,
            "target": target,
            "name": self.slug,
            "env_id": m.env_id,
            "world": m.world,
            "version": m.version,
            "content_hash": m.content_hash,
            "mirrorworld_version": m.mirrorworld_version,
            "artifact": {"file": self.wheel_path, "sha256": self.artifact.digest, "size": self.artifact.size},
            "requirement": self.requirement(),
            "manifest": m.to_dict(),
        }


def export_openenv(artifact: Artifact | str | Path, out_dir: str | Path) -> Path:
    """Write the OpenEnv environment of ``artifact`` into ``out_dir`` (see the module docstring); its path."""
    ex = Export.of(artifact)
    if "server" not in ex.manifest.extras:
        raise MirrorworldError(f"{ex.artifact.path.name} declares no server extra, so it cannot be served over OpenEnv")
    files = _common(ex, "openenv")
    files["openenv.yaml"] = _openenv_yaml(ex)
    files["pyproject.toml"] = _fill(OPENENV_PYPROJECT, ex, deps=_toml_list(_openenv_deps(ex)))
    files["README.md"] = _fill(OPENENV_README, ex, port=PORT)
    files["__init__.py"] = _fill(OPENENV_INIT, ex)
    files["client.py"] = _fill(OPENENV_CLIENT, ex, port=PORT)
    files["server/__init__.py"] = _fill('"""The server of $env_id (see app.py)."""\n', ex)
    files["server/app.py"] = _fill(OPENENV_APP, ex, port=PORT)
    files["server/requirements.txt"] = _fill(OPENENV_REQUIREMENTS, ex, req=ex.requirement(("server", "mcp")))
    files["Dockerfile"] = _fill(OPENENV_DOCKERFILE, ex, port=PORT, python=_python_minor(ex.manifest.python))
    return _write_tree(Path(out_dir), files)


def export_verifiers(artifact: Artifact | str | Path, out_dir: str | Path) -> Path:
    """Write the verifiers environment package of ``artifact`` into ``out_dir`` (see the module docstring); its path."""
    ex = Export.of(artifact)
    files = _common(ex, "verifiers")
    deps = [VERIFIERS_REQUIREMENT, ex.requirement()]
    files["pyproject.toml"] = _fill(VERIFIERS_PYPROJECT, ex, deps=_toml_list(deps), licence=_licence_line(ex))
    files["README.md"] = _fill(VERIFIERS_README, ex, verifiers=VERIFIERS_REQUIREMENT)
    files[f"{ex.slug}/__init__.py"] = _fill(VERIFIERS_INIT, ex, q_verifiers=json.dumps(VERIFIERS_REQUIREMENT))
    files[f"{ex.slug}/rollout.py"] = _fill(VERIFIERS_ROLLOUT, ex)
    return _write_tree(Path(out_dir), files)


EXPORTERS: Mapping[Format, Callable[[Artifact | str | Path, str | Path], Path]] = {
    "openenv": export_openenv,
    "verifiers": export_verifiers,
}


def export(target: str, artifact: Artifact | str | Path, out_dir: str | Path) -> Path:
    """Export ``artifact`` in format ``target`` (one of :data:`FORMATS`) into ``out_dir``."""
    if target not in EXPORTERS:
        raise MirrorworldError(f"unknown export format {target[:40]!r} (choose {' or '.join(FORMATS)})")
    return EXPORTERS[target](artifact, out_dir)  # type: ignore[index]


# -- shared pieces ---------------------------------------------------------------------


def _wheel_version(artifact: Artifact) -> str:
    """The ``Version`` of the artifact's ``METADATA`` (its distribution must be ``mirrorworld``)."""
    for name, data in artifact.files():
        if name.endswith(".dist-info/METADATA") and name.count("/") == 1:
            fields = dict(line.split(": ", 1) for line in data.decode("utf-8", "replace").splitlines() if ": " in line)
            version = fields.get("Version", "")
            if fields.get("Name") != "mirrorworld" or not re.fullmatch(r"[0-9][0-9A-Za-z.+]{0,99}", version):
                break
            return version
    raise MirrorworldError(f"{artifact.path.name} has no mirrorworld METADATA with a version: not an artifact")


def _common(ex: Export, target: Format) -> dict[str, bytes]:
    """The files every export holds: the wheel and the export manifest."""
    return {
        ex.wheel_path: ex.artifact.path.read_bytes(),
        EXPORT_FILE: (json.dumps(ex.facts(target), sort_keys=True, indent=1, ensure_ascii=True) + "\n").encode(),
    }


def _fill(template: str, ex: Export, **extra: Any) -> bytes:
    """``template`` with the export's names substituted; ``$q_*`` forms are Python/JSON string literals."""
    m = ex.manifest
    values: dict[str, Any] = {
        "env_id": m.env_id,
        "world": m.world,
        "version": m.version,
        "content_hash": m.content_hash,
        "digest": ex.artifact.digest,
        "short": ex.artifact.short,
        "slug": ex.slug,
        "dist": ex.dist_name,
        "public_version": ex.public_version,
        "wheel": ex.wheel_name,
        "wheel_path": ex.wheel_path,
        "wheel_version": ex.wheel_version,
        "mirrorworld_version": m.mirrorworld_version,
        "q_requires_python": json.dumps(m.python or ">=3.11"),
        "low": m.reward_range[0],
        "high": m.reward_range[1],
    }
    values.update(extra)
    for key in ("env_id", "world", "content_hash", "digest", "slug", "dist", "wheel", "wheel_path", "wheel_version"):
        values[f"q_{key}"] = json.dumps(str(values[key]))
    values["tool_table"] = _toml_table(ex)
    return Template(template).substitute(values).encode()


def _toml_list(items: list[str]) -> str:
    return "[\n" + "".join(f"    {json.dumps(i)},\n" for i in items) + "]"


def _toml_table(ex: Export) -> str:
    """The ``[tool.mirrorworld]`` table of both pyprojects."""
    m = ex.manifest
    rows = {
        "env_id": m.env_id,
        "world": m.world,
        "version": m.version,
        "content_hash": m.content_hash,
        "mirrorworld_version": m.mirrorworld_version,
        "artifact": ex.wheel_path,
        "artifact_sha256": ex.artifact.digest,
    }
    return "[tool.mirrorworld]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in rows.items())


def _licence_line(ex: Export) -> str:
    """``license = "<SPDX id>"`` when the artifact's licence is a plain SPDX identifier, else nothing."""
    licence = ex.manifest.licence
    return f"license = {json.dumps(licence)}\n" if re.fullmatch(r"[A-Za-z0-9.+-]{1,64}", licence) else ""


def _python_minor(spec: str) -> str:
    """The Python of the image: the lowest ``3.x`` the artifact allows (3.11 when it says nothing)."""
    found = re.search(r">=\s*3\.(\d{1,2})", spec)
    return f"3.{found.group(1)}" if found else "3.11"


def _openenv_deps(ex: Export) -> list[str]:
    """The OpenEnv package's requirements: the artifact with its server extras, and OpenEnv itself.

    OpenEnv's validator wants ``openenv`` among the dependencies; the artifact's own
    ``openenv`` extra says which releases its protocol was checked against.
    """
    return [ex.requirement(("mcp", "openenv", "server")), *(ex.manifest.extras.get("openenv") or ("openenv",))]


def _openenv_yaml(ex: Export) -> bytes:
    """``openenv.yaml``: JSON-style flow values (valid YAML) for everything taken from the artifact."""
    m = ex.manifest
    j = json.dumps
    parts = ", ".join(f"{j(k)}: {j(v)}" for k, v in sorted(m.parts.items()))
    tags = ["mirrorworld", m.world.replace("_", "-"), "tool-use", "multi-turn"]
    lines = [
        f"# Generated by `mirrorworld export --format openenv` from {ex.wheel_name}.",
        "spec_version: 1",
        f"name: {j(ex.slug)}",
        f"version: {j(ex.public_version)}",
        f"description: {j(f'{m.env_id}, a mirrorworld world, served over the OpenEnv protocol')}",
        "type: space",
        "runtime: fastapi",
        "app: server.app:app",
        f"port: {PORT}",
        "validation:",
        "  reward:",
        f"    range: [{m.reward_range[0]!r}, {m.reward_range[1]!r}]",
        "    oracle_tolerance: 0.0",
        "    floor_margin: 0.1",
        "  resources:",
        "    cpu: 1.0",
        "    memory_mb: 1024",
        "    disk_mb: 512",
        "    episode_timeout_s: 60.0",
        "  capabilities:",
        "    verifier:",
        "      kind: reward_channel",
        f"    declared_tools: {j(list(m.tools))}",
        "  types:",
        f"    tags: {j(tags)}",
        "mirrorworld:",
        f"  env_id: {j(m.env_id)}",
        f"  world: {j(m.world)}",
        f"  version: {m.version}",
        f"  content_hash: {j(m.content_hash)}",
        f"  mirrorworld_version: {j(m.mirrorworld_version)}",
        f"  families: {j(list(m.families))}",
        f"  parts: {{{parts}}}",
        "  artifact:",
        f"    file: {j(ex.wheel_path)}",
        f"    sha256: {j(ex.artifact.digest)}",
        f"    size: {ex.artifact.size}",
        f"    requirement: {j(ex.requirement())}",
    ]
    return ("\n".join(lines) + "\n").encode()


def _write_tree(out: Path, files: Mapping[str, bytes]) -> Path:
    """Write ``files`` as the whole content of ``out``, atomically, replacing a previous export there.

    ``out`` must be missing, empty or a previous export (it holds :data:`EXPORT_FILE`):
    anything else is refused rather than mixed with, or deleted.
    """
    if out.is_symlink():
        raise MirrorworldError(f"{out} is a symbolic link: name the export directory itself")
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / EXPORT_FILE).is_file())):
        raise MirrorworldError(f"{out} exists and is not an export: choose a new --out directory")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.export-"))
    old: Path | None = None
    try:
        for rel, data in sorted(files.items()):
            path = tmp / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            os.chmod(path, 0o644)
        os.chmod(tmp, 0o755)
        if out.exists():
            old = out.with_name(f".{out.name}.replaced-{tmp.name.rsplit('-', 1)[-1]}")
            os.replace(out, old)
        os.replace(tmp, out)
    except OSError as err:
        raise MirrorworldError(f"cannot write the export to {out}: {err.strerror or err}") from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    return out
