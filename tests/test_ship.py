"""Shipping worlds: reproducible artifacts, the version store, pinned runs, comparability, the regression gate.

The end-to-end test publishes the installed helpdesk, runs it pinned, publishes
a regressed version built from a copy of the package (one rule threshold
moved, the version bumped), watches the regression gate fail, rolls back, and
checks that the name resolves to the first artifact again.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import mirrorworld
from mirrorworld.cli import main
from mirrorworld.core.world import SCORE_PARTS
from mirrorworld.errors import MirrorworldError
from mirrorworld.run import RunFile
from mirrorworld.ship.artifact import Artifact, ArtifactError, pack
from mirrorworld.ship.compare import Delta, IncomparableError, Provenance, check_comparable, wilson
from mirrorworld.ship.manifest import Manifest, ManifestError, differing_parts, manifest_for
from mirrorworld.ship.store import Store, StoreError, split_ref

PACKAGE = Path(mirrorworld.__file__).resolve().parent


def _py(
    args: list[str], *, path: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, **(env or {}))
    if path is not None:
        full["PYTHONPATH"] = str(path)
    return subprocess.run(
        [sys.executable, "-m", "mirrorworld", *args],
        capture_output=True,
        text=True,
        env=full,
        stdin=subprocess.DEVNULL,
        timeout=600,
        check=False,
    )


def _variant(root: Path, *, version: int | None = None, threshold: int | None = None) -> Path:
    """A copy of the mirrorworld package under ``root`` with the helpdesk's version and/or approval threshold moved."""
    tree = root / "src"
    shutil.copytree(PACKAGE, tree / "mirrorworld", ignore=shutil.ignore_patterns("__pycache__"))
    helpdesk = tree / "mirrorworld" / "worlds" / "helpdesk"
    if threshold is not None:
        rules = helpdesk / "rules.py"
        text = rules.read_text()
        assert "APPROVAL_THRESHOLD_CENTS = 20_000" in text
        rules.write_text(text.replace("APPROVAL_THRESHOLD_CENTS = 20_000", f"APPROVAL_THRESHOLD_CENTS = {threshold}"))
    if version is not None:
        for name, old, new in (
            ("world.py", "    version = 0\n", f"    version = {version}\n"),
            ("__init__.py", '"mirrorworld/Helpdesk-v0",', f'"mirrorworld/Helpdesk-v{version}",'),
        ):
            f = helpdesk / name
            text = f.read_text()
            assert old in text
            f.write_text(text.replace(old, new))
    return tree


def _pack_in(tree: Path, out: Path) -> Path:
    done = _py(["pack", "helpdesk", "--out", str(out), "--json"], path=tree)
    assert done.returncode == 0, done.stderr
    return Path(json.loads(done.stdout)["path"])


# -- artifacts ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return pack("helpdesk", tmp_path_factory.mktemp("pack"))


def test_pack_is_byte_identical_across_builds_processes_and_hash_seeds(artifact: Path, tmp_path: Path) -> None:
    again = _py(
        ["pack", "helpdesk", "--out", str(tmp_path), "--json"], env={"PYTHONHASHSEED": "12345", "TZ": "Asia/Tokyo"}
    )
    assert again.returncode == 0, again.stderr
    other = Path(json.loads(again.stdout)["path"])
    assert other.name == artifact.name
    assert other.read_bytes() == artifact.read_bytes()
    # a stray cache or editor file never changes the bytes
    junk = PACKAGE / "worlds" / "helpdesk" / "__pycache__" / "junk.cpython-311.pyc"
    junk.parent.mkdir(exist_ok=True)
    junk.write_bytes(os.urandom(64))
    try:
        assert pack("helpdesk", tmp_path / "third").read_bytes() == artifact.read_bytes()
    finally:
        junk.unlink()


