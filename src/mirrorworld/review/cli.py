"""The ``review`` command: ``serve``, ``add-user``, ``token``, ``stats``, ``export-disagreements``,
``check-regressions``.

``mirrorworld review serve RUN... [--db review.sqlite]`` imports the run files'
episodes (again: only new ones), fills the queue by stratified sampling and
serves the app; on a database without an admin it creates ``admin`` with a
random password, shown once on the terminal when both standard input and
output are one, and otherwise written to ``DB.admin-password`` (mode 0600,
readable by its owner only), so it never lands in a log that captured the
output. ``token create --name REVIEWER`` makes a token of the review API
(:mod:`mirrorworld.review.api`) for that reviewer (``--create`` makes the
account too, for a pipeline or a simulated reviewer; ``--role`` may lower the
token below the reviewer's role), printed once, or written to ``--out`` (mode
0600) so it stays out of logs; ``token list`` shows the live tokens (never
their secrets) and ``token revoke ID`` ends one. ``stats`` prints the agreement report and
the drift alarms (``--json`` for all of it). ``export-disagreements`` writes
adjudicated disagreements as verifier regression cases;
``check-regressions`` replays case files with the current verifier and fails
when a case marked fixed disagrees again.

Everything printed that came from a run file, a case file or a reviewer —
task, family and check names, case ids, paths — goes through :func:`inert`
and a console with markup off, so it cannot move the cursor, retitle the
terminal or style the report.

``serve`` and ``stats`` need the ``review`` extra (the app's Starlette,
uvicorn, Jinja2 and itsdangerous; the statistics' scikit-learn, SciPy and
krippendorff); without it they stop first, with one line naming the extra.
``export-disagreements`` checks its ``--out`` before it reads the database
(:func:`mirrorworld.outputs.check_output_path`); a missing folder for it
(such as the default ``tests/regressions``) is made.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import secrets
import sys
from pathlib import Path
from typing import Any

from mirrorworld.errors import MirrorworldError
from mirrorworld.options import registry_of
from mirrorworld.outputs import check_output_path

__all__ = ["inert", "register"]

DEFAULT_CASES = "tests/regressions/verifier_cases.jsonl"

_STATS_MODULES = ("sklearn", "scipy", "krippendorff")
_NEEDS = {
    "serve": ("starlette", "uvicorn", "jinja2", "itsdangerous", "pydantic", "httpx", *_STATS_MODULES),
    "stats": _STATS_MODULES,
}
"""The modules of the ``review`` extra each subcommand imports (the app computes the statistics too)."""


def _need_extra(command: str) -> None:
    """Raise a one-line :class:`~mirrorworld.errors.MirrorworldError` naming the extra if ``review COMMAND`` lacks it.

    Only looked up (``find_spec``), not imported: the check costs nothing
    where the extra is installed.
    """
    for module in _NEEDS.get(command, ()):
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise MirrorworldError(
                f"review {command} needs the review extra: pip install -e '.[review]' "
                "(or pip install 'mirrorworld[review]')"
            )


def inert(value: Any, limit: int = 500) -> str:
    """``value`` as one line of text safe for a terminal (:func:`mirrorworld.inert.inert` with ``lines=False``).

    Rich markup is not escaped here: print through a console made with
    ``markup=False`` (see :func:`_console`) or with plain ``print``.
    """
    from mirrorworld.inert import inert as _inert

    return _inert(value, limit, lines=False)


def _console() -> Any:
    """A rich console that interprets no markup, emoji codes or highlighting in what it prints."""
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True, markup=False, emoji=False)


def register(sub: Any) -> dict[str, Any]:
    """Add the ``review`` command to an argparse subparsers object; return its handler."""
    review = sub.add_parser("review", help="human review of trajectories: the web app, agreement, drift")
    rsub = review.add_subparsers(dest="review_command", required=True, parser_class=type(review))

    s = rsub.add_parser("serve", help="import runs, fill the queue and serve the review app")
    s.add_argument("runs", nargs="*", metavar="RUN", help="run files to review")
    s.add_argument("--db", default="review.sqlite", help="review database (created when missing)")
    s.add_argument(
        "--gold",
        action="append",
        default=[],
        metavar="RUN",
        help="a run whose verdicts are known answers (oracle or null agents): honeypot items",
    )
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8765)
    s.add_argument("--sample", type=int, default=None, help="items in the queue in all (default: every episode)")
    s.add_argument("--overlap", type=int, default=2, help="reviewers per overlapped item")
    s.add_argument("--overlap-share", type=float, default=0.25, help="share of items graded by --overlap reviewers")
    s.add_argument("--gold-rate", type=float, default=0.1, help="share of requests answered with a gold item")
    s.add_argument("--seed", type=int, default=0, help="sampling seed")
    s.add_argument("--min-gold-accuracy", type=float, default=0.7, help="pause reviewers below this on gold items")
    s.add_argument("--min-peer-agreement", type=float, default=0.6, help="pause reviewers below this with peers")
    s.add_argument("--no-audit", action="store_true", help="skip audit-run flags (no over-sampling of flagged runs)")
    s.add_argument("--secure-cookies", action="store_true", help="mark cookies Secure (behind HTTPS)")
    s.add_argument(
        "--allowed-host",
        action="append",
        default=None,
        metavar="NAME",
        help="a host name reviewers reach the app by, beside loopback and the bound address (repeat; * for any)",
    )
    s.add_argument(
        "--allow-incomparable",
        action="store_true",
        help="pool runs of world builds whose score parts differ (warned, not refused)",
    )

    u = rsub.add_parser("add-user", help="add a reviewer (password read from standard input)")
    u.add_argument("name")
    u.add_argument("--db", default="review.sqlite")
    u.add_argument("--role", choices=("reviewer", "adjudicator", "admin"), default="reviewer")

    k = rsub.add_parser("token", help="tokens of the review API: create, list, revoke")
    ksub = k.add_subparsers(dest="token_command", required=True, parser_class=type(review))
    kc = ksub.add_parser("create", help="a new API token for a reviewer (shown once)")
    kc.add_argument("--db", default="review.sqlite")
    kc.add_argument("--name", required=True, metavar="REVIEWER", help="the reviewer the token acts as")
    kc.add_argument(
        "--role",
        choices=("reviewer", "adjudicator", "admin"),
        default=None,
        help="the token's role (default: the reviewer's; never above it)",
    )
    kc.add_argument("--create", action="store_true", help="make the reviewer (with --role) when there is none")
    kc.add_argument("--label", default="", help="what the token is for")
    kc.add_argument("--days", type=float, default=None, help="the token expires after this many days")
    kc.add_argument("--out", default=None, metavar="FILE", help="write the token to FILE (0600) instead of printing")
    kl = ksub.add_parser("list", help="the live API tokens")
    kl.add_argument("--db", default="review.sqlite")
    kl.add_argument("--json", action="store_true")
    kr = ksub.add_parser("revoke", help="revoke an API token")
    kr.add_argument("id", type=int, metavar="ID")
    kr.add_argument("--db", default="review.sqlite")

    t = rsub.add_parser("stats", help="agreement between humans and the verifier, and drift alarms")
    t.add_argument("--db", default="review.sqlite")
    t.add_argument("--json", action="store_true")
    t.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples")
    t.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    t.add_argument(
        "--allow-incomparable",
        action="store_true",
        help="pool runs of world builds whose score parts differ (warned, not refused)",
    )

    e = rsub.add_parser("export-disagreements", help="adjudicated disagreements → verifier regression cases")
    e.add_argument("--db", default="review.sqlite")
    e.add_argument("--out", default=DEFAULT_CASES, help=f"case file to write or update (default {DEFAULT_CASES})")
    e.add_argument("--json", action="store_true")

    c = rsub.add_parser("check-regressions", help="replay regression cases with the current verifier")
    c.add_argument("paths", nargs="*", default=[str(Path(DEFAULT_CASES).parent)], metavar="PATH")
    c.add_argument("--json", action="store_true")

    f = rsub.add_parser(
        "fit",
        help="fit a verifier version to the human labels and compare it with the hand-written one",
        description="Fits what the verifier declares and can be fitted (numeric tolerances by field group, the "
        "words a text rule asks for, forbidden promises on or off) to the review database's human labels, on a "
        "training split, and reports raw agreement and Cohen's kappa of the hand-written and the fitted verifier "
        "on held-out labels. With --accept DIR the fitted version is written there (after the regression cases "
        "pass), for `mirrorworld.review.fitting.load_override` and drift monitoring to follow.",
    )
    f.add_argument("--db", default="review.sqlite", help="review database")
    f.add_argument("--world", default="helpdesk", help="the world the labelled episodes are of")
    f.add_argument(
        "--numeric",
        action="append",
        default=[],
        metavar="TABLE.COL[,TABLE.COL]",
        help="a group of fields sharing one tolerance (repeat for more groups)",
    )
    f.add_argument("--words", action="append", default=[], metavar="TABLE.COL", help="a text rule's column")
    f.add_argument("--promise", action="append", default=[], metavar="NAME", help="a forbidden promise to try off")
    f.add_argument("--seed", type=int, default=0, help="the seed of the train/held-out split")
    f.add_argument("--accept", metavar="DIR", help="write the fitted version into DIR")
    f.add_argument("--by", default="", help="who accepts it (with --accept)")
    f.add_argument("--regressions", action="append", default=[], metavar="PATH", help="cases it must keep passing")
    f.add_argument("--json", action="store_true")

    from mirrorworld.review.pools import add_arguments as pools_arguments

    pools_arguments(
        rsub.add_parser(
            "pools",
            help="persistent reviewer pools: create, add, engage, snapshot, show, export (docs/review-pools.md)",
            description="Reviewer pools that outlive review databases: members, engagements, calibration history.",
        )
    )
    return {"review": cmd_review}


def _store(path: str, *, create: bool = False) -> Any:
    from mirrorworld.review.store import ReviewStore

    return ReviewStore(path, create=create)


def cmd_review(args: argparse.Namespace) -> int:
    handler = {
        "serve": cmd_serve,
        "add-user": cmd_add_user,
        "token": cmd_token,
        "stats": cmd_stats,
        "export-disagreements": cmd_export,
        "check-regressions": cmd_check,
        "pools": cmd_pools,
        "fit": cmd_fit,
    }[args.review_command]
    return handler(args)


def cmd_fit(args: argparse.Namespace) -> int:
    """``mirrorworld review fit``: :func:`mirrorworld.review.fitting.fit` on a review database's labels."""
    _need_extra("stats")
    from mirrorworld.review.fitting import FitSpace, accept_fit, fit, labels_from_store

    if args.accept and not args.by:
        raise MirrorworldError("--accept needs --by NAME: who accepts the version")
    if not args.numeric and not args.words and not args.promise:
        raise MirrorworldError("name what to fit: --numeric, --words or --promise")
    if not Path(args.db).is_file():
        raise MirrorworldError(f"no review database at {args.db}")
    registry = registry_of(args)
    world = registry.get(registry.spec(args.world).name)
    groups = tuple(tuple(x.strip() for x in g.split(",") if x.strip()) for g in args.numeric)
    space = FitSpace(numeric=groups, words=tuple(args.words), promises=tuple(args.promise))
    space.check(world)
    labels = labels_from_store(_store(args.db))
    if len(labels) < 10:
        raise MirrorworldError(f"{len(labels)} labelled items: fitting needs at least 10 (grade more first)")
    fitted = fit(world, labels, space, seed=args.seed)
    written = None
    if args.accept:
        written = accept_fit(fitted, args.accept, by=args.by, regressions=args.regressions, registry=registry)
    if args.json:
        print(json.dumps({**fitted.to_dict(), "accepted": str(written) if written else None}, indent=2))
        return 0
    print(f"{len(labels)} labels: {fitted.n_train} to fit, {fitted.n_test} held out ({fitted.skipped} skipped)")
    for line in fitted.describe():
        print(inert(line, 300))
    if written:
        print(f"accepted version {fitted.version}: {inert(str(written))}")
    return 0


