"""``mirrorworld image build``: deterministic layers and OCI JSON, and a real image served by podman.

The fast tests check the writer with no container tool: the same files give
the same bytes whatever their order, mtimes, owner names and xattrs. The slow
test builds a helpdesk image twice (cold, then from the cached base) and
asserts one digest, then runs it under podman and solves a task over HTTP.
It needs ``podman``, ``runc`` and ``mmdebstrap`` (``apt-get install podman
runc mmdebstrap``) and skips without them. Its traffic stays on loopback:
the container shares the host's network and the server binds 127.0.0.1
(the default command's off-loopback bind is checked by its refusal to start
without a token).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import random
import shutil
import socket
import subprocess
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from mirrorworld.errors import MirrorworldError
from mirrorworld.ship import image as img
from mirrorworld.ship.image import EPOCH, Entry, ImageError, LayerInfo


def _layer(entries: list[Entry]) -> bytes:
    buf = io.BytesIO()
    img.write_layer(entries, buf)
    return buf.getvalue()


def _members(blob: bytes) -> list[tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        return tar.getmembers()


ENTRIES = [
    Entry("usr/local/bin/tool", data=b"#!/bin/sh\n", mode=0o755),
    Entry("usr/local/lib/pkg/__init__.py", data=b"x = 1\n"),
    Entry("usr/local/lib/pkg/data.json", data=b"{}"),
    Entry("usr/local/lib/pkg/link", "symlink", target="data.json"),
    Entry("home/me", "dir", mode=0o700, uid=10001, gid=10001),
]


def test_layer_bytes_depend_on_the_files_only() -> None:
    first = _layer(ENTRIES)
    shuffled = ENTRIES[:]
    random.Random(7).shuffle(shuffled)
    assert _layer(shuffled) == first
    assert first[4:8] == b"\0\0\0\0"  # gzip header mtime
    members = _members(first)
    names = [m.name for m in members]
    assert names == sorted(names)
    assert {"usr", "usr/local", "usr/local/lib", "home"} <= set(names)  # parents written
    assert all(m.mtime == EPOCH and m.uname == "" and m.gname == "" and not m.pax_headers for m in members)
    home = next(m for m in members if m.name == "home/me")
    assert (home.uid, home.gid, home.mode) == (10001, 10001, 0o700)
    digest, diff_id, size, unpacked = img.write_layer(ENTRIES, io.BytesIO())
    assert digest == "sha256:" + hashlib.sha256(first).hexdigest() and size == len(first)
    assert diff_id == "sha256:" + hashlib.sha256(gzip.decompress(first)).hexdigest()
    assert unpacked == len(gzip.decompress(first))


def test_layer_refuses_what_would_be_ambiguous() -> None:
    with pytest.raises(ImageError, match="twice"):
        _layer([Entry("a/b"), Entry("./a//b")])
    with pytest.raises(ImageError, match="unsafe"):
        _layer([Entry("a/../../etc/passwd")])
    with pytest.raises(ImageError, match="not a folder"):
        _layer([Entry("a"), Entry("a/b")])
    with pytest.raises(ImageError, match="not before it"):
        _layer([Entry("a", "hardlink", target="b"), Entry("b")])


def _rootfs(mtime: int, owner: str, *, hostname: bytes) -> bytes:
    """A root file system tar as mmdebstrap writes one, with what varies from host to host."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:

        def add(name: str, kind: bytes = tarfile.REGTYPE, data: bytes = b"", **kw: Any) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mtime, info.uname, info.gname, info.size = kind, mtime, owner, owner, len(data)
            for k, v in kw.items():
                setattr(info, k, v)
            tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)

        add("./", tarfile.DIRTYPE, mode=0o755)
        add("./etc/", tarfile.DIRTYPE, mode=0o755)
        add("./etc/passwd", data=b"root:x:0:0:root:/root:/bin/bash\n", mode=0o644)
        add("./etc/group", data=b"root:x:0:\n", mode=0o644)
        add("./etc/shadow", data=b"root:*::::::\n", mode=0o640, gid=42)
        add("./etc/hostname", data=hostname)
        add("./etc/resolv.conf", data=b"nameserver " + hostname)
        add("./dev/", tarfile.DIRTYPE, mode=0o755)
        add("./dev/null", tarfile.CHRTYPE, mode=0o666, devmajor=1, devminor=3)
        add("./usr/", tarfile.DIRTYPE, mode=0o755)
        add("./usr/bin/", tarfile.DIRTYPE, mode=0o755)
        add("./usr/bin/perl", data=b"ELF", mode=0o755, pax_headers={"SCHILY.xattr.user.x": owner})
        add("./usr/bin/aperl", tarfile.LNKTYPE, linkname="./usr/bin/perl")  # sorts before its target
        add("./usr/bin/sh", tarfile.SYMTYPE, linkname="dash")
        add("./var/", tarfile.DIRTYPE, mode=0o755)
        add("./var/lib/", tarfile.DIRTYPE, mode=0o755)
        add("./var/lib/dpkg/", tarfile.DIRTYPE, mode=0o755)
        add("./var/lib/dpkg/status-old", data=b"old")
    return buf.getvalue()