def test_an_artifact_is_a_wheel_with_its_manifest_and_the_worlds_entry_point(artifact: Path) -> None:
    art = Artifact.open(artifact)
    m = art.manifest
    from mirrorworld import make_world

    world = make_world("helpdesk")
    assert (m.env_id, m.world, m.version, m.content_hash) == (world.id, "helpdesk", 0, world.content_hash)
    assert set(m.parts) == set(SCORE_PARTS) and dict(m.parts) == world.score_parts()
    assert m.dependencies and all(isinstance(d, str) for d in m.dependencies)
    assert "server" in m.extras and m.licence == "Apache-2.0" and m.reward_range == (0.0, 1.0)
    assert m.determinism["seeded"] is True and set(m.families) == {f.name for f in world.families}
    assert art.digest == hashlib.sha256(artifact.read_bytes()).hexdigest()
    with zipfile.ZipFile(artifact) as zf:
        names = zf.namelist()
        assert names == sorted(names[:-5]) + names[-5:]  # the package, sorted, then the .dist-info files
        dist = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        eps = zf.read(dist).decode()
        assert "helpdesk = mirrorworld.worlds.helpdesk:SPEC" in eps and "sales" not in eps
        assert "mirrorworld = mirrorworld.cli:main" in eps
        assert all(i.date_time == (1980, 1, 1, 0, 0, 0) for i in zf.infolist())
        assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert Manifest.from_json(m.to_json()) == m


def _rewrite(src: Path, dst: Path, change: dict[str, bytes | None]) -> None:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = change.get(info.filename, zin.read(info))
            if data is not None:
                zout.writestr(info, data)
        for name, data in change.items():
            if name not in zin.namelist() and data is not None:
                zout.writestr(name, data)


def test_an_altered_or_foreign_artifact_is_refused_with_one_line(artifact: Path, tmp_path: Path) -> None:
    rules = "mirrorworld/worlds/helpdesk/rules.py"
    with zipfile.ZipFile(artifact) as zf:
        original = zf.read(rules)
        manifest_name = next(n for n in zf.namelist() if n.endswith("mirrorworld-manifest.json"))
    cases = {
        "altered.whl": {rules: original.replace(b"20_000", b"90_000")},
        "extra.whl": {"mirrorworld/evil.py": b"import os\n"},
        "unsafe.whl": {"../escape.py": b"x"},
        "nomanifest.whl": {manifest_name: None},
    }
    for name, change in cases.items():
        _rewrite(artifact, tmp_path / name, change)
    (tmp_path / "notzip.whl").write_bytes(b"not a zip at all")
    for name in [*cases, "notzip.whl"]:
        with pytest.raises(ArtifactError) as err:
            Artifact.open(tmp_path / name)
        assert "\n" not in str(err.value), name
    out = _py(["env", "--store", str(tmp_path / "store"), "publish", str(tmp_path / "altered.whl")])
    assert out.returncode == 1 and out.stderr.startswith("mirrorworld: error: ") and out.stderr.count("\n") == 1


@pytest.mark.parametrize(
    "change",
    [
        {"format": "other/9"},
        {"version": -1},
        {"version": "0"},
        {"content_hash": "XYZ"},
        {"parts": {"rules": "nothex"}},
        {"parts": []},
        {"env_id": "no-version"},
        {"scale": 0},
        {"reward_range": [1.0, 0.0]},
        {"dependencies": ["ok", 3]},
        {"tools": ["Bad Name"]},
        {"surprise": 1},
        {"licence": "a\x1b[31mred"},
        {"python": '>=3.11", evil = "1'},
        {"reward_range": [float("-inf"), 1.0]},
        {"content_hash": "0" * 16},
        {"env_id": "evil/Other-v0"},
        {"version": 3},
    ],
)
def test_a_malformed_manifest_is_refused(artifact: Path, change: dict[str, object]) -> None:
    raw = Artifact.open(artifact).manifest.to_dict()
    raw.update(change)
    with pytest.raises(ManifestError):
        Manifest.from_dict(raw)