def cmd_pools(args: argparse.Namespace) -> int:
    """``mirrorworld review pools ...`` (:mod:`mirrorworld.review.pools`)."""
    from mirrorworld.review.pools import run

    return run(args)


def cmd_serve(args: argparse.Namespace) -> int:
    _need_extra("serve")
    from mirrorworld.review.app import create_app, serve
    from mirrorworld.review.quality import QualityPolicy
    from mirrorworld.review.queue import SamplingPlan, build_queue

    plan = SamplingPlan(
        size=args.sample,
        overlap=args.overlap,
        overlap_share=args.overlap_share,
        gold_rate=args.gold_rate,
        seed=args.seed,
    )
    plan.validate()
    for p in [*args.runs, *args.gold]:
        if not Path(p).is_file():
            raise MirrorworldError(f"no run file at {p}")
    store = _store(args.db, create=True)
    store.set_meta(
        "quality",
        QualityPolicy(min_gold_accuracy=args.min_gold_accuracy, min_peer_agreement=args.min_peer_agreement).to_dict(),
    )
    for p in args.runs:
        _, new = store.add_run(p, audit=not args.no_audit, registry=registry_of(args))
        print(f"{inert(p)}: {new} new episodes")
    for p in args.gold:
        _, new = store.add_run(p, gold=True, audit=False)
        print(f"{inert(p)}: {new} new gold episodes")
    queued = build_queue(store, plan)
    print(f"queued {queued} more items")
    if not store.has_admin():
        password = secrets.token_urlsafe(12)
        if _is_terminal(sys.stdin) and _is_terminal(sys.stdout):
            store.add_reviewer("admin", password, "admin")
            print(f"created the admin account: name admin, password {password} (shown once)")
        else:
            where = Path(f"{args.db}.admin-password")
            _write_private(where, password + "\n")
            store.add_reviewer("admin", password, "admin")
            print(f"created the admin account: name admin, its password is in {inert(where)} (readable by you only)")
    print(f"review app on http://{inert(args.host)}:{args.port}/ (Ctrl+C stops it)", flush=True)
    from mirrorworld.review.stats import StatsOptions

    app = create_app(
        store,
        registry=registry_of(args),
        secure_cookies=args.secure_cookies,
        stats_options=StatsOptions(allow_incomparable=args.allow_incomparable),
    )
    serve(app, args.host, args.port, tuple(args.allowed_host or ()))
    return 0


