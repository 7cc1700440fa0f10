"""``mirrorworld image build``: a reproducible OCI container image that serves one world artifact.

The image runs ``mirrorworld serve --host 0.0.0.0 --port 8000 --world WORLD``
as an unprivileged user (uid/gid 10001), exposes port 8000 and carries the
artifact's identity as OCI annotations and config labels
(``org.opencontainers.image.*``, ``io.mirrorworld.env-id``,
``io.mirrorworld.content-hash``, ``io.mirrorworld.artifact-digest``). Off
loopback the server refuses to start without a bearer token, so the container
needs ``-e MIRRORWORLD_TOKEN=...``; ``GET /health`` is open for probes.

**The same inputs give the same image digest.** Three layers, each a
function of inputs we name and hash:

1. *base* — a Debian root filesystem with ``python3`` built by ``mmdebstrap``
   (``--variant=essential``, perl and ``usrmerge`` purged, docs and locales
   excluded) under a fixed ``SOURCE_DATE_EPOCH``, plus the ``mirrorworld``
   user. The host's ``/etc/hostname`` and ``/etc/resolv.conf``, device nodes
   and ``*-old`` backups are dropped. Keyed by :class:`BaseSpec`.
2. *deps* — the server's Python dependencies, pinned to the exact versions
   installed where the build runs (the closure of the artifact's
   ``Requires-Dist`` plus its ``server`` extra, markers evaluated for the
   image's Python), fetched with ``pip download --no-deps --only-binary``
   for the image's platform tags from the configured package index and
   unpacked by us into ``/usr/local/lib/python3.X/dist-packages``. No
   bytecode is written (``PYTHONDONTWRITEBYTECODE=1`` at run time too):
   ``.pyc`` bytes depend on the compiling interpreter, so they would tie the
   digest to the build host. Keyed by the pin list and the platform.
3. *app* — the artifact wheel unpacked the same way, and its console scripts
   (``/usr/local/bin/mirrorworld``) written with the image's interpreter.

The first two take minutes and are cached under ``cache_dir`` (default
``$MIRRORWORLD_CACHE/image``, else ``~/.cache/mirrorworld/image``) as
content-addressed blobs with a small JSON index per key; the third is
rebuilt every time (a second or two). A cached base is what makes a rebuild
reproducible *over time*: Debian's mirror moves on with security updates, so
a cold base built next month holds newer packages. For a base reproducible
from scratch, pass a snapshot mirror (``mirrors=``, ``--mirror``).

**Why the OCI image is written here and not by umoci or buildah.** Every
byte of a layer must be a function of its files alone. buildah builds inside
a container runtime and storage (here only with runc and a tuned
``containers.conf``) and umoci repacks a root file system unpacked on disk
with real owners; both write tar headers and gzip streams with their own Go
code, so their bytes can change with the tool's version, and each removes
some sources of drift (``--timestamp``, ``--no-history``) only where it
offers an option. The OCI image layout is small (a tar per layer, a config,
a manifest, an index), so writing it in Python gives full control of every
byte, and the writing needs no tool, daemon or privilege; podman, docker, skopeo and
registries read it. The rules are :mod:`mirrorworld.ship.oci`'s.

``out`` ending in ``.tar`` is written as an ``oci-archive`` (the image layout
in one tar, itself deterministic), anything else as an image layout folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

from mirrorworld.progress import progress_bar
from mirrorworld.ship.oci import (
    EPOCH,
    Entry,
    ImageError,
    LayerInfo,
    blob_name,
    canonical_json,
    clean_path,
    created,
    write_layer,
    write_layout,
)

if TYPE_CHECKING:
    from mirrorworld.ship.artifact import Artifact

__all__ = [
    "EPOCH",
    "BaseSpec",
    "Entry",
    "ImageError",
    "ImageResult",
    "LayerInfo",
    "build_image",
    "canonical_json",
    "image_config",
    "normalize_base",
    "pin_dependencies",
    "wheel_entries",
    "write_layer",
    "write_layout",
]


RECIPE = 1
"""Bumped whenever a layer's recipe changes, so caches built by an older recipe are not reused."""

PORT = 8000
UID = 10001
USER = "mirrorworld"
HOME = f"/home/{USER}"

_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


# -- inputs and results --------------------------------------------------------


