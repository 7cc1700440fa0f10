"""World artifacts: one reproducible wheel per world build, and reading one back.

``mirrorworld pack WORLD`` writes
``mirrorworld-<version>+<world>.v<world version>.<content hash>-py3-none-any.whl``.

**Why a wheel.** An artifact must be runnable exactly as it was packed, on a
laptop, a Ray worker or in a container, without the tree it came from. A
pure-Python wheel is the unit every one of those already installs (``pip
install``, a container's site-packages, a hub that pulls packages), it
carries its dependencies (``Requires-Dist``) and entry points, and it is a zip,
so it can be read in place: the manifest and the file hashes (``RECORD``)
are checked without installing anything. An archive of our own format would
need its own installer; a container image alone cannot be run by a training
job that is not containerised.

**What is in it.** The whole ``mirrorworld`` package as this installation has
it (the core, verifier, episode and simulator code that grades every world
feed the content hash, so the artifact must hold them), the
``mirrorworld.worlds`` entry point of the packed world only, and
``mirrorworld-manifest.json`` (:mod:`~mirrorworld.ship.manifest`) in the
``.dist-info`` folder.

**Byte-identical builds.** Entries are written in sorted order with a fixed
date (1980-01-01) and fixed permissions, stored without compression (so the
bytes depend on no compressor's version: deflate output differs between zlib
builds; the artifact is under 2 MB either way); no file
outside the package's own sources (``*.py``, ``*.sql``, ``*.md``,
``*.json``, ``py.typed``) is included, so caches and editor files never
change the bytes. The artifact's identity is the SHA-256 of its bytes
(:attr:`Artifact.digest`).

:meth:`Artifact.open` treats the file as untrusted: it checks that the zip's
names are safe relative paths, that every file matches its ``RECORD`` hash,
that the manifest parses, and that the sizes are bounded.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import shutil
import stat
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mirrorworld.errors import MirrorworldError
from mirrorworld.ship.manifest import Manifest, manifest_for

__all__ = ["Artifact", "ArtifactError", "pack", "package_files"]

MANIFEST_NAME = "mirrorworld-manifest.json"
_SUFFIXES = (".py", ".sql", ".md", ".json", ".typed")
_DATE = (1980, 1, 1, 0, 0, 0)
_MAX_BYTES = 256 << 20
_MAX_FILES = 20_000
_WHEEL = b"Wheel-Version: 1.0\nGenerator: mirrorworld pack\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
_SAFE_NAME = re.compile(r"(?:[A-Za-z0-9_.+-]+/)*[A-Za-z0-9_.+-]+\Z")


class ArtifactError(MirrorworldError):
    """A file that is not a well-formed mirrorworld artifact."""


def package_files(root: Path | None = None) -> list[tuple[str, bytes]]:
    """``(path in the wheel, bytes)`` for every source file of the ``mirrorworld`` package, sorted."""
    import mirrorworld

    root = root or Path(mirrorworld.__file__).resolve().parent
    out = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts or path.suffix not in _SUFFIXES:
            continue
        rel = path.relative_to(root).as_posix()
        if any(part.startswith(".") for part in rel.split("/")):
            continue
        out.append((f"mirrorworld/{rel}", path.read_bytes()))
    return out


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _wheel_version(manifest: Manifest) -> str:
    base = re.sub(r"[^0-9a-zA-Z.]", ".", manifest.mirrorworld_version.split("+")[0]) or "0"
    return f"{base}+{manifest.world.replace('_', '.')}.v{manifest.version}.{manifest.content_hash}"


def _metadata(manifest: Manifest, version: str) -> bytes:
    lines = [
        "Metadata-Version: 2.1",
        "Name: mirrorworld",
        f"Version: {version}",
        f"Summary: mirrorworld world artifact {manifest.env_id} ({manifest.content_hash})",
    ]
    if manifest.licence:
        lines.append(f"License: {manifest.licence}")
    if manifest.python:
        lines.append(f"Requires-Python: {manifest.python}")
    lines += [f"Requires-Dist: {d}" for d in manifest.dependencies]
    for extra, reqs in sorted(manifest.extras.items()):
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {r}; extra == "{extra}"' for r in reqs]
    return ("\n".join(lines) + "\n").encode()


def _entry_points(world: str, spec_path: str) -> bytes:
    return (
        f"[console_scripts]\nmirrorworld = mirrorworld.cli:main\n\n[mirrorworld.worlds]\n{world} = {spec_path}\n"
    ).encode()


def _entry_point_of(name: str) -> str:
    """The ``mirrorworld.worlds`` entry point value of world ``name``, when the mirrorworld package holds it."""
    from importlib.metadata import entry_points

    from mirrorworld.core.registry import ENTRY_POINT_GROUP

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name and ep.value.startswith("mirrorworld."):
            return ep.value
    raise ArtifactError(
        f"world {name} is not one of the mirrorworld package's own worlds, so pack cannot hold its code"
        " (pack the distribution that declares it)"
    )


def pack(world_name: str, out_dir: str | Path, *, registry: object | None = None) -> Path:
    """Write the artifact of the installed world ``world_name`` into ``out_dir``; its path.

    Built twice from the same tree it is byte-identical. ``registry`` (a
    :class:`~mirrorworld.core.registry.Registry`) defaults to the installed worlds.
    """
    from mirrorworld.core.registry import Registry, default

    reg = registry if isinstance(registry, Registry) else default
    spec = reg.spec(world_name)
    world = reg.get(spec.name)
    manifest = manifest_for(world)
    version = _wheel_version(manifest)
    dist_info = f"mirrorworld-{version}.dist-info"
    files = package_files()
    files += [
        (f"{dist_info}/METADATA", _metadata(manifest, version)),
        (f"{dist_info}/WHEEL", _WHEEL),
        (f"{dist_info}/entry_points.txt", _entry_points(spec.name, _entry_point_of(spec.name))),
        (f"{dist_info}/{MANIFEST_NAME}", manifest.to_json()),
    ]
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in files)
    record += f"{dist_info}/RECORD,,\n"
    files.append((f"{dist_info}/RECORD", record.encode()))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"mirrorworld-{version}-py3-none-any.whl"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in files:
            info = zipfile.ZipInfo(name, date_time=_DATE)
            info.compress_type = zipfile.ZIP_STORED
            info.external_attr = (0o100644 & 0xFFFF) << 16
            info.create_system = 3
            zf.writestr(info, data, compress_type=zipfile.ZIP_STORED)
    write_shared(target, buf.getvalue())
    return target


def write_shared(target: Path, data: bytes) -> None:
    """Write ``data`` to ``target`` atomically, readable as the umask allows (``mkstemp`` alone makes it 0600)."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".write-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