def test_base_is_normalised() -> None:
    one = img.normalize_base(io.BytesIO(_rootfs(1_700_000_000, "root", hostname=b"vm\n")))
    two = img.normalize_base(io.BytesIO(_rootfs(1_800_000_000, "builder", hostname=b"laptop\n")))
    assert _layer(one) == _layer(two)
    members = {m.name: m for m in _members(_layer(one))}
    assert "dev" in members and "dev/null" not in members
    assert not {"etc/hostname", "etc/resolv.conf", "var/lib/dpkg/status-old"} & set(members)
    assert members["etc/shadow"].gid == 42 and members["etc/shadow"].mode == 0o640
    assert members["usr/bin/aperl"].isfile() and members["usr/bin/perl"].islnk()
    assert members["usr/bin/perl"].linkname == "usr/bin/aperl" and members["usr/bin/aperl"].mode == 0o755
    assert members["usr/bin/sh"].issym() and members["usr/bin/sh"].linkname == "dash"
    home = members["home/mirrorworld"]
    assert (home.uid, home.gid) == (img.UID, img.UID)
    passwd = next(e for e in one if e.path == "etc/passwd").data.decode()
    assert (
        passwd.splitlines()[-1] == f"mirrorworld:x:{img.UID}:{img.UID}:mirrorworld:/home/mirrorworld:/usr/sbin/nologin"
    )
    group = next(e for e in one if e.path == "etc/group").data.decode()
    assert group.endswith(f"mirrorworld:x:{img.UID}:\n")