def test_one_rule_threshold_changes_the_rules_part_and_publishing_it_needs_a_version_bump(
    artifact: Path, tmp_path: Path
) -> None:
    store = Store(tmp_path / "store")
    store.publish(artifact)
    moved = _pack_in(_variant(tmp_path / "moved", threshold=15_000), tmp_path / "moved-dist")
    art = Artifact.open(moved)
    base = Artifact.open(artifact).manifest
    assert differing_parts(base.parts, art.manifest.parts) == ["rules"]
    assert art.manifest.content_hash != base.content_hash and art.manifest.version == 0
    with pytest.raises(StoreError, match="differs in rules: bump the world's version"):
        store.publish(moved)
    assert store.resolve("helpdesk").digest == Artifact.open(artifact).digest  # nothing moved
    bumped = _pack_in(_variant(tmp_path / "bumped", threshold=15_000, version=1), tmp_path / "bumped-dist")
    done = store.publish(bumped)
    assert done.manifest.version == 1 and done.pinned
    assert store.publish(bumped).digest == done.digest  # the same bytes again: a no-op
    assert len(store.published("helpdesk")) == 2


def test_store_references_pins_and_rollback(artifact: Path, tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    with pytest.raises(StoreError, match="nothing is published"):
        store.resolve("helpdesk")
    a = store.publish(artifact)
    assert store.resolve("helpdesk@0").digest == a.digest
    assert store.resolve(f"helpdesk@{a.digest[:8]}").digest == a.digest
    assert store.resolve(f"helpdesk@{a.manifest.content_hash}").digest == a.digest
    for bad in ("helpdesk@xyz", "Helpdesk", "helpdesk@1234567", "helpdesk@", "a b", "helpdesk@0@1"):
        with pytest.raises(StoreError):
            split_ref(bad) if "@" not in bad or bad.count("@") > 1 else store.resolve(bad)
    with pytest.raises(StoreError, match="no earlier pin"):
        store.rollback("helpdesk")
    assert store.resolve(f"helpdesk@{a.manifest.content_hash[:8]}").digest == a.digest
    with pytest.raises(StoreError):
        store.resolve(f"helpdesk@{a.manifest.content_hash}ffff")
    with pytest.raises(StoreError, match="version 7 is not published"):
        store.pin("helpdesk@7")
    # a damaged blob is caught when resolved
    blob = store.blobs.path(a.digest)
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0xFF
    blob.write_bytes(bytes(data))
    with pytest.raises(MirrorworldError):
        store.resolve("helpdesk")


# -- comparability -------------------------------------------------------------------


def test_compare_refuses_runs_of_different_builds_and_names_the_part(artifact: Path, tmp_path: Path) -> None:
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    assert main(["run", "--episodes", "9", "--out", str(a), "--no-progress", "--json"]) == 0
    assert main(["run", "--episodes", "9", "--agent", "claim", "--out", str(b), "--no-progress", "--json"]) == 0
    out = _py(["compare", str(a), str(b)])
    assert out.returncode == 0, out.stderr
    assert "all" in out.stdout and "-100%" in out.stdout  # the oracle passes everything, the claimer nothing
    # the same run with another rules part: refused, naming it
    with RunFile.open(b) as run:
        meta = run.meta
    forged = tmp_path / "forged.sqlite"
    shutil.copy(b, forged)
    import sqlite3

    conn = sqlite3.connect(forged)
    parts = dict(meta["world_parts"], rules="0" * 16)
    conn.execute("UPDATE meta SET value=? WHERE key='world_parts'", (json.dumps(parts),))
    conn.execute("UPDATE meta SET value=? WHERE key='world_hash'", (json.dumps("f" * 16),))
    conn.commit()
    conn.close()
    refused = _py(["compare", str(a), str(forged)])
    assert refused.returncode == 1 and "differ in rules" in refused.stderr and refused.stderr.count("\n") == 1
    warned = _py(["compare", str(a), str(forged), "--allow-incomparable", "--json"])
    assert warned.returncode == 0 and "WARNING" in warned.stderr and "rules" in warned.stderr
    assert json.loads(warned.stdout)["incomparable"] == ["rules"]


def test_provenance_of_hostile_meta_and_old_run_files() -> None:
    with pytest.raises(MirrorworldError):
        Provenance.of({"world": 3})
    old = Provenance.of({"world": "mirrorworld/Helpdesk-v0", "world_hash": "a" * 16})
    new = Provenance.of(
        {"world": "mirrorworld/Helpdesk-v0", "world_hash": "b" * 16, "world_parts": {"rules": "c" * 16}}
    )
    with pytest.raises(IncomparableError, match="unknown parts"):
        check_comparable(old, new)
    assert check_comparable(old, old) == []


def test_wilson_and_newcombe_intervals() -> None:
    low, high = wilson(0, 10)
    assert low == 0.0 and 0.27 < high < 0.28
    low, high = wilson(10, 10)
    assert 0.72 < low < 0.73 and high == 1.0
    d = Delta("x", 20, 20, 20, 0)
    assert d.delta == -1.0 and d.interval[1] < -0.6
    same = Delta("x", 20, 10, 20, 10)
    assert same.interval[0] < 0 < same.interval[1]


# -- end to end ----------------------------------------------------------------------


def test_publish_run_pinned_regress_gate_rollback(artifact: Path, tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    env = {"MIRRORWORLD_STORE": str(store_dir), "MIRRORWORLD_CACHE": str(tmp_path / "cache")}
    good = Artifact.open(artifact)
    assert _py(["env", "publish", str(artifact)], env=env).returncode == 0
    # a run pinned to the published version records its artifact
    reference = tmp_path / "reference.sqlite"
    ran = _py(
        ["run", "--world", "helpdesk@0", "--episodes", "18", "--out", str(reference), "--json", "--no-progress"],
        env=env,
    )
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["pass_rate"] == 1.0
    with RunFile.open(reference) as run:
        assert run.meta["artifact"] == good.digest and run.meta["world_hash"] == good.manifest.content_hash
    # a regressed version: approvals needed from $20 instead of $200, version bumped
    bad_path = _pack_in(_variant(tmp_path / "v1", threshold=2_000, version=1), tmp_path / "v1-dist")
    bad = Artifact.open(bad_path)
    published = _py(["env", "publish", str(bad_path)], env=env)
    assert published.returncode == 0, published.stderr
    assert Store(store_dir).resolve("helpdesk").digest == bad.digest
    # pinned runs of the new version run its own code (not the installed one) and record it
    v1_run = tmp_path / "v1.sqlite"
    ran = _py(
        ["run", "--world", "helpdesk@1", "--episodes", "3", "--out", str(v1_run), "--json", "--no-progress"], env=env
    )
    assert ran.returncode == 0, ran.stderr
    with RunFile.open(v1_run) as run:
        assert run.meta["artifact"] == bad.digest and run.meta["world"] == "mirrorworld/Helpdesk-v1"
        assert run.meta["world_parts"]["rules"] == bad.manifest.parts["rules"]
    # the gate: the recorded reference agent on the candidate and on the pin it replaced
    gate = _py(
        [
            "env",
            "gate",
            "helpdesk@1",
            "--replay",
            str(reference),
            "--episodes",
            "18",
            "--json",
        ],
        env=env,
    )
    assert gate.returncode == 1, gate.stderr
    report = json.loads(gate.stdout)
    assert report["passed"] is False and "all" in report["regressed"]
    assert report["old"] == good.digest[:16] and report["new"] == bad.digest[:16]
    fams = {f["family"]: f for f in report["families"]}
    assert fams["all"]["ci95"][1] < 0 and fams["all"]["delta"] < 0
    assert any(f["delta"] == 0 for f in report["families"])  # families the threshold does not touch stay put
    # rollback: one command, and the name resolves to the good artifact again
    back = _py(["env", "rollback", "helpdesk"], env=env)
    assert back.returncode == 0, back.stderr
    assert Store(store_dir).resolve("helpdesk").digest == good.digest
    shown = _py(["env", "show", "helpdesk", "--json"], env=env)
    history = json.loads(shown.stdout)["history"]
    assert [h["action"] for h in history] == ["publish", "publish", "rollback"]
    # the gate passes the good version against itself
    same = _py(
        ["env", "gate", "helpdesk@0", "--against", "helpdesk@0", "--replay", str(reference), "--episodes", "18"],
        env=env,
    )
    assert same.returncode == 0, same.stdout + same.stderr
    assert "gate: passed" in same.stdout


def test_manifest_for_the_installed_world_matches_pack(artifact: Path) -> None:
    from mirrorworld import make_world

    assert manifest_for(make_world("helpdesk")).to_json() == Artifact.open(artifact).manifest.to_json()
    assert io.BytesIO(artifact.read_bytes()).read(2) == b"PK"


def test_review_statistics_refuse_runs_of_different_builds(tmp_path: Path) -> None:
    import sqlite3

    from mirrorworld.review.stats import StatsOptions, compute_stats
    from mirrorworld.review.store import ReviewStore
    from mirrorworld.review.testing import make_runs
    from mirrorworld.ship.compare import IncomparableError

    runs = make_runs(tmp_path, ("oracle", "claim"), episodes=3)
    conn = sqlite3.connect(runs[1])
    (raw,) = conn.execute("SELECT value FROM meta WHERE key='world_parts'").fetchone()
    parts = dict(json.loads(raw), tasks="1" * 16)
    conn.execute("UPDATE meta SET value=? WHERE key='world_parts'", (json.dumps(parts),))
    conn.execute("UPDATE meta SET value=? WHERE key='world_hash'", (json.dumps("e" * 16),))
    conn.commit()
    conn.close()
    store = ReviewStore(tmp_path / "review.sqlite")
    for p in runs:
        store.add_run(p, audit=False)
    with pytest.raises(IncomparableError, match="differ in tasks"):
        compute_stats(store)
    assert compute_stats(store, StatsOptions(resamples=20, allow_incomparable=True))["incomparable"] == ["tasks"]
    out = subprocess.run(
        [sys.executable, "-m", "mirrorworld.review", "stats", "--db", str(tmp_path / "review.sqlite")],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )
    assert out.returncode == 1 and "differ in tasks" in out.stderr and out.stderr.count("\n") == 1


@pytest.mark.parametrize(
    "ddl",
    [
        "CREATE VIEW artifacts AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r)"
        " SELECT x AS digest FROM r",
        "CREATE TABLE pins (world TEXT, digest TEXT);"
        " CREATE TRIGGER t AFTER INSERT ON pins BEGIN DELETE FROM pins; END",
        "CREATE TABLE other (x)",
    ],
)
def test_a_hostile_catalogue_is_refused_without_running_it(tmp_path: Path, ddl: str) -> None:
    import sqlite3

    conn = sqlite3.connect(tmp_path / "catalogue.sqlite")
    conn.executescript(ddl)
    conn.close()
    before = (tmp_path / "catalogue.sqlite").read_bytes()
    for args in (["list"], ["show", "helpdesk"], ["rollback", "helpdesk"], ["pin", "helpdesk@0"]):
        out = _py(["env", "--store", str(tmp_path), *args])
        assert out.returncode == 1 and "not a version store catalogue" in out.stderr, (args, out.stderr)
        assert out.stderr.count("\n") == 1
    assert (tmp_path / "catalogue.sqlite").read_bytes() == before


def _retamper(src: Path, dst: Path, name: str, data: bytes) -> None:
    """``src`` with file ``name`` replaced and its RECORD line recomputed: well formed, genuine manifest, other code."""
    import base64

    with zipfile.ZipFile(src) as zin:
        files = {i.filename: zin.read(i) for i in zin.infolist()}
    files[name] = data
    record_name = next(n for n in files if n.endswith(".dist-info/RECORD"))
    lines = []
    for n, d in files.items():
        if n == record_name:
            continue
        digest = base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode()
        lines.append(f"{n},sha256={digest},{len(d)}\n")
    files[record_name] = ("".join(lines) + f"{record_name},,\n").encode()
    with zipfile.ZipFile(dst, "w") as zout:
        for n, d in files.items():
            zout.writestr(n, d)


def test_publishing_checks_the_code_against_its_manifest(artifact: Path, tmp_path: Path) -> None:
    rules = "mirrorworld/worlds/helpdesk/rules.py"
    with zipfile.ZipFile(artifact) as zf:
        original = zf.read(rules)
    tampered = tmp_path / "tampered.whl"
    _retamper(artifact, tampered, rules, original.replace(b"20_000", b"90_000"))
    art = Artifact.open(tampered)  # well formed: every file matches its RECORD line
    store = Store(tmp_path / "store")
    with pytest.raises(ArtifactError, match=r"does not give the manifest it declares.*parts\.rules"):
        store.publish(art)
    assert store.published() == []
    assert not list((tmp_path / "store" / "blobs").glob("*.whl")) if (tmp_path / "store" / "blobs").exists() else True


def test_artifact_names_files_and_sizes_are_checked(artifact: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(artifact) as zf:
        init = zf.read("mirrorworld/__init__.py")
    for name, label in (("mirrorworld/./__init__.py", "unsafe name"), ("mirrorworld/CLI.py", "twice")):
        bad = tmp_path / f"{label.replace(' ', '_')}.whl"
        _retamper(artifact, bad, name, init)
        with pytest.raises(ArtifactError, match=label):
            Artifact.open(bad)
    with pytest.raises(ArtifactError, match="not a regular file"):
        Artifact.open("/dev/zero")
    fifo = tmp_path / "fifo.whl"
    os.mkfifo(fifo)
    with pytest.raises(ArtifactError, match="not a regular file"):
        Artifact.open(fifo)
    deep = tmp_path / "deep.whl"
    name = next(n for n in zipfile.ZipFile(artifact).namelist() if n.endswith("mirrorworld-manifest.json"))
    _retamper(artifact, deep, name, b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(ManifestError, match="deeper"):
        Artifact.open(deep)


def test_the_checked_bytes_are_what_is_unpacked_and_a_damaged_cache_is_replaced(artifact: Path, tmp_path: Path) -> None:
    copy = tmp_path / artifact.name
    shutil.copy(artifact, copy)
    art = Artifact.open(copy)
    copy.write_bytes(b"swapped after it was checked")  # the file changes under the checked artifact
    root = art.extract(tmp_path / "cache")
    init = root / "mirrorworld" / "__init__.py"
    good = init.read_bytes()
    assert good.startswith(b'"""') and root.name == art.digest
    init.write_bytes(b'raise SystemExit("shadowed")\n')
    assert art.extract(tmp_path / "cache") == root and init.read_bytes() == good


def test_blobs_are_readable_by_the_team(artifact: Path, tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        done = Store(tmp_path / "store").publish(artifact, verify=False)
    finally:
        os.umask(old)
    blob = tmp_path / "store" / "blobs" / f"{done.digest}.whl"
    assert blob.stat().st_mode & 0o777 == 0o644
    packed = pack("helpdesk", tmp_path / "out")
    assert packed.stat().st_mode & 0o044  # the group and others may read what pack wrote (umask permitting)


def test_rollback_is_a_stack_of_pins(tmp_path: Path) -> None:
    from mirrorworld.ship.store import Store as S

    store = S(tmp_path / "store")
    arts = [Artifact.open(p) for p in _three_versions(tmp_path)]
    for a in arts:
        store.publish(a, verify=False)
    assert store.resolve("helpdesk").digest == arts[2].digest
    assert store.rollback("helpdesk").digest == arts[1].digest
    assert store.rollback("helpdesk").digest == arts[0].digest
    with pytest.raises(StoreError, match="no earlier pin"):
        store.rollback("helpdesk")
    store.pin("helpdesk@2")
    assert store.rollback("helpdesk").digest == arts[0].digest


def _three_versions(tmp_path: Path) -> list[Path]:
    out = [pack("helpdesk", tmp_path / "v0")]
    for v in (1, 2):
        out.append(_pack_in(_variant(tmp_path / f"t{v}", version=v), tmp_path / f"v{v}"))
    return out


def test_damaged_catalogue_rows_are_one_line(artifact: Path, tmp_path: Path) -> None:
    import sqlite3

    Store(tmp_path / "store").publish(artifact, verify=False)
    conn = sqlite3.connect(tmp_path / "store" / "catalogue.sqlite")
    conn.execute("UPDATE artifacts SET published_at='yesterday'")
    conn.execute("UPDATE history SET at=1e300")
    conn.commit()
    conn.close()
    for args in (["list"], ["show", "helpdesk"]):
        out = _py(["env", "--store", str(tmp_path / "store"), *args])
        assert out.returncode == 1 and "damaged" in out.stderr and out.stderr.count("\n") == 1, out.stderr


def test_the_gate_refuses_what_it_cannot_judge(artifact: Path, tmp_path: Path) -> None:
    from mirrorworld.ship.gate import GateReport

    assert GateReport("a", "b", [], 0.0, 4, 4).passed is False  # nothing graded is no pass
    env = {"MIRRORWORLD_STORE": str(tmp_path / "store"), "MIRRORWORLD_CACHE": str(tmp_path / "cache")}
    assert _py(["env", "publish", str(artifact)], env=env).returncode == 0
    team = tmp_path / "team.sqlite"
    assert (
        main(["run", "--world", "helpdesk_team", "--episodes", "2", "--out", str(team), "--no-progress", "--json"]) == 0
    )
    for extra, needle in (
        (["--replay", str(team)], "recorded on mirrorworld/HelpdeskTeam"),
        (["--replay", str(team), "--tolerance", "nan"], "tolerance"),
        (["--agent", "oracle", "--episodes", "0"], "at least 1"),
    ):
        out = _py(["env", "gate", "helpdesk@0", "--against", "helpdesk@0", *extra], env=env)
        assert out.returncode == 2 and needle in out.stderr, (extra, out.stderr)


def test_an_abbreviated_world_option_and_no_nested_artifact_runs(artifact: Path, tmp_path: Path) -> None:
    env = {"MIRRORWORLD_STORE": str(tmp_path / "store"), "MIRRORWORLD_CACHE": str(tmp_path / "cache")}
    v1 = _pack_in(_variant(tmp_path / "v1", version=1), tmp_path / "v1-dist")
    assert _py(["env", "publish", str(v1)], env=env).returncode == 0
    out = tmp_path / "abbrev.sqlite"
    ran = _py(["run", "--worl", "helpdesk@1", "--episodes", "2", "--out", str(out), "--json", "--no-progress"], env=env)
    assert ran.returncode == 0, ran.stderr
    with RunFile.open(out) as run:
        assert run.meta["artifact"] == Artifact.open(v1).digest
    nested = _py(
        ["run", "--world", "helpdesk@1", "--episodes", "1", "--out", str(tmp_path / "n.sqlite"), "--no-progress"],
        env={**env, "MIRRORWORLD_ARTIFACT": "0" * 64},
    )
    assert nested.returncode == 1 and "already runs an artifact" in nested.stderr


def test_review_statistics_do_not_pool_a_run_that_names_no_build(tmp_path: Path) -> None:
    import sqlite3

    from mirrorworld.review.stats import incomparable_builds
    from mirrorworld.review.store import ReviewStore
    from mirrorworld.review.testing import make_runs

    runs = make_runs(tmp_path, ("oracle", "claim"), episodes=2)
    conn = sqlite3.connect(runs[1])
    conn.execute("DELETE FROM meta WHERE key IN ('world_hash', 'world_parts')")
    conn.commit()
    conn.close()
    store = ReviewStore(tmp_path / "review.sqlite")
    for p in runs:
        store.add_run(p, audit=False)
    assert incomparable_builds(store) == ["unknown build (a run file that names no world_hash)"]