@dataclass(frozen=True)
class Artifact:
    """An artifact file, checked: its path, the SHA-256 of its bytes and its manifest.

    The bytes that were checked are kept (``data``): :meth:`files` and
    :meth:`extract` read them, never the file again, so a file swapped after
    it was opened cannot slip in under the checked digest.
    """

    path: Path
    digest: str
    manifest: Manifest
    size: int
    data: bytes = field(repr=False, compare=False, default=b"")

    @property
    def short(self) -> str:
        """The digest's first 16 hex digits: how commands print an artifact."""
        return self.digest[:16]

    @classmethod
    def open(cls, path: str | Path) -> Artifact:
        """Read and check an artifact (untrusted input: see the module docstring)."""
        path = Path(path)
        try:
            st = path.stat()
        except OSError as err:
            raise ArtifactError(f"cannot read artifact {path}: {err.strerror or err}") from None
        if not stat.S_ISREG(st.st_mode):
            raise ArtifactError(f"{path} is not a regular file, so not an artifact")
        if st.st_size > _MAX_BYTES:
            raise ArtifactError(f"{path.name} is over {_MAX_BYTES >> 20} MB: not an artifact")
        try:
            with path.open("rb") as f:
                data = f.read(_MAX_BYTES + 1)
        except OSError as err:
            raise ArtifactError(f"cannot read artifact {path}: {err.strerror or err}") from None
        if len(data) > _MAX_BYTES:
            raise ArtifactError(f"{path.name} is over {_MAX_BYTES >> 20} MB: not an artifact")
        digest = hashlib.sha256(data).hexdigest()
        manifest = _check(data, path.name)
        return cls(path, digest, manifest, len(data), data)

    def files(self) -> Iterator[tuple[str, bytes]]:
        """Every file in the artifact, from the bytes checked when it was opened."""
        with zipfile.ZipFile(io.BytesIO(self.data)) as zf:
            for info in zf.infolist():
                yield info.filename, zf.read(info)

    def package(self) -> dict[str, bytes]:
        """The ``mirrorworld/...`` files (the package, without its ``.dist-info``), by name."""
        return {name: data for name, data in self.files() if name.startswith("mirrorworld/")}

    def extract(self, root: str | Path) -> Path:
        """Unpack the ``mirrorworld`` package into ``root/<digest>/`` (once; atomic); the folder to put on ``sys.path``.

        Only the package is unpacked, not its ``.dist-info``, so the
        installed distribution's entry points stay the only ones.
        """
        target = Path(root) / self.digest
        files = self.package()
        if target.is_dir():
            if _same_tree(target, files):
                return target
            shutil.rmtree(target, ignore_errors=True)  # altered or half-written: unpack it again
        Path(root).mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=root, prefix=".extract-"))
        try:
            for name, data in files.items():
                dest = tmp / name
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(data)
            try:
                os.replace(tmp, target)
            except OSError:  # another process unpacked it first
                if not _same_tree(target, files):
                    raise ArtifactError(f"cannot unpack {self.short} into {root}") from None
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        return target