def _wheel(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("pkg/__init__.py", "")
        info = zipfile.ZipInfo("pkg/run.sh")
        info.external_attr = 0o100755 << 16
        zf.writestr(info, "#!/bin/sh\n")
        zf.writestr("pkg-1.0.data/scripts/pkg-tool", "#!python\nprint(1)\n")
        zf.writestr("pkg-1.0.data/platlib/_pkg.so", b"\x7fELF")
        zf.writestr("pkg-1.0.data/data/share/pkg/x.txt", "x")
        zf.writestr("pkg-1.0.dist-info/entry_points.txt", "[console_scripts]\npkg = pkg.cli:main\n")
    return path


def test_wheel_is_unpacked_as_an_installer_would(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path / "pkg-1.0-py3-none-any.whl")
    site = "usr/local/lib/python3.11/dist-packages"
    entries = {e.path: e for e in img.wheel_entries(wheel, site)}
    assert set(entries) == {
        f"{site}/pkg/__init__.py",
        f"{site}/pkg/run.sh",
        f"{site}/_pkg.so",
        f"{site}/pkg-1.0.dist-info/entry_points.txt",
        "usr/local/bin/pkg-tool",
        "usr/local/share/pkg/x.txt",
    }
    assert entries[f"{site}/pkg/run.sh"].mode == 0o755 and entries[f"{site}/pkg/__init__.py"].mode == 0o644
    assert entries["usr/local/bin/pkg-tool"].data == b"#!/usr/bin/python3\nprint(1)\n"
    (launcher,) = img.console_scripts(wheel)
    assert launcher.path == "usr/local/bin/pkg" and launcher.mode == 0o755
    assert launcher.data.startswith(b"#!/usr/bin/python3\n") and b"from pkg.cli import main" in launcher.data


def _layout(tmp_path: Path, out: Path) -> tuple[str, str, int]:
    blob = tmp_path / "layer.tar.gz"
    with blob.open("wb") as f:
        digest, diff_id, size, unpacked = img.write_layer(ENTRIES, f)
    layer = LayerInfo("app", digest, diff_id, size, unpacked)
    labels = {"io.mirrorworld.env-id": "mirrorworld/Helpdesk-v0"}
    config = img.image_config([layer], command=["serve"], labels=labels, architecture="amd64")
    return img.write_layout(out, config, [(layer, blob)], annotations=labels, ref="mirrorworld/x:v0")


def test_layout_and_archive_are_deterministic(tmp_path: Path) -> None:
    a = _layout(tmp_path, tmp_path / "a.tar")
    b = _layout(tmp_path, tmp_path / "b.tar")
    assert a == b and (tmp_path / "a.tar").read_bytes() == (tmp_path / "b.tar").read_bytes()
    digest, config_digest, _size = _layout(tmp_path, tmp_path / "layout")
    assert digest == a[0]
    root = tmp_path / "layout"
    index = json.loads((root / "index.json").read_text())
    (desc,) = index["manifests"]
    assert desc["digest"] == digest and desc["annotations"]["org.opencontainers.image.ref.name"] == "mirrorworld/x:v0"
    manifest_bytes = (root / "blobs/sha256" / digest.split(":")[1]).read_bytes()
    assert "sha256:" + hashlib.sha256(manifest_bytes).hexdigest() == digest
    manifest = json.loads(manifest_bytes)
    assert img.canonical_json(manifest) == manifest_bytes  # canonical: sorted keys, no spaces
    assert manifest["config"]["digest"] == config_digest
    config = json.loads((root / "blobs/sha256" / config_digest.split(":")[1]).read_bytes())
    assert config["created"] == "2024-01-01T00:00:00Z" and config["config"]["User"] == f"{img.UID}:{img.UID}"
    assert config["config"]["ExposedPorts"] == {"8000/tcp": {}}
    with tarfile.open(tmp_path / "a.tar") as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == sorted(m.name for m in members)
    assert all(m.mtime == EPOCH and m.uid == 0 for m in members)


def test_layout_never_overwrites_a_folder_of_something_else(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "keep.txt").write_text("mine")
    with pytest.raises(ImageError, match="not an OCI image layout"):
        _layout(tmp_path, tmp_path / "docs")
    assert (tmp_path / "docs" / "keep.txt").read_text() == "mine"


def test_dependencies_are_pinned_to_this_environment() -> None:
    from importlib import metadata

    pins = dict(img.pin_dependencies(["rich>=13"]))
    assert pins["rich"] == metadata.version("rich")
    assert "markdown-it-py" in pins and "Pygments" in pins  # followed through rich's own requirements
    with pytest.raises(ImageError, match="not installed here"):
        img.pin_dependencies(["no-such-distribution-mw==1.0"])
    with pytest.raises(ImageError, match="is installed here but"):
        img.pin_dependencies(["rich<1"])


def _parse(*argv: str) -> argparse.Namespace:
    from mirrorworld.ship.image_cli import register

    parser = argparse.ArgumentParser(prog="mirrorworld")
    handlers = register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    args.handler = handlers[args.command]
    return args


def test_cli_parses_and_reports_a_missing_artifact_in_one_line(tmp_path: Path) -> None:
    args = _parse("image", "build", "helpdesk", "--out", "x.tar", "--cache", "c", "--json")
    assert (args.image_command, args.world, args.out, args.cache, args.json) == (
        "build",
        "helpdesk",
        "x.tar",
        "c",
        True,
    )
    args = _parse("image", "build", str(tmp_path / "missing.whl"))
    with pytest.raises(MirrorworldError, match="cannot read artifact") as err:
        args.handler(args)
    assert "\n" not in str(err.value)


# -- the real image ------------------------------------------------------------------

TOOLS = ("podman", "runc", "mmdebstrap")
_missing = [t for t in TOOLS if shutil.which(t) is None]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
@pytest.mark.skipif(bool(_missing), reason=f"needs {', '.join(_missing)} (apt-get install podman runc mmdebstrap)")
def test_image_is_reproducible_and_serves_the_world(tmp_path: Path) -> None:
    import httpx

    from mirrorworld import make_world
    from mirrorworld.ship.artifact import pack
    from mirrorworld.ship.image import build_image

    wheel = pack("helpdesk", tmp_path / "dist")
    cache = tmp_path / "cache"
    cold = build_image(wheel, tmp_path / "cold.tar", cache_dir=cache)
    warm = build_image(wheel, tmp_path / "warm.tar", cache_dir=cache)
    assert not any(layer.cached for layer in cold.layers)
    assert [layer.cached for layer in warm.layers] == [True, True, False]
    assert warm.digest == cold.digest and warm.config_digest == cold.config_digest
    assert (tmp_path / "warm.tar").read_bytes() == (tmp_path / "cold.tar").read_bytes()

    conf = tmp_path / "containers.conf"
    conf.write_text(
        '[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\n'
        'events_logger = "file"\n'
    )
    env = {**os.environ, "CONTAINERS_CONF": str(conf)}
    runroot = Path(tempfile.mkdtemp(prefix="mw-podman-"))  # podman wants a runroot under 50 characters
    podman = ["podman", "--root", str(tmp_path / "storage"), "--runroot", str(runroot), "--storage-driver", "vfs"]

    def run(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([*podman, *args], env=env, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            pytest.fail(f"podman {args[0]} failed: {done.stderr.strip()[-2000:]}")
        return done

    run("load", "-i", str(tmp_path / "cold.tar"))
    info = json.loads(run("image", "inspect", cold.ref).stdout)[0]
    assert info["Id"] == cold.config_digest.split(":")[1] and info["Digest"] == cold.digest
    assert info["Config"]["User"] == f"{img.UID}:{img.UID}"
    labels = info["Config"]["Labels"]
    assert labels["io.mirrorworld.artifact-digest"] == "sha256:" + hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert labels["io.mirrorworld.env-id"] == "mirrorworld/Helpdesk-v0"
    assert labels["io.mirrorworld.content-hash"] == make_world("helpdesk").content_hash

    # The default command binds 0.0.0.0:8000, so without a token it refuses to start.
    refused = run("run", "--rm", "--runtime", "runc", "--network", "none", cold.ref, timeout=60, check=False)
    assert refused.returncode != 0 and "needs a bearer token" in refused.stderr

    port, token, name = _free_port(), "image-test-token-1", f"mw-image-test-{os.getpid()}"
    run(
        *("run", "-d", "--name", name, "--runtime", "runc", "--read-only", "--network", "host"),
        *(cold.ref, "serve", "--host", "127.0.0.1", "--port", str(port), "--world", "helpdesk", "--token", token),
    )
    try:
        base = f"http://127.0.0.1:{port}"
        headers = {"Authorization": f"Bearer {token}"}
        deadline = time.monotonic() + 90
        with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
            while True:
                try:
                    if client.get("/health").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    logs = run("logs", name, check=False)
                    pytest.fail(f"the server never answered /health: {(logs.stdout + logs.stderr)[-2000:]}")
                time.sleep(0.5)
            created = client.post("/v1/sessions", json={"family": "cancel_order", "seed": 1})
            assert created.status_code == 201, created.text
            sid = created.json()["session_id"]
            task = make_world("helpdesk").task("cancel_order", 1)
            for call in task.gold:
                step = client.post(f"/v1/sessions/{sid}/step", json={"tool": call.tool, "args": call.args})
                assert step.status_code == 200 and step.json()["ok"], step.text
            verdict = client.post(f"/v1/sessions/{sid}/verdict")
            assert verdict.status_code == 200, verdict.text
            assert verdict.json()["passed"] is True, verdict.text
    finally:
        run("rm", "-f", name, check=False)
        run("rmi", "-f", cold.ref, check=False)
        shutil.rmtree(runroot, ignore_errors=True)