@dataclass(frozen=True)
class BaseSpec:
    """What the base layer is built from; every field is part of its cache key."""

    suite: str = "bookworm"
    """The Debian release."""
    python: str = "3.11"
    """The release's ``python3`` (the site-packages folder, the wheel tags)."""
    python_full: str = "3.11.2"
    """Its full version, for environment markers."""
    glibc: tuple[int, int] = (2, 36)
    """The release's C library: the newest ``manylinux`` tag the image runs."""
    include: tuple[str, ...] = ("python3", "libstdc++6", "netbase", "usr-is-merged")
    """Packages on top of the essential set: ``libstdc++6`` for manylinux wheels (numpy), ``usr-is-merged`` in
    place of ``usrmerge`` (which needs perl)."""
    purge: tuple[str, ...] = (
        "usrmerge",
        "libfile-find-rule-perl",
        "libnumber-compare-perl",
        "libtext-glob-perl",
        "perl",
        "libperl5.36",
        "perl-modules-5.36",
        "libgdbm-compat4",
    )
    """Packages removed after the install (nothing in the image runs perl but ``perl-base``)."""
    exclude: tuple[str, ...] = (
        "/usr/share/doc/*",
        "/usr/share/man/*",
        "/usr/share/info/*",
        "/usr/share/locale/*",
    )
    """Paths dpkg never unpacks (copyright files are kept)."""
    mirrors: tuple[str, ...] = ()
    """``mmdebstrap`` mirror arguments; empty for its default mirrors of ``suite``."""

    @property
    def site_packages(self) -> str:
        """Where the image's Python finds installed distributions (Debian's ``/usr/local`` site folder)."""
        return f"usr/local/lib/python{self.python}/dist-packages"


@dataclass(frozen=True)
class ImageResult:
    """What :func:`build_image` made."""

    path: Path
    format: Literal["oci-archive", "oci-layout"]
    digest: str
    """The manifest's digest, ``sha256:...``: the image's identity in a registry."""
    config_digest: str
    """The config's digest: the image id podman and docker show."""
    ref: str
    """The name the image is stored under in the layout (``org.opencontainers.image.ref.name``)."""
    size: int
    """Bytes of every blob of the image (compressed layers, config, manifest)."""
    seconds: float
    layers: tuple[LayerInfo, ...]
    labels: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["path"] = str(self.path)
        d["layers"] = [asdict(layer) for layer in self.layers]
        d["labels"] = dict(self.labels)
        return d


# -- deterministic layers --------------------------------------------------------


def normalize_base(source: IO[bytes], *, user: str = USER, uid: int = UID) -> list[Entry]:
    """The entries of a root file system tar (``mmdebstrap``'s) as the base layer holds them.

    Drops what is not a function of the packages: device nodes (the runtime
    makes ``/dev``), the build host's ``/etc/hostname`` and
    ``/etc/resolv.conf`` (the runtime mounts its own), ``*-old`` backups and
    ldconfig's auxiliary cache. Adds ``user`` (``uid`` = gid) to
    ``/etc/passwd`` and ``/etc/group`` with a home folder it owns. Hard links
    are re-pointed at the first path of their group in sorted order, so
    sorting never puts a link before its target.
    """
    members: dict[str, tuple[tarfile.TarInfo, bytes]] = {}
    links: dict[str, str] = {}
    with tarfile.open(fileobj=source, mode="r|*") as tar:
        for info in tar:
            try:
                path = clean_path(info.name)
            except ImageError:
                if info.name.strip("./") == "":
                    continue  # the root folder itself
                raise
            if _dropped(path, info):
                continue
            data = b""
            if info.isfile():
                f = tar.extractfile(info)
                data = f.read() if f is not None else b""
            members[path] = (info, data)
            if info.islnk():
                links[path] = clean_path(info.linkname)
    # Hard-link groups: every member names its group's original; the group's first path (sorted) holds the data.
    groups: dict[str, list[str]] = {}
    for path, target in links.items():
        while target in links:  # a link to a link (tar allows it): follow to the file
            target = links[target]
        groups.setdefault(target, [target]).append(path)
    leader: dict[str, tuple[str, str]] = {}  # path -> (the group's first path, the group's original file)
    for original, paths in groups.items():
        if original not in members:
            raise ImageError(f"hard link to {original}, which the root file system does not hold")
        for p in paths:
            leader[p] = (min(paths), original)
    out: list[Entry] = []
    for path, (info, data) in members.items():
        mode, owner = info.mode, (info.uid, info.gid)
        if path in leader:
            first, original = leader[path]
            original_info, original_data = members[original]
            mode, owner = original_info.mode, (original_info.uid, original_info.gid)
            if path == first:
                out.append(Entry(path, "file", original_data, mode, *owner))
            else:
                out.append(Entry(path, "hardlink", mode=mode, uid=owner[0], gid=owner[1], target=first))
        elif info.isdir():
            out.append(Entry(path, "dir", mode=mode, uid=owner[0], gid=owner[1]))
        elif info.issym():
            out.append(Entry(path, "symlink", mode=mode, uid=owner[0], gid=owner[1], target=info.linkname))
        elif info.isfile():
            if path in ("etc/passwd", "etc/group"):
                data = _add_user(path, data, user, uid)
            out.append(Entry(path, "file", data, mode, *owner))
    out.append(Entry(f"home/{user}", "dir", mode=0o755, uid=uid, gid=uid))
    return out