def _is_terminal(stream: Any) -> bool:
    """Whether ``stream`` is an open terminal (a missing or closed stream is not)."""
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError):
        return False


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only (0600), atomically.

    The text goes to a new file created exclusively with mode 0600 beside
    ``path`` (so no existing file or symlink is written through, whatever the
    umask), then replaces ``path``.
    """
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as err:
        raise MirrorworldError(f"cannot write {inert(path)}: {err.strerror or err}") from None


def cmd_add_user(args: argparse.Namespace) -> int:
    if sys.stdin.isatty():
        import getpass

        password = getpass.getpass(f"password for {args.name}: ")
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    store = _store(args.db, create=True)
    rid = store.add_reviewer(args.name, password, args.role)
    print(f"added {args.role} {inert(args.name)} (id {rid})")
    return 0


def cmd_token(args: argparse.Namespace) -> int:
    """``review token create|list|revoke`` (see the module docstring)."""
    if args.token_command == "create":
        if args.out is not None:
            check_output_path(args.out)
        store = _store(args.db, create=args.create)
        expires = None if args.days is None else args.days * 86400
        token, secret = store.create_token(
            args.name, role=args.role, label=args.label, expires_in=expires, create=args.create
        )
        what = f"token {token.id} for {inert(token.reviewer)} ({token.role})"
        if args.out is not None:
            _write_private(Path(args.out), secret + "\n")
            print(f"created {what}; it is in {inert(args.out)} (readable by you only)")
        else:
            print(f"created {what}: {secret} (shown once)")
        return 0
    store = _store(args.db)
    if args.token_command == "revoke":
        if not store.revoke_token(args.id):
            raise MirrorworldError(f"no live API token {args.id}")
        print(f"revoked token {args.id}")
        return 0
    tokens = store.tokens()
    if args.json:
        print(json.dumps([t.to_dict() for t in tokens], indent=2))
        return 0
    for t in tokens:
        label = f" {inert(t.label, 80)}" if t.label else ""
        print(f"{t.id}  {inert(t.reviewer, 64)}  {t.role}{label}")
    if not tokens:
        print("no live API tokens")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    _need_extra("stats")
    from mirrorworld.review.drift import compute_drift
    from mirrorworld.review.stats import StatsOptions, compute_stats

    if args.resamples < 10:
        raise MirrorworldError("--resamples must be at least 10")
    store = _store(args.db)
    options = StatsOptions(resamples=args.resamples, seed=args.seed, allow_incomparable=args.allow_incomparable)
    report = compute_stats(store, options)
    if report["incomparable"]:
        print(
            "mirrorworld: WARNING: the runs come from world builds that differ in "
            + ", ".join(inert(p) for p in report["incomparable"]),
            file=sys.stderr,
        )
    report["drift"] = compute_drift(store)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    _print_stats(report)
    return 0


def _fmt(e: dict[str, Any]) -> str:
    if e["value"] is None:
        return "n/a"
    lo, hi = e["ci"]
    return f"{e['value']:.3f}" + (f" [{lo:.3f}, {hi:.3f}]" if lo is not None else "")


def _print_stats(r: dict[str, Any]) -> None:
    """The report as tables; names from run files are printed through :func:`inert`."""
    from rich.table import Table
    from rich.text import Text

    con = _console()
    con.print(
        f"{r['reviews']} grades of {r['items_reviewed']} items by {r['reviewers']} reviewers; "
        f"{r['adjudicated']} adjudicated, {r['unresolved']} unresolved ties"
    )
    t = Table(title="verifier vs human verdict")
    for col in ("", "items", "agreement", "Cohen's kappa", "Krippendorff's alpha", "Gwet's AC1"):
        t.add_column(col)

    def row(name: str, v: dict[str, Any]) -> None:
        cells = (
            inert(name, 120),
            str(v["n"]),
            _fmt(v["agreement"]),
            _fmt(v["kappa"]),
            _fmt(v["alpha"]),
            _fmt(v["ac1"]),
        )
        t.add_row(*(Text(c) for c in cells))

    row("all", r["verifier_vs_human"])
    for name, g in r["by_family"].items():
        row(name, g["verifier_vs_human"])
    for name, g in r["by_check"].items():
        row(name, g["verifier_vs_human"])
    con.print(t)
    h = r["human_vs_human"]
    con.print(
        f"human vs human on {h['n']} items: agreement {_fmt(h['agreement'])}, Cohen's kappa (pairs) "
        f"{_fmt(h['kappa_cohen'])}, Fleiss' kappa {_fmt(h['kappa_fleiss'])}, alpha {_fmt(h['alpha'])}, "
        f"AC1 {_fmt(h['ac1'])}"
    )
    c = r["verifier_vs_human"]["confusion"]
    con.print(
        f"confusion: verifier pass/human pass {c['verifier_pass_human_pass']}, pass/fail "
        f"{c['verifier_pass_human_fail']}, fail/pass {c['verifier_fail_human_pass']}, fail/fail "
        f"{c['verifier_fail_human_fail']}"
    )
    for d in r["disagreements"]:
        human = "tie" if d["human"] is None else ("pass" if d["human"] else "fail")
        kinds = ", ".join(inert(k) for k in d["kinds"])
        con.print(
            f"  item {inert(d['item'])} {inert(d['task'])}: verifier {'pass' if d['verifier'] else 'fail'}, "
            f"human {human} ({kinds}){'' if d['adjudicated'] is None else ' adjudicated'}"
        )
    for a in r["drift"]["alarms"]:
        con.print(Text.assemble(("drift alarm", "red"), f" {inert(a['alarm'])}: {inert(json.dumps(a), 2000)}"))


def cmd_export(args: argparse.Namespace) -> int:
    from mirrorworld.review.regressions import export_disagreements

    check_output_path(args.out, new_folders=True)  # the case file's folder is made when missing
    store = _store(args.db)
    cases, new = export_disagreements(store, args.out)
    if args.json:
        print(json.dumps({"out": args.out, "cases": len(cases), "new": new, "ids": [c.id for c in cases]}, indent=2))
    else:
        print(f"{new} new regression cases; {len(cases)} in {inert(args.out)}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from mirrorworld.review.regressions import check_cases

    missing = [p for p in args.paths if not Path(p).exists()]
    if missing:
        raise MirrorworldError(f"no regression cases at {inert(missing[0])}")
    summary = check_cases(args.paths, registry_of(args))
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(
            f"{summary['cases']} cases: {summary['agree']} agree with the human verdict, "
            f"{len(summary['open'])} open, {len(summary['now_agree'])} open but now agreeing (mark them fixed), "
            f"{len(summary['regressed'])} regressed"
        )
        for cid in summary["regressed"]:
            print(f"  regressed: {inert(cid)}")
    return 1 if summary["regressed"] else 0