def _same_tree(root: Path, files: dict[str, bytes]) -> bool:
    """Whether ``root`` holds exactly ``files`` (the unpacked package), byte for byte; caches are ignored."""
    try:
        present = {
            p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts
        }
        if present != set(files):
            return False
        return all((root / name).read_bytes() == data for name, data in files.items())
    except OSError:
        return False


def _check(data: bytes, label: str) -> Manifest:
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise ArtifactError(f"{label} is not a zip file, so not an artifact") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > _MAX_FILES:
            raise ArtifactError(f"{label} holds over {_MAX_FILES} files: not an artifact")
        if sum(i.file_size for i in infos) > _MAX_BYTES:
            raise ArtifactError(f"{label} unpacks to over {_MAX_BYTES >> 20} MB: not an artifact")
        names = [i.filename for i in infos]
        for info in infos:
            name = info.filename
            if not _SAFE_NAME.match(name) or any(part in (".", "..") for part in name.split("/")):
                raise ArtifactError(f"{label} holds a file with an unsafe name {ascii(name)[:80]}")
            if stat.S_IFMT(info.external_attr >> 16) not in (0, stat.S_IFREG):
                raise ArtifactError(f"{label} holds {ascii(name)[:80]}, which is not a regular file")
        if len({n.casefold() for n in names}) != len(names):
            raise ArtifactError(f"{label} holds a file twice (names that differ only in case count as one)")
        records = [n for n in names if n.endswith(".dist-info/RECORD")]
        manifests = [n for n in names if n.endswith(f".dist-info/{MANIFEST_NAME}")]
        if len(records) != 1:
            raise ArtifactError(f"{label} has no RECORD of its files: not an artifact (mirrorworld pack makes one)")
        if len(manifests) != 1:
            raise ArtifactError(f"{label} has no mirrorworld manifest: not an artifact (mirrorworld pack makes one)")
        try:
            record = zf.read(records[0]).decode("utf-8")
            listed: dict[str, str] = {}
            for line in record.splitlines():
                if not line.strip():
                    continue
                name, digest, _size = line.rsplit(",", 2)
                listed[name] = digest
            for name in names:
                if name == records[0]:
                    continue
                if listed.get(name) != _record_hash(zf.read(name)):
                    raise ArtifactError(f"{label}: {ascii(name)[:80]} does not match its RECORD hash (altered?)")
            if set(listed) != set(names):
                raise ArtifactError(f"{label}: its RECORD and its files disagree")
            return Manifest.from_json(zf.read(manifests[0]))
        except (ValueError, UnicodeDecodeError, zipfile.BadZipFile, EOFError) as err:
            if isinstance(err, MirrorworldError):
                raise
            raise ArtifactError(f"{label} is damaged ({type(err).__name__})") from None
