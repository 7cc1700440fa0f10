"""Reviewer pools: they outlive review databases, keep a calibration history, route items, and say no in one line."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import subprocess
import sys
from collections import Counter
from functools import partial
from pathlib import Path

import pytest

from mirrorworld.errors import MirrorworldError
from mirrorworld.review.pools import Pool, PoolRegistry, Routing, main, take_next_routed, world_matches
from mirrorworld.review.quality import quality_report
from mirrorworld.review.queue import SamplingPlan, build_queue
from mirrorworld.review.simulated import SimClock, SimulatedReviewer, seeded_store, simulate
from mirrorworld.review.store import Item, ReviewStore
from mirrorworld.review.testing import make_runs

REFUNDS = ("refund_damaged", "refund_with_approval", "deny_refund")
TICKETS = ("triage", "merge_duplicates", "sla_escalation")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return make_runs(tmp_path_factory.mktemp("runs"), ("oracle", "claim", "random"), episodes=12)


def _review_db(path: Path, runs: list[Path], *, seed: int = 0, clock: SimClock | None = None) -> ReviewStore:
    store = seeded_store(path, seed=seed, clock=clock)
    store.add_run(runs[0], audit=False, gold=True)
    store.add_run(runs[1], audit=False)
    store.add_run(runs[2], audit=False)
    build_queue(store, SamplingPlan(overlap=2, overlap_share=0.5, gold_rate=0.2, seed=seed))
    return store


@pytest.fixture()
def registry(tmp_path: Path) -> PoolRegistry:
    clock = SimClock(1_800_000_000.0)
    reg = PoolRegistry(tmp_path / "pools.sqlite", clock=clock)
    reg.create_pool("helpdesk/refunds", world="helpdesk", families=REFUNDS, level="expert")
    reg.create_pool("helpdesk/tickets", world="mirrorworld/Helpdesk-v0", families=TICKETS)
    reg.add_member("helpdesk/refunds", "alice", password="alice-password")
    reg.add_member("helpdesk/refunds", "dora", password="dora-password")
    reg.add_member("helpdesk/tickets", "bob", password="bob-password")
    return reg


def test_a_pool_outlives_its_review_databases(tmp_path: Path, runs: list[Path], registry: PoolRegistry) -> None:
    clock = registry.clock
    assert isinstance(clock, SimClock)
    histories = []
    for n in (1, 2):
        store = _review_db(tmp_path / f"project-{n}.sqlite", runs, seed=n, clock=clock)
        engaged = registry.engage("helpdesk/refunds", store.path)
        assert [(e.member, e.created) for e in engaged] == [("alice", True), ("dora", True)]
        # The member signs in to the new database with the password they always had: no sign-up.
        signed = store.sign_in("alice", "alice-password", client="test", nonce=f"n{n}")
        assert signed.outcome == "ok"
        assert store.sign_in("alice", "wrong-password", client="test", nonce=f"m{n}").outcome == "wrong"
        routing = registry.route(store)
        take = partial(take_next_routed, routing=routing)
        simulate(store, [SimulatedReviewer("alice", seed=n), SimulatedReviewer("dora", accuracy=0.7)], take=take)
        clock.advance(86_400)
        histories.append(registry.record_calibration("helpdesk/refunds", store.path))
        # Engaging again makes nothing new.
        assert not any(e.created for e in registry.engage("helpdesk/refunds", store.path))
    table = registry.calibration("helpdesk/refunds")
    assert table == histories[-1]
    assert table.projects() == [str((tmp_path / f"project-{n}.sqlite").resolve()) for n in (1, 2)]
    alice = table.history("alice")
    assert [r.project for r in alice] == ["project-1.sqlite", "project-2.sqlite"]
    assert alice[0].at < alice[1].at and all(r.reviews > 0 for r in alice)
    # The figures are the quality report's, and the pooled row sums the counts.
    for pooled in table.pooled:
        rows = [r for r in table.rows if r.snapshot == pooled.snapshot]
        assert pooled.reviews == sum(r.reviews for r in rows) and pooled.gold == sum(r.gold for r in rows)
        if pooled.gold:
            assert pooled.gold_accuracy == sum(r.gold_correct for r in rows) / pooled.gold
    store2 = ReviewStore(tmp_path / "project-2.sqlite", create=False)
    q = {x.name: x for x in quality_report(store2)}["alice"]
    last = alice[-1]
    assert (last.reviews, last.gold_accuracy, last.median_seconds) == (q.reviews, q.gold_accuracy, q.median_seconds)
    added = [
        json.loads(d)
        for (d,) in sqlite3.connect(store2.path).execute("SELECT detail FROM events WHERE kind='reviewer_added'")
    ]
    assert {d["name"] for d in added} == {"alice", "dora"} and {d["pool"] for d in added} == {"helpdesk/refunds"}


def test_engaging_links_same_credentials_and_refuses_other_ones(tmp_path: Path, registry: PoolRegistry) -> None:
    store = ReviewStore(tmp_path / "review.sqlite")
    store.add_reviewer("alice", "not-alices-password")  # someone else signed up as alice here
    with pytest.raises(MirrorworldError, match="other credentials"):
        registry.engage("helpdesk/refunds", store.path)
    assert [r.name for r in store.reviewers()] == ["alice"]  # dora was not added either: all or nothing
    # An account made with the member's own hash is linked, not duplicated.
    other = ReviewStore(tmp_path / "other.sqlite")
    with sqlite3.connect(registry.path) as conn:
        pw = conn.execute("SELECT pw FROM members WHERE name='alice'").fetchone()[0]
    registry.add_member("helpdesk/tickets", "alice", pw_hash=pw)  # a member may be in several pools
    with pytest.raises(MirrorworldError, match="other credentials"):
        registry.add_member("helpdesk/tickets", "alice", password="guessing-wrong")
    engaged = registry.engage("helpdesk/tickets", other.path)
    assert {e.member for e in engaged} == {"alice", "bob"}
    again = registry.engage("helpdesk/refunds", other.path)
    assert {(e.member, e.created) for e in again} == {("alice", False), ("dora", True)}
    routing = registry.route(other)
    alice = next(r for r in other.reviewers() if r.name == "alice")
    assert routing.reviewer_pools[alice.id] == {"helpdesk/refunds", "helpdesk/tickets"}


def test_routing_sends_items_only_to_their_pools(tmp_path: Path, runs: list[Path], registry: PoolRegistry) -> None:
    store = _review_db(tmp_path / "review.sqlite", runs)
    registry.engage("helpdesk/refunds", store.path)
    registry.engage("helpdesk/tickets", store.path)
    routing = registry.route(store)
    take = partial(take_next_routed, routing=routing)
    people = [SimulatedReviewer(n, seed=4) for n in ("alice", "bob", "dora", "carol")]
    result = simulate(store, people, take=take)
    items = {i.id: i for i in store.items()}
    families = {name: {items[g.item_id].family for g in result.of(name)} for name in ("alice", "bob", "dora", "carol")}
    assert families["alice"] and families["alice"] <= set(REFUNDS) and families["dora"] <= set(REFUNDS)
    assert families["bob"] and families["bob"] <= set(TICKETS)
    assert families["carol"] and not families["carol"] & (set(REFUNDS) | set(TICKETS))  # outside every pool
    assert any(g.gold for g in result.grades)  # gold turns are routed too
    # Every queued item was graded as often as its overlap asks, or by everyone who may take it: nothing stranded.
    graded = Counter(g.item_id for g in result.grades if not g.gold)
    accounts = store.reviewers()
    for i in items.values():
        if i.position is not None:
            takers = sum(routing.eligible(r, i) for r in accounts)
            assert graded[i.id] == min(i.overlap, takers) > 0
    # Items handed back leave no assignment behind.
    with store.read() as conn:
        open_ = conn.execute(
            "SELECT COUNT(*) FROM assignments a LEFT JOIN reviews v ON v.item_id=a.item_id AND"
            " v.reviewer_id=a.reviewer_id WHERE v.id IS NULL"
        ).fetchone()[0]
    assert open_ == 0 and store.check_consistency() == []


def test_eligibility_and_world_names() -> None:
    refunds = Pool(1, "helpdesk/refunds", "Helpdesk", REFUNDS, "expert", "", 0.0)
    routing = Routing((refunds,), {7: frozenset({"helpdesk/refunds"})}, {1: "mirrorworld/Helpdesk-v0", 2: "x/Sales-v0"})

    def item(run: int, family: str) -> Item:
        return Item(1, run, 0, "t", family, "a", "v", True, 1.0, 1.0, None, (), (), None, None, 0, 1)

    assert routing.eligible(7, item(1, "refund_damaged")) and not routing.eligible(7, item(1, "triage"))
    assert not routing.eligible(7, item(2, "refund_damaged"))  # another world
    assert routing.eligible(8, item(1, "triage")) and not routing.eligible(8, item(1, "deny_refund"))
    assert world_matches("helpdesk", "mirrorworld/Helpdesk-v1") and world_matches(
        "Helpdesk-v0", "mirrorworld/Helpdesk-v0"
    )
    assert not world_matches("helpdesk-v1", "mirrorworld/Helpdesk-v0") and not world_matches("sales", "x/Helpdesk-v0")
    assert world_matches("helpdesk_team", "mirrorworld/HelpdeskTeam-v0")


def test_export_json_and_csv(tmp_path: Path, runs: list[Path]) -> None:
    reg = PoolRegistry(tmp_path / "pools.sqlite")
    reg.create_pool("helpdesk/all", world="helpdesk")
    hostile = '=HYPERLINK("http://x")'
    reg.add_member("helpdesk/all", hostile, password="a-password")
    reg.add_member("helpdesk/all", "-2+3", password="a-password")
    store = _review_db(tmp_path / "review.sqlite", runs)
    reg.engage("helpdesk/all", store.path, label="@first")
    simulate(store, [SimulatedReviewer(hostile), SimulatedReviewer("-2+3")], items=6)
    reg.record_calibration("helpdesk/all", store.path)
    table = reg.calibration("helpdesk/all")
    out = reg.export_calibration("helpdesk/all", tmp_path / "cal.json")
    data = json.loads(out.read_text())
    assert data["format"] == "mirrorworld-pool-calibration/1" and data == json.loads(json.dumps(table.to_dict()))
    assert {r["member"] for r in data["rows"]} == {hostile, "-2+3"} and len(data["pooled"]) == 1
    reg.export_calibration("helpdesk/all", tmp_path / "cal.csv", "csv")
    rows = list(csv.DictReader(io.StringIO((tmp_path / "cal.csv").read_text())))
    assert [r["kind"] for r in rows] == ["member", "member", "pooled"]
    assert {r["member"] for r in rows[:2]} == {"'" + hostile, "'-2+3"}  # spreadsheets do not run them
    assert rows[0]["project"] == "'@first" and float(rows[2]["reviews"]) == 12
    with pytest.raises(MirrorworldError, match="json or csv"):
        reg.export_calibration("helpdesk/all", tmp_path / "cal.xml", "xml")
    with pytest.raises(MirrorworldError, match="folder"):
        reg.export_calibration("helpdesk/all", tmp_path / "missing" / "cal.json")


@pytest.mark.parametrize(
    "name",
    ["refunds", "helpdesk/", "/refunds", "helpdesk/refunds/x", "../../etc", "help desk/refunds", "helpdesk/re'funds",
     "helpdesk/\x1b[31mred", "helpdesk/\u202eabc", "a" * 41 + "/b", "helpdesk/re\nfunds", ""],
)  # fmt: skip
def test_hostile_pool_names_are_refused(tmp_path: Path, name: str) -> None:
    reg = PoolRegistry(tmp_path / "pools.sqlite")
    with pytest.raises(MirrorworldError, match="pool name") as err:
        reg.create_pool(name, world="helpdesk")
    assert "\n" not in str(err.value) and "\x1b" not in str(err.value) and "\u202e" not in str(err.value)
    assert reg.pools() == []


@pytest.mark.parametrize("name", ["", "a b", "tab\there", "new\nline", "\u202eevil", "x" * 65, "esc\x1b[2J"])
def test_hostile_member_names_are_refused(registry: PoolRegistry, name: str) -> None:
    with pytest.raises(MirrorworldError, match="member name") as err:
        registry.add_member("helpdesk/refunds", name, password="a-password")
    assert "\n" not in str(err.value) and "\x1b" not in str(err.value)


def test_other_files_are_not_pool_registries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database at all")
    with pytest.raises(MirrorworldError, match="not an SQLite file"):
        PoolRegistry(junk)
    review = ReviewStore(tmp_path / "review.sqlite")
    with pytest.raises(MirrorworldError, match="a review database"):
        PoolRegistry(review.path)
    with pytest.raises(MirrorworldError, match="does not exist"):
        PoolRegistry(tmp_path / "nowhere" / "pools.sqlite")
    monkeypatch.setenv("MIRRORWORLD_POOLS", str(tmp_path / "from-env.sqlite"))
    assert PoolRegistry().path == tmp_path / "from-env.sqlite" and (tmp_path / "from-env.sqlite").exists()


# -- command line --------------------------------------------------------------------


def _cli(args: list[str], capsys: pytest.CaptureFixture[str], stdin: str = "") -> tuple[int, str, str]:
    code = main(args, stdin=io.StringIO(stdin))
    got = capsys.readouterr()
    return code, got.out, got.err


def test_cli_creates_engages_snapshots_shows_and_exports(
    tmp_path: Path, runs: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    pools = ["--pools", str(tmp_path / "pools.sqlite")]
    assert (
        _cli([*pools, "create", "helpdesk/refunds", "--world", "helpdesk", "--family", "refund_damaged"], capsys)[0]
        == 0
    )
    assert _cli([*pools, "add", "helpdesk/refunds", "alice"], capsys, "alice-password\n")[0] == 0
    store = _review_db(tmp_path / "review.sqlite", runs)
    store.add_reviewer("erin", "erin-password")
    code, out, _ = _cli([*pools, "add", "helpdesk/refunds", "erin", "--from-db", str(store.path)], capsys)
    assert code == 0 and "erin is in helpdesk/refunds" in out
    code, out, _ = _cli([*pools, "engage", "helpdesk/refunds", str(store.path)], capsys)
    assert code == 0 and "1 accounts made, 1 linked" in out
    simulate(store, [SimulatedReviewer("alice"), SimulatedReviewer("erin")], items=3)
    assert _cli([*pools, "snapshot", "helpdesk/refunds", str(store.path)], capsys)[0] == 0
    code, out, _ = _cli([*pools, "show", "helpdesk/refunds"], capsys)
    assert code == 0 and "members: alice, erin" in out and "(pool)" in out
    code, out, _ = _cli([*pools, "show"], capsys)
    assert out.startswith("helpdesk/refunds  world helpdesk  families refund_damaged")
    code, out, _ = _cli([*pools, "show", "helpdesk/refunds", "--json"], capsys)
    assert json.loads(out)["members"] == ["alice", "erin"]
    code, out, _ = _cli([*pools, "export", "helpdesk/refunds", str(tmp_path / "c.csv"), "--format", "csv"], capsys)
    assert code == 0 and (tmp_path / "c.csv").read_text().startswith("kind,pool,member")


@pytest.mark.parametrize(
    ("args", "stdin", "says"),
    [
        (["show", "no/such"], "", "there is no pool named 'no/such'"),
        (["create", "bad name/x", "--world", "helpdesk"], "", "pool name"),
        (["create", "a/b", "--world", "helpdesk", "--family", "\x1b]0;pwned\x07"], "", "family"),
        (["add", "a/b", "zed"], "short\n", "at least 8"),
        (["engage", "no/such", "{tmp}/r.sqlite"], "", "there is no pool"),
        (["snapshot", "a/b", "{tmp}/missing.sqlite"], "", "no review database"),
        (["export", "a/b", "{tmp}"], "", "is a folder"),
        (["show", "--bogus"], "", "unrecognized arguments"),
        (["create"], "", "required"),
    ],
)
def test_cli_errors_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], stdin: str, says: str
) -> None:
    PoolRegistry(tmp_path / "pools.sqlite").create_pool("a/b", world="helpdesk")
    argv = ["--pools", str(tmp_path / "pools.sqlite"), *(a.replace("{tmp}", str(tmp_path)) for a in args)]
    try:
        code, out, err = _cli(argv, capsys, stdin)
    except SystemExit as exit_:
        code = int(exit_.code or 0)
        got = capsys.readouterr()
        out, err = got.out, got.err
    assert code in (1, 2) and out == ""
    assert err.count("\n") == 1 and err.startswith("mirrorworld: error: ") and says in err
    assert "\x1b" not in err and "\x07" not in err and "Traceback" not in err


def test_cli_runs_as_a_module_without_a_traceback(tmp_path: Path) -> None:
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"junk")
    out = subprocess.run(
        [sys.executable, "-m", "mirrorworld.review.pools", "--pools", str(junk), "show"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "not a pool registry" in out.stderr


def test_add_accounts_takes_a_precomputed_hash(tmp_path: Path) -> None:
    from mirrorworld.review.pools import add_accounts
    from mirrorworld.review.store import hash_password

    store = ReviewStore(tmp_path / "review.sqlite")
    pw = hash_password("shared-password")
    ids = add_accounts(store, ["sim-1", "sim-2"], pw)
    assert sorted(ids) == ["sim-1", "sim-2"] and add_accounts(store, ["sim-1"], pw) == {"sim-1": ids["sim-1"]}
    assert store.authenticate("sim-2", "shared-password") is not None
    store.add_reviewer("taken", "taken-password")
    with pytest.raises(MirrorworldError, match="already has a reviewer"):
        add_accounts(store, ["sim-3", "taken"], pw)
    assert "sim-3" not in {r.name for r in store.reviewers()}  # one transaction
    with pytest.raises(MirrorworldError, match="hash"):
        add_accounts(store, ["sim-4"], "plaintext")
