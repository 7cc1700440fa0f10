"""Deterministic OCI images: layers, config, manifest and the image layout, byte for byte.

Every byte of an image written here is a function of its files alone:

* tar entries sorted by path, parent folders written before their children,
  PAX format, mtime = :data:`EPOCH` for every entry, no user or group names,
  no xattrs, no device nodes; hard links point to the first name of their group;
* gzip with mtime 0 and no file name, at one fixed level (the compressed
  bytes also depend on the zlib Python is linked with; the uncompressed
  ``diff_id`` never does);
* config, manifest and index as canonical JSON (sorted keys, no spaces) with
  ``created`` = :data:`EPOCH`.

:func:`write_layer` writes one layer from :class:`Entry` values;
:func:`write_layout` writes an OCI image layout folder or, for a path ending
in ``.tar``, an ``oci-archive``. :mod:`mirrorworld.ship.image` builds a
world's image from these.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Literal, Protocol, cast

from mirrorworld.errors import MirrorworldError

__all__ = [
    "EPOCH",
    "Entry",
    "ImageError",
    "LayerInfo",
    "canonical_json",
    "write_layer",
    "write_layout",
]


class ImageError(MirrorworldError):
    """An image that cannot be built: a missing tool, a failed step, an input that does not fit."""


EPOCH = 1704067200
"""The fixed ``SOURCE_DATE_EPOCH`` (2024-01-01T00:00:00Z): every mtime and every ``created`` in the image."""


GZIP_LEVEL = 6


MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"


MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"


MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


@dataclass(frozen=True)
class LayerInfo:
    """One layer of a built image."""

    name: str
    digest: str
    """``sha256:...`` of the compressed blob (what the manifest names)."""
    diff_id: str
    """``sha256:...`` of the uncompressed tar (what the config names)."""
    size: int
    """Compressed bytes."""
    unpacked: int
    """Uncompressed tar bytes."""
    cached: bool = False


@dataclass(frozen=True)
class Entry:
    """One file system entry of a layer, normalised: no time, no owner names, no xattrs.

    ``path`` is relative (``usr/bin/x``); ``target`` is a symlink's target, or a
    hard link's other path in the same layer.
    """

    path: str
    kind: Literal["file", "dir", "symlink", "hardlink"] = "file"
    data: bytes = b""
    mode: int = 0o644
    uid: int = 0
    gid: int = 0
    target: str = ""


_TAR_TYPES = {"file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE, "hardlink": tarfile.LNKTYPE}


class _Sink(Protocol):
    def write(self, data: bytes, /) -> int: ...
    def flush(self) -> None: ...


class Digest:
    """A write-through file that hashes and counts what passes (``tarfile`` and ``gzip`` write to it)."""

    def __init__(self, sink: _Sink) -> None:
        self.sink = sink
        self.sha = hashlib.sha256()
        self.count = 0

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        self.count += len(data)
        self.sink.write(data)
        return len(data)

    def tell(self) -> int:
        return self.count

    def flush(self) -> None:
        self.sink.flush()

    @property
    def digest(self) -> str:
        return "sha256:" + self.sha.hexdigest()


def clean_path(path: str) -> str:
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise ImageError(f"unsafe path in a layer: {ascii(path)[:80]}")
    return "/".join(parts)


def with_parents(entries: Iterable[Entry]) -> list[Entry]:
    """The entries sorted by path, with a root-owned 0755 folder for every parent not listed; duplicates refused."""
    by_path: dict[str, Entry] = {}
    for e in entries:
        path = clean_path(e.path)
        if path in by_path:
            raise ImageError(f"{path} is twice in one layer")
        by_path[path] = e if path == e.path else Entry(path, e.kind, e.data, e.mode, e.uid, e.gid, e.target)
    for path in list(by_path):
        parts = path.split("/")
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            by_path.setdefault(parent, Entry(parent, "dir", mode=0o755))
    for path in by_path:
        parent = path.rpartition("/")[0]
        if parent and by_path[parent].kind != "dir":
            raise ImageError(f"{path} lies under {parent}, which is not a folder")
    return [by_path[p] for p in sorted(by_path)]


def write_layer(entries: Iterable[Entry], dest: IO[bytes]) -> tuple[str, str, int, int]:
    """Write a gzip'd tar layer of ``entries`` to ``dest``: ``(digest, diff_id, size, unpacked)``.

    The bytes depend on the entries' paths, kinds, data, modes, owners and
    targets only, never on the order they are given in: see the module
    docstring for the rules.
    """
    ordered = with_parents(entries)
    seen: set[str] = set()
    outer = Digest(dest)
    with gzip.GzipFile(filename="", mode="wb", fileobj=outer, compresslevel=GZIP_LEVEL, mtime=0) as gz:
        inner = Digest(gz)
        with tarfile.open(fileobj=cast(IO[bytes], inner), mode="w|", format=tarfile.PAX_FORMAT) as tar:
            for e in ordered:
                info = tarfile.TarInfo(e.path)
                info.type = _TAR_TYPES[e.kind]
                info.mode = e.mode & 0o7777
                info.uid, info.gid = e.uid, e.gid
                info.uname = info.gname = ""
                info.mtime = EPOCH
                if e.kind == "symlink":
                    info.linkname = e.target
                elif e.kind == "hardlink":
                    target = clean_path(e.target)
                    if target not in seen:
                        raise ImageError(f"hard link {e.path} points to {target}, which is not before it in the layer")
                    info.linkname = target
                if e.kind == "file":
                    info.size = len(e.data)
                    tar.addfile(info, io.BytesIO(e.data))
                else:
                    tar.addfile(info)
                seen.add(e.path)
    return outer.digest, inner.digest, outer.count, inner.count


def canonical_json(value: Any) -> bytes:
    """JSON with sorted keys, no whitespace and UTF-8 text: one byte string per value."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def created() -> str:
    return datetime.fromtimestamp(EPOCH, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def descriptor(media_type: str, digest: str, size: int, annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {"mediaType": media_type, "digest": digest, "size": size}
    if annotations:
        d["annotations"] = dict(annotations)
    return d


def write_layout(
    out: Path,
    config: Mapping[str, Any],
    layers: Sequence[tuple[LayerInfo, Path]],
    *,
    annotations: Mapping[str, str],
    ref: str,
) -> tuple[str, str, int]:
    """Write an OCI image layout (a folder) or, for ``out`` ending in ``.tar``, an ``oci-archive``.

    ``layers`` pairs each layer with its blob file. Returns the manifest's
    digest, the config's digest and the bytes of all blobs. The folder is
    replaced whole (atomically for an archive); a folder that is not an
    image layout is never overwritten.
    """
    config_bytes = canonical_json(config)
    config_digest = "sha256:" + hashlib.sha256(config_bytes).hexdigest()
    manifest = {
        "schemaVersion": 2,
        "mediaType": MEDIA_MANIFEST,
        "config": descriptor(MEDIA_CONFIG, config_digest, len(config_bytes)),
        "layers": [descriptor(MEDIA_LAYER, layer.digest, layer.size) for layer, _ in layers],
        "annotations": dict(annotations),
    }
    manifest_bytes = canonical_json(manifest)
    digest = "sha256:" + hashlib.sha256(manifest_bytes).hexdigest()
    index = {
        "schemaVersion": 2,
        "mediaType": MEDIA_INDEX,
        "manifests": [
            descriptor(MEDIA_MANIFEST, digest, len(manifest_bytes), {"org.opencontainers.image.ref.name": ref})
        ],
    }
    small: dict[str, bytes] = {
        "oci-layout": canonical_json({"imageLayoutVersion": "1.0.0"}),
        "index.json": canonical_json(index),
        blob_name(config_digest): config_bytes,
        blob_name(digest): manifest_bytes,
    }
    blobs = {blob_name(layer.digest): path for layer, path in layers}
    size = len(config_bytes) + len(manifest_bytes) + sum(layer.size for layer, _ in layers)
    out = Path(out)
    if out.is_dir() and any(out.iterdir()) and not (out / "oci-layout").is_file():
        raise ImageError(f"{out} is a folder that is not an OCI image layout; not overwriting it")
    if out.exists() and not out.is_dir() and not out.name.endswith(".tar"):
        raise ImageError(f"{out} is a file; name an image layout folder, or PATH.tar for an oci-archive")
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.name.endswith(".tar"):
        write_archive(out, small, blobs)
    else:
        if out.exists():
            shutil.rmtree(out)
        for name, data in small.items():
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            (out / name).write_bytes(data)
        for name, path in blobs.items():
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, out / name)
    return digest, config_digest, size


def blob_name(digest: str) -> str:
    algo, _, hexdigest = digest.partition(":")
    return f"blobs/{algo}/{hexdigest}"


def write_archive(out: Path, small: Mapping[str, bytes], blobs: Mapping[str, Path]) -> None:
    names = sorted({*small, *blobs})
    dirs = sorted({"/".join(n.split("/")[:i]) for n in names for i in range(1, n.count("/") + 1)})
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=".image-")
    try:
        with os.fdopen(fd, "wb") as f, tarfile.open(fileobj=f, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            for name in sorted([*dirs, *names]):
                info = tarfile.TarInfo(name)
                info.mtime, info.uname, info.gname = EPOCH, "", ""
                if name in dirs:
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
                elif name in small:
                    info.size, info.mode = len(small[name]), 0o644
                    tar.addfile(info, io.BytesIO(small[name]))
                else:
                    info.size, info.mode = blobs[name].stat().st_size, 0o644
                    with blobs[name].open("rb") as blob:
                        tar.addfile(info, blob)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