_DROP = ("dev/*", "etc/hostname", "etc/resolv.conf", "*-old", "var/cache/ldconfig/aux-cache")


def _dropped(path: str, info: tarfile.TarInfo) -> bool:
    if not (info.isfile() or info.isdir() or info.issym() or info.islnk()):
        return True  # device nodes and fifos
    return any(fnmatchcase(path, pattern) for pattern in _DROP)


def _add_user(path: str, data: bytes, user: str, uid: int) -> bytes:
    text = data.decode()
    if any(line.split(":", 1)[0] == user for line in text.splitlines()):
        return data
    line = f"{user}:x:{uid}:{uid}:{user}:{HOME}:/usr/sbin/nologin" if path == "etc/passwd" else f"{user}:x:{uid}:"
    return (text.rstrip("\n") + "\n" + line + "\n").encode()


_WHEEL_NAME = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-[0-9][^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")


def wheel_entries(
    wheel: Path | str, site: str, *, prefix: str = "usr/local", python: str = "/usr/bin/python3"
) -> list[Entry]:
    """The entries that installing ``wheel`` into ``site`` writes (PEP 427), without running any code.

    The wheel's root and its ``.data/purelib`` and ``.data/platlib`` go to
    ``site``; ``.data/scripts`` to ``prefix/bin`` with a ``#!python`` line
    pointed at ``python``; ``.data/data`` to ``prefix``; ``.data/headers`` to
    ``prefix/include``. Files are 0755 when the wheel marks them executable,
    else 0644. Console scripts of ``entry_points.txt`` are not written here
    (see :func:`console_scripts`).
    """
    out: list[Entry] = []
    try:
        zf = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as err:
        raise ImageError(f"{Path(wheel).name} is not a readable wheel ({err})") from None
    with zf:
        for info in zf.infolist():
            if info.is_dir():
                continue
            name = clean_path(info.filename)
            data = zf.read(info)
            mode = 0o755 if (info.external_attr >> 16) & 0o111 else 0o644
            top, _, rest = name.partition("/")
            if top.endswith(".data") and rest:
                scheme, _, rest = rest.partition("/")
                if scheme in ("purelib", "platlib"):
                    dest = f"{site}/{rest}"
                elif scheme == "scripts":
                    dest, mode = f"{prefix}/bin/{rest}", 0o755
                    if data.startswith(b"#!python"):
                        data = b"#!" + python.encode() + data[len(b"#!python") :]
                elif scheme == "data":
                    dest = f"{prefix}/{rest}"
                elif scheme == "headers":
                    dest = f"{prefix}/include/{top[: -len('.data')]}/{rest}"
                else:
                    raise ImageError(f"{Path(wheel).name} has an unknown install scheme {scheme!r}")
            else:
                dest = f"{site}/{name}"
            out.append(Entry(dest, "file", data, mode))
    return out


def console_scripts(wheel: Path | str, *, prefix: str = "usr/local", python: str = "/usr/bin/python3") -> list[Entry]:
    """A launcher in ``prefix/bin`` for each ``[console_scripts]`` entry point of ``wheel``."""
    import configparser

    with zipfile.ZipFile(wheel) as zf:
        names = [n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/entry_points.txt")]
        if not names:
            return []
        text = zf.read(names[0]).decode()
    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(text)
    if not parser.has_section("console_scripts"):
        return []
    out = []
    for name, value in sorted(parser.items("console_scripts")):
        module, _, attr = value.strip().partition(":")
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name) or not re.fullmatch(r"[\w.]+", module + "." + (attr or "x")):
            raise ImageError(f"console script {ascii(name)[:60]} has an entry point this build cannot write")
        func = attr.strip() or "main"
        head, _, tail = func.partition(".")
        call = func if not tail else f"{head}.{tail}"
        script = (
            f"#!{python}\nimport sys\nfrom {module.strip()} import {head}\n"
            f"if __name__ == '__main__':\n    sys.exit({call}())\n"
        )
        out.append(Entry(f"{prefix}/bin/{name}", "file", script.encode(), 0o755))
    return out


# -- OCI JSON and the image layout ------------------------------------------------


def image_config(
    layers: Sequence[LayerInfo],
    *,
    command: Sequence[str],
    labels: Mapping[str, str],
    architecture: str,
    history: Sequence[str] = (),
) -> dict[str, Any]:
    """The OCI image config: the unprivileged user, the port, the entry point, the labels, the layers' diff ids."""
    return {
        "architecture": architecture,
        "os": "linux",
        "created": created(),
        "config": {
            "User": f"{UID}:{UID}",
            "ExposedPorts": {f"{PORT}/tcp": {}},
            "Env": [
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                f"HOME={HOME}",
                "PYTHONDONTWRITEBYTECODE=1",
                "PYTHONUNBUFFERED=1",
            ],
            "Entrypoint": ["/usr/local/bin/mirrorworld"],
            "Cmd": list(command),
            "WorkingDir": HOME,
            "Labels": dict(labels),
            "StopSignal": "SIGTERM",
        },
        "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]},
        "history": [{"created": created(), "created_by": h} for h in history],
    }


# -- the cache ---------------------------------------------------------------------


def default_cache_dir() -> Path:
    """``$MIRRORWORLD_CACHE/image``, else ``~/.cache/mirrorworld/image``."""
    from mirrorworld.cache import cache_root

    return cache_root("image")


class _Cache:
    """Layer blobs by content (``blobs/sha256/<hex>``), and per recipe key the layer it made (``layers/<key>.json``)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
        (root / "layers").mkdir(parents=True, exist_ok=True)

    def blob(self, digest: str) -> Path:
        return self.root / blob_name(digest)

    def get(self, key: str) -> LayerInfo | None:
        try:
            raw = json.loads((self.root / "layers" / f"{key}.json").read_text())
            layer = LayerInfo(**{**raw, "cached": True})
        except (OSError, ValueError, TypeError):
            return None
        path = self.blob(layer.digest)
        return layer if path.is_file() and path.stat().st_size == layer.size else None

    def put(self, key: str, name: str, entries: Iterable[Entry]) -> LayerInfo:
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".layer-")
        try:
            with os.fdopen(fd, "wb") as f:
                digest, diff_id, size, unpacked = write_layer(entries, f)
            os.replace(tmp, self.blob(digest))
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        layer = LayerInfo(name, digest, diff_id, size, unpacked)
        _atomic_write(self.root / "layers" / f"{key}.json", canonical_json(asdict(layer)))
        return layer


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _key(kind: str, inputs: Mapping[str, Any]) -> str:
    return f"{kind}-" + hashlib.sha256(canonical_json({"recipe": RECIPE, "kind": kind, **inputs})).hexdigest()[:32]


# -- layer (a): the Debian base ------------------------------------------------------

_MMDEBSTRAP_PHASES = (
    "running apt-get update",
    "downloading packages",
    "extracting archives",
    "installing essential packages",
    "installing remaining packages",
    "running --customize-hook",
    "cleaning package lists",
    "creating tarball",
)


def _need(tool: str, package: str) -> str:
    found = shutil.which(tool)
    if found is None:
        raise ImageError(f"{tool} is not installed; it builds the image's base (apt-get install {package})")
    return found


def _base_layer(spec: BaseSpec, cache: _Cache, *, progress: bool) -> LayerInfo:
    inputs = asdict(spec) | {"arch": _architecture(), "user": [USER, UID]}
    key = _key("base", inputs)
    hit = cache.get(key)
    if hit is not None:
        return hit
    mmdebstrap = _need("mmdebstrap", "mmdebstrap")
    purge = " ".join(spec.purge)
    cmd = [
        mmdebstrap,
        "--variant=essential",
        f"--include={','.join(spec.include)}",
        *(['--customize-hook=chroot "$1" dpkg --purge ' + purge] if purge else []),
        *[f"--dpkgopt=path-exclude={p}" for p in spec.exclude],
        "--dpkgopt=path-include=/usr/share/doc/*/copyright",
    ]
    with tempfile.TemporaryDirectory(dir=cache.root, prefix=".base-") as tmp:
        rootfs = Path(tmp) / "rootfs.tar"
        cmd += [spec.suite, str(rootfs), *spec.mirrors]
        env = {**os.environ, "SOURCE_DATE_EPOCH": str(EPOCH), "TMPDIR": tmp}
        with progress_bar(f"Debian {spec.suite} base (mmdebstrap)", len(_MMDEBSTRAP_PHASES), enabled=progress) as up:
            _run_with_phases(cmd, env, _MMDEBSTRAP_PHASES, up, what="mmdebstrap")
        with progress_bar("base layer", None, enabled=progress), rootfs.open("rb") as f:
            entries = normalize_base(f)
            return cache.put(key, "base", entries)


def _run_with_phases(
    cmd: Sequence[str], env: Mapping[str, str], phases: Sequence[str], update: Callable[..., None], *, what: str
) -> None:
    """Run ``cmd``, moving the bar on each phase line it prints; a failure raises with its last error lines."""
    done = 0

    def seen(line: str) -> None:
        nonlocal done
        for i, phase in enumerate(phases):
            if phase in line and i + 1 > done:
                done = i + 1
                update(done, len(phases))

    code, tail = _stream(cmd, env, seen, what=what)
    if code != 0:
        errors = [t for t in tail if t.startswith("E:")] or tail[-3:]
        detail = "; ".join(e.removeprefix("E: ") for e in errors[-2:])[:400]
        raise ImageError(f"{what} failed (exit {code}): {detail}")


def _stream(
    cmd: Sequence[str], env: Mapping[str, str] | None, on_line: Callable[[str], None], *, what: str
) -> tuple[int, list[str]]:
    """Run ``cmd`` with its output (stdout and stderr) fed line by line to ``on_line``: its exit code and last lines."""
    tail: list[str] = []
    try:
        proc = subprocess.Popen(
            cmd,
            env=dict(env) if env is not None else None,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
    except OSError as err:
        raise ImageError(f"cannot run {what}: {err.strerror or err}") from None
    with proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            tail = [*tail[-40:], line.rstrip()]
            on_line(line)
    return proc.returncode, tail


def _architecture() -> str:
    machine = platform.machine()
    try:
        return _ARCH[machine]
    except KeyError:
        raise ImageError(f"no image for this machine's architecture {machine!r} (amd64 and arm64 are built)") from None


# -- layer (b): the pinned Python dependencies ---------------------------------------

SERVER_EXTRA = "server"


def _marker_env(spec: BaseSpec) -> dict[str, str]:
    return {
        "implementation_name": "cpython",
        "implementation_version": spec.python_full,
        "os_name": "posix",
        "platform_machine": platform.machine(),
        "platform_python_implementation": "CPython",
        "platform_release": "",
        "platform_system": "Linux",
        "platform_version": "",
        "python_full_version": spec.python_full,
        "python_version": spec.python,
        "sys_platform": "linux",
    }


def pin_dependencies(requirements: Iterable[str], spec: BaseSpec = BaseSpec()) -> list[tuple[str, str]]:
    """``(name, version)`` of every distribution ``requirements`` need in the image, as installed here.

    Follows ``Requires-Dist`` through the installed distributions (extras
    included), with environment markers evaluated for the image's Python on
    Linux, so the image holds exactly the versions this environment runs and
    tests. A requirement not installed here, or installed at a version it
    does not admit, is an error: the image would not be what was tested.
    """
    from importlib import metadata

    try:
        from packaging.requirements import InvalidRequirement, Requirement
        from packaging.utils import canonicalize_name
    except ImportError:
        raise ImageError("building an image needs the 'packaging' module (pip install packaging)") from None
    env = _marker_env(spec)
    pins: dict[str, tuple[str, str]] = {}
    done: set[tuple[str, str]] = set()
    todo: list[tuple[str, str]] = []  # (requirement text, requested by)
    todo += [(r, "the artifact") for r in requirements]
    while todo:
        text, by = todo.pop()
        try:
            req = Requirement(text)
        except InvalidRequirement:
            raise ImageError(f"{by} requires {ascii(text)[:80]}, which is not a valid requirement") from None
        name = canonicalize_name(req.name)
        if name == "mirrorworld":
            continue
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            raise ImageError(
                f"{req.name} (required by {by}) is not installed here, so its version cannot be pinned: "
                "install mirrorworld[server] where you build the image"
            ) from None
        version = dist.version
        if not req.specifier.contains(version, prereleases=True):
            raise ImageError(f"{req.name} {version} is installed here but {by} requires {req}")
        pins[name] = (dist.metadata["Name"] or req.name, version)
        for extra in ("", *sorted(req.extras)):
            if (name, extra) in done:
                continue
            done.add((name, extra))
            for sub in dist.requires or ():
                sub_req = Requirement(sub)
                if sub_req.marker is None:
                    wanted = extra == ""
                else:
                    wanted = sub_req.marker.evaluate({**env, "extra": extra})
                    if extra and wanted and "extra" not in str(sub_req.marker):
                        wanted = False  # a base requirement, already followed with extra ""
                if wanted:
                    todo.append((sub, f"{req.name} {version}"))
    return sorted(pins.values(), key=lambda p: canonicalize_name(p[0]))


def _platform_tags(spec: BaseSpec) -> list[str]:
    machine = {"amd64": "x86_64", "arm64": "aarch64"}[_architecture()]
    major, minor = spec.glibc
    tags = [f"manylinux_{major}_{m}_{machine}" for m in range(minor, 16, -1)]
    tags.append(f"manylinux2014_{machine}")
    if machine == "x86_64":
        tags += [f"manylinux_2_{m}_{machine}" for m in range(16, 4, -1)]
        tags += [f"manylinux2010_{machine}", f"manylinux1_{machine}"]
    return tags


def _deps_layer(requirements: Sequence[str], spec: BaseSpec, cache: _Cache, *, progress: bool) -> LayerInfo:
    pins = pin_dependencies(requirements, spec)
    tags = _platform_tags(spec)
    key = _key("deps", {"pins": [f"{n}=={v}" for n, v in pins], "tags": tags, "site": spec.site_packages})
    hit = cache.get(key)
    if hit is not None:
        return hit
    wheels = cache.root / "wheels" / key
    wheels.mkdir(parents=True, exist_ok=True)
    abi = "cp" + spec.python.replace(".", "")
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--progress-bar", "off"]
    cmd += ["--python-version", spec.python, "--implementation", "cp", "--abi", abi, "-d", str(wheels)]
    for tag in tags:
        cmd += ["--platform", tag]
    cmd += [f"{n}=={v}" for n, v in pins]
    _pip_download(cmd, len(pins), progress=progress)
    found = _match_wheels(wheels, pins)
    entries: dict[str, Entry] = {}
    with progress_bar("dependency layer", len(found) + 1, enabled=progress) as up:  # +1: compressing it
        for i, path in enumerate(found):
            for e in wheel_entries(path, spec.site_packages, python=f"/usr/bin/python{spec.python}"):
                prior = entries.get(e.path)
                if prior is not None and prior.data != e.data:
                    raise ImageError(f"two dependencies install {e.path} with different contents")
                entries[e.path] = e
            up(i + 1, len(found) + 1)
        return cache.put(key, "deps", entries.values())


def _pip_download(cmd: Sequence[str], total: int, *, progress: bool) -> None:
    with progress_bar("Python dependencies (pip download)", total, enabled=progress) as up:
        done = 0

        def seen(line: str) -> None:
            nonlocal done
            if line.startswith(("Saved ", "File was already downloaded")):
                done += 1
                up(done, total)

        code, tail = _stream(cmd, None, seen, what="pip")
    if code != 0:
        errors = [t for t in tail if t.startswith("ERROR")] or tail[-2:]
        detail = "; ".join(e.removeprefix("ERROR: ") for e in errors[-2:])[:400]
        raise ImageError(f"pip download of the pinned dependencies failed: {detail}")


def _match_wheels(folder: Path, pins: Sequence[tuple[str, str]]) -> list[Path]:
    from packaging.utils import canonicalize_name, canonicalize_version

    by_pin: dict[tuple[str, str], list[Path]] = {}
    for path in sorted(folder.glob("*.whl")):
        m = _WHEEL_NAME.match(path.name)
        if m:
            by_pin.setdefault((canonicalize_name(m["name"]), canonicalize_version(m["version"])), []).append(path)
    out = []
    for name, version in pins:
        hits = by_pin.get((canonicalize_name(name), canonicalize_version(version)), [])
        if len(hits) != 1:
            raise ImageError(f"expected one wheel of {name} {version} from pip, found {len(hits)} in {folder}")
        out.append(hits[0])
    return out


# -- layer (c) and the whole build -------------------------------------------------------


def _open_artifact(wheel: Path) -> Artifact:
    from mirrorworld.ship.artifact import Artifact

    return Artifact.open(wheel)


def _labels(art: Artifact) -> dict[str, str]:
    m = art.manifest
    labels = {
        "org.opencontainers.image.title": f"mirrorworld {m.world}",
        "org.opencontainers.image.description": f"mirrorworld serve for {m.env_id} (content hash {m.content_hash})",
        "org.opencontainers.image.version": f"{m.mirrorworld_version} {m.env_id}",
        "org.opencontainers.image.created": created(),
        "io.mirrorworld.env-id": m.env_id,
        "io.mirrorworld.world": m.world,
        "io.mirrorworld.content-hash": m.content_hash,
        "io.mirrorworld.artifact": art.path.name,
        "io.mirrorworld.artifact-digest": f"sha256:{art.digest}",
        "io.mirrorworld.port": str(PORT),
    }
    if m.licence:
        labels["org.opencontainers.image.licenses"] = m.licence
    return labels


def build_image(
    wheel: Path | str,
    out: Path | str,
    *,
    cache_dir: Path | str | None = None,
    base: BaseSpec = BaseSpec(),
    progress: bool = False,
) -> ImageResult:
    """Build the image that serves the artifact ``wheel`` and write it to ``out``.

    ``out`` ending in ``.tar`` is an ``oci-archive`` (``podman load -i``,
    ``skopeo copy oci-archive:...``), otherwise an OCI image layout folder.
    The base and dependency layers come from ``cache_dir`` when they were built
    before from the same inputs (see the module docstring); ``progress`` draws
    bars on stderr for the long steps. Built twice from the same inputs, the
    image has the same digest.
    """
    started = time.monotonic()
    wheel, out = Path(wheel), Path(out)
    art = _open_artifact(wheel)
    cache = _Cache(Path(cache_dir) if cache_dir is not None else default_cache_dir())
    arch = _architecture()
    m = art.manifest
    requirements = [*m.dependencies, *m.extras.get(SERVER_EXTRA, ())]
    if not m.extras.get(SERVER_EXTRA):
        raise ImageError(f"{wheel.name} declares no '{SERVER_EXTRA}' extra, so the image could not serve it")
    base_layer = _base_layer(base, cache, progress=progress)
    deps_layer = _deps_layer(requirements, base, cache, progress=progress)
    pins = pin_dependencies(requirements, base)
    python = f"/usr/bin/python{base.python}"
    with tempfile.TemporaryDirectory(dir=cache.root, prefix=".app-") as tmp:
        app_blob = Path(tmp) / "app.tar.gz"
        with app_blob.open("wb") as f:
            entries = [*wheel_entries(wheel, base.site_packages, python=python), *console_scripts(wheel, python=python)]
            digest, diff_id, size, unpacked = write_layer(entries, f)
        app_layer = LayerInfo("app", digest, diff_id, size, unpacked)
        layers = (base_layer, deps_layer, app_layer)
        labels = _labels(art)
        command = ["serve", "--host", "0.0.0.0", "--port", str(PORT), "--world", m.world]
        config = image_config(
            layers,
            command=command,
            labels=labels,
            architecture=arch,
            history=(
                f"mirrorworld image: Debian {base.suite} with python{base.python} (mmdebstrap)",
                f"mirrorworld image: {len(pins)} pinned Python dependencies",
                f"mirrorworld image: artifact {wheel.name}",
            ),
        )
        ref = f"mirrorworld/{m.world}:v{m.version}-{m.content_hash[:12]}"
        blobs = [(base_layer, cache.blob(base_layer.digest)), (deps_layer, cache.blob(deps_layer.digest))]
        blobs.append((app_layer, app_blob))
        image_digest, config_digest, total = write_layout(out, config, blobs, annotations=labels, ref=ref)
    return ImageResult(
        path=out,
        format="oci-archive" if out.name.endswith(".tar") else "oci-layout",
        digest=image_digest,
        config_digest=config_digest,
        ref=ref,
        size=total,
        seconds=time.monotonic() - started,
        layers=layers,
        labels=labels,
    )
