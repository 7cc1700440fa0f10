"""The ``view`` command: ``mirrorworld view RUN [RUN ...]`` serves a read-only viewer of run files.

Every file is opened and checked whole before anything is served
(:func:`~mirrorworld.view.runs.load_runs`): a missing, corrupt or foreign file
is the one-line error of a :class:`~mirrorworld.errors.RunFileError`. Then the
app (:mod:`mirrorworld.view.app`) is served on ``--host`` (loopback unless told
otherwise: the viewer has no sign-in, so whoever reaches the address reads the
runs) and ``--port``, and a browser tab is opened on it unless ``--no-open``.
Unless ``--no-audit``, ``audit-run``'s detectors run over each file first, for
the episodes' ``audit:`` flags (:mod:`mirrorworld.view.runs`). The app needs
the ``review`` extra (Starlette, uvicorn, Jinja2); without it the command says
which extra to install.
"""

from __future__ import annotations

import argparse
import threading
import webbrowser
from typing import Any

from mirrorworld.core.registry import Registry
from mirrorworld.errors import MirrorworldError
from mirrorworld.options import registry_of

__all__ = ["DEFAULT_PORT", "cmd_view", "register"]

DEFAULT_PORT = 8600
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
_EXTRA = "the run viewer needs the review extra: pip install -e '.[review]' (or pip install 'mirrorworld[review]')"


def register(sub: Any, registry: Registry) -> dict[str, Any]:
    """Add the ``view`` command to an argparse subparsers object; return its handler."""
    v = sub.add_parser(
        "view",
        help="browse run files in the browser: pass rates, episodes, verdicts (read-only)",
        description="Serve a read-only viewer of run files: each run's figures and pass rate per family, its "
        "episodes filtered by status, flags and family, and each episode as the review app shows it.",
    )
    v.add_argument("runs", nargs="+", metavar="RUN", help="run files (from mirrorworld run)")
    v.add_argument("--host", default="127.0.0.1", help="address to bind (the viewer has no sign-in)")
    v.add_argument("--port", type=int, default=DEFAULT_PORT, help="port to listen on")
    v.add_argument("--no-open", action="store_true", help="do not open a browser tab")
    v.add_argument(
        "--no-audit", action="store_true", help="skip audit-run's detectors (no audit: flags; a faster start)"
    )
    return {"view": cmd_view}


def cmd_view(args: argparse.Namespace) -> int:
    """Check every run file, then serve the viewer until interrupted."""
    try:
        import jinja2  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise MirrorworldError(_EXTRA) from None
    if not 1 <= args.port <= 65535:
        raise MirrorworldError(f"--port must be from 1 to 65535, not {args.port}")
    from mirrorworld.inert import inert
    from mirrorworld.view import app as view_app
    from mirrorworld.view.runs import load_runs

    runs = load_runs(args.runs, registry=registry_of(args), audit=not args.no_audit)
    app = view_app.create_app(runs, registry=registry_of(args))
    shown = f"[{args.host}]" if ":" in args.host else args.host
    url = f"http://{shown}:{args.port}/"
    episodes = sum(len(r.rows) for r in runs)
    print(f"{len(runs)} runs, {episodes} episodes: viewer on {inert(url, 300, lines=False)} (Ctrl+C stops it)")
    if args.host not in _LOOPBACK:
        print("warning: the viewer has no sign-in: anyone who can reach this address can read these runs")
    if not args.no_open:
        opener = threading.Timer(1.0, webbrowser.open, (url,))
        opener.daemon = True
        opener.start()
    view_app.serve(app, args.host, args.port)
    return 0
