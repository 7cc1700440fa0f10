"""The run viewer: a read-only Starlette app over run files (server-rendered pages, no script, no form).

=====================================  =================================================
route                                  page
=====================================  =================================================
``GET /``                              every run: world, agent, model, figures, a bar
                                       per family
``GET /run/{run}``                     a run's families and episodes; filters
                                       ``?status=passed|failed|errored``, ``?flagged=1``,
                                       ``?family=NAME`` combine; ``?page=N``
``GET /run/{run}/episode/{index}``     one episode as the review app shows it (messages,
                                       tool calls and results, the replayed state diff,
                                       the verdict with each check), previous and next
                                       in the filtered list
``GET /static/view.css``               the stylesheet
=====================================  =================================================

``{run}`` is the run's place on the command line (from 0), ``{index}`` the
episode's index in its run file (as ``mirrorworld show RUN INDEX`` takes it).

Read-only. Every route is ``GET`` (and so ``HEAD``); any other method is a
``405`` page and no route reads a body. The app writes nothing: run files are
opened read-only (:meth:`~mirrorworld.run.trajectories.RunFile.open`).

Untrusted input. A run file is hostile until checked: the files are checked
whole before the app is made (:func:`~mirrorworld.view.runs.load_run`), and an
episode page reads its episode through the same checks again. Every text from
a file is HTML-escaped (Jinja's autoescape; SVG labels by
:mod:`mirrorworld.review.svg`), made inert (control and bidi characters shown
as escapes, :func:`mirrorworld.inert.inert`) and bounded: at most
:data:`MAX_TEXT` characters per text, :data:`MAX_STEPS` messages,
:data:`MAX_CALLS` calls per message, :data:`MAX_CHANGES` changed rows,
:data:`MAX_EVIDENCE` evidence lines per gate and :data:`PAGE_ROWS` episodes per
list page; the page says what it left out. A run or episode that does not
exist, a path segment that is no number and a filter that means nothing are
``404`` or ``400`` pages, never a ``500``. Pages carry a
Content-Security-Policy that allows this site's stylesheet and nothing else.
"""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any
from urllib.parse import urlencode

from jinja2 import DictLoader, Environment, StrictUndefined
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from mirrorworld.core.registry import Registry
from mirrorworld.errors import MirrorworldError, RunFileError
from mirrorworld.inert import inert
from mirrorworld.review.episode import EpisodeView, episode_view
from mirrorworld.review.store import CheckRef, check_refs, record_verdict
from mirrorworld.review.svg import bar_chart
from mirrorworld.run.trajectories import RunFile
from mirrorworld.verify.verdict import Gate, Verdict
from mirrorworld.view.runs import STATUSES, EpisodeRow, FilterError, Filters, ViewedRun
from mirrorworld.view.templates import TEMPLATES, VIEW_CSS

__all__ = ["CSP", "MAX_TEXT", "PAGE_ROWS", "create_app", "serve"]

MAX_TEXT = 20_000
"""Characters of one text (a message, a call's arguments or result, a changed value) a page shows."""
MAX_STEPS = 500
"""Messages of one episode a page shows."""
MAX_CALLS = 50
"""Tool calls of one message a page shows."""
MAX_CHANGES = 2_000
"""Changed rows of one episode a page shows."""
MAX_EVIDENCE = 200
"""Evidence lines per gate a page shows."""
MAX_CHECKS = 200
"""Rubric rows (checks and gates) a page shows."""
MAX_CHART_FAMILIES = 40
"""Families a bar chart draws (the table lists them all)."""
PAGE_ROWS = 500
"""Episodes per page of a run's list."""

CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'none'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
_NUMBER = re.compile(r"[0-9]{1,18}")
"""A path segment naming a run or an episode (longer is no such thing: a 404, never an overflow)."""


class _Refused(Exception):
    """A request the app answers with an error page of ``status``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class _Item:
    """What the review app's episode and verdict fragments read of an item, for a run's episode."""

    task_id: str
    agent: str
    error: str | None
    checks: tuple[CheckRef, ...]


def _number(text: str) -> int:
    if not _NUMBER.fullmatch(text):
        raise _Refused(404, "no such page")
    return int(text)


def _cut(text: str, limit: int = MAX_TEXT) -> str:
    return inert(text, limit)


def _bounded_view(view: EpisodeView) -> tuple[EpisodeView, list[str]]:
    """``view`` with every text inert and bounded, and at most so many steps and changes; what it left out."""
    omitted: list[str] = []
    steps = []
    for step in view.steps[:MAX_STEPS]:
        if len(step.calls) > MAX_CALLS:
            omitted.append(f"{len(step.calls) - MAX_CALLS} calls of a message")
        calls = tuple(
            replace(c, name=inert(c.name, 200, lines=False), arguments=_cut(c.arguments), result=_cut(c.result))
            for c in step.calls[:MAX_CALLS]
        )
        text = None if step.text is None else _cut(step.text)
        steps.append(replace(step, role=inert(step.role, 40, lines=False), text=text, calls=calls))
    if len(view.steps) > MAX_STEPS:
        omitted.append(f"{len(view.steps) - MAX_STEPS} messages")
    changes = [
        replace(
            ch,
            table=inert(ch.table, 200, lines=False),
            kind=inert(ch.kind, 40, lines=False),
            fields=tuple((inert(c, 200, lines=False), _cut(b, 2000), _cut(a, 2000)) for c, b, a in ch.fields),
        )
        for ch in view.changes[:MAX_CHANGES]
    ]
    if len(view.changes) > MAX_CHANGES:
        omitted.append(f"{len(view.changes) - MAX_CHANGES} changed rows")
    error = None if view.replay_error is None else inert(view.replay_error, 1000, lines=False)
    return EpisodeView(_cut(view.instruction), steps, changes, error), omitted


def _bounded_verdict(verdict: Verdict | None, omitted: list[str]) -> Verdict | None:
    if verdict is None:
        return None
    gates = {}
    for name, gate in verdict.gates.items():
        if len(gate.evidence) > MAX_EVIDENCE:
            omitted.append(f"{len(gate.evidence) - MAX_EVIDENCE} evidence lines")
        evidence = tuple(_cut(e, 2000) for e in gate.evidence[:MAX_EVIDENCE])
        gates[inert(name, 40, lines=False)] = Gate(gate.passed, evidence, gate.details)
    return replace(verdict, gates=gates)


def _guards(verdict: Verdict | None) -> list[tuple[str, str]]:
    if verdict is None:
        return []
    return [(inert(k, 40, lines=False), inert(v, 40, lines=False)) for k, v in list(verdict.guards.items())[:20]]


class _App:
    def __init__(self, runs: Sequence[ViewedRun], registry: Registry | None) -> None:
        self.runs = list(runs)
        self.registry = registry
        self.env = Environment(loader=DictLoader(TEMPLATES), autoescape=True, undefined=StrictUndefined)

    def render(self, name: str, http_status: int = 200, **ctx: Any) -> HTMLResponse:
        return HTMLResponse(self.env.get_template(name).render(**ctx), status_code=http_status)

    def run(self, text: str) -> tuple[int, ViewedRun]:
        number = _number(text)
        if number >= len(self.runs):
            raise _Refused(404, f"no run {number}: this viewer shows {len(self.runs)} (numbered from 0)")
        return number, self.runs[number]

    @staticmethod
    def chart(run: ViewedRun) -> str:
        fams = run.families()[:MAX_CHART_FAMILIES]
        return bar_chart(
            "Pass rate per family (graded episodes)",
            [f.name[:16] for f in fams],
            [f.pass_rate for f in fams],
        )

    # -- pages -----------------------------------------------------------------------

    def index(self, request: Request) -> Response:
        cards = [{"number": i, "run": r, "chart": self.chart(r)} for i, r in enumerate(self.runs)]
        return self.render("index.html", title="Runs", cards=cards)

    def run_page(self, request: Request) -> Response:
        number, run = self.run(request.path_params["run"])
        filters = Filters.parse(request.query_params)
        page_text = request.query_params.get("page") or "1"
        if not _NUMBER.fullmatch(page_text) or int(page_text) < 1:
            raise _Refused(400, "page is a number from 1")
        page = int(page_text)
        selected = run.select(filters)
        pages = max(1, math.ceil(len(selected) / PAGE_ROWS))
        if page > pages:
            raise _Refused(404, f"no page {page}: these filters give {pages}")
        base = f"/run/{number}"

        def href(f: Filters, **extra: str) -> str:
            params = {**f.params(), **extra}
            return base + ("?" + urlencode(params) if params else "")

        status_links = [("all", href(replace(filters, status=None)), filters.status is None)] + [
            (s, href(replace(filters, status=s)), filters.status == s) for s in STATUSES
        ]
        families = [(f, href(replace(filters, family=f.key))) for f in run.families()]
        family_shown = None
        if filters.family is not None:
            family_shown = inert(filters.family, 200, lines=False)
        query = "?" + urlencode(filters.params()) if filters.active else ""
        return self.render(
            "run.html",
            title=run.name,
            number=number,
            run=run,
            chart=self.chart(run),
            families=families,
            status_links=status_links,
            flagged_link=(href(replace(filters, flagged=not filters.flagged)), filters.flagged),
            family_shown=family_shown,
            all_families=href(replace(filters, family=None)),
            selected=len(selected),
            rows=selected[(page - 1) * PAGE_ROWS : page * PAGE_ROWS],
            page=page,
            pages=pages,
            prev_page=href(filters, page=str(page - 1)) if page > 1 else None,
            next_page=href(filters, page=str(page + 1)) if page < pages else None,
            query=query,
        )

    def episode_page(self, request: Request) -> Response:
        number, run = self.run(request.path_params["run"])
        index = _number(request.path_params["index"])
        row = run.row(index)
        if row is None:
            raise _Refused(404, f"{run.name} has no episode {index}")
        filters = Filters.parse(request.query_params)
        query = "?" + urlencode(filters.params()) if filters.active else ""
        around: list[EpisodeRow] = run.select(filters)
        if row not in around:
            around, query = run.rows, ""
        at = around.index(row)
        base = f"/run/{number}/episode/"
        try:
            with RunFile.open(run.path) as file:
                record = asdict(file.episode(index))
        except RunFileError as err:
            raise _Refused(409, f"the run file changed or broke since the viewer started: {err}") from None
        try:
            view, omitted = _bounded_view(episode_view(record, self.registry))
            verdict = record_verdict(record)
            checks = check_refs(record)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError):
            raise _Refused(409, f"episode {index} of {run.name} holds something the viewer cannot show") from None
        if len(checks) > MAX_CHECKS:
            omitted.append(f"{len(checks) - MAX_CHECKS} checks")
        checks = tuple(replace(c, label=inert(c.label, 200, lines=False)) for c in checks[:MAX_CHECKS])
        item = _Item(
            row.task_id,
            inert(record.get("agent", ""), 200, lines=False),
            None if record.get("error") is None else inert(record["error"], 1000, lines=False),
            checks,
        )
        return self.render(
            "episode.html",
            title=f"Episode {index} · {run.name}",
            number=number,
            run=run,
            row=row,
            seconds=float(record.get("seconds") or 0.0),
            view=view,
            item=item,
            show_agent=True,
            verdict=_bounded_verdict(verdict, omitted),
            guards=_guards(verdict),
            omitted=omitted,
            prev=base + str(around[at - 1].index) + query if at > 0 else None,
            next=base + str(around[at + 1].index) + query if at + 1 < len(around) else None,
            back=f"/run/{number}{query}",
            filtered=bool(query),
        )

    def error_page(self, status: int, message: str) -> HTMLResponse:
        return self.render("error.html", status, title=str(status), status=status, message=message)


def create_app(runs: Sequence[ViewedRun], *, registry: Registry | None = None) -> Starlette:
    """The viewer over ``runs`` (from :func:`~mirrorworld.view.runs.load_runs`); ``registry`` replays episodes."""
    app = _App(runs, registry)

    def page(fn: Callable[[Request], Response]) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            from starlette.concurrency import run_in_threadpool

            try:
                resp = await run_in_threadpool(fn, request)
            except _Refused as err:
                resp = app.error_page(err.status, err.message)
            except FilterError as err:
                resp = app.error_page(400, str(err))
            except MirrorworldError as err:
                resp = app.error_page(409, inert(str(err), 1000, lines=False))
            resp.headers.update(_HEADERS)
            return resp

        return endpoint

    async def stylesheet(request: Request) -> Response:
        return Response(VIEW_CSS, media_type="text/css", headers={**_HEADERS, "Cache-Control": "max-age=300"})

    async def refused(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        message = {404: "no such page", 405: "this viewer only reads: GET and HEAD"}.get(status, "the request failed")
        resp = app.error_page(status, message)
        resp.headers.update(_HEADERS)
        if status == 405:
            resp.headers["Allow"] = "GET, HEAD"
        return resp

    routes = [
        Route("/", page(app.index), methods=["GET"]),
        Route("/run/{run}", page(app.run_page), methods=["GET"]),
        Route("/run/{run}/episode/{index}", page(app.episode_page), methods=["GET"]),
        Route("/static/view.css", stylesheet, methods=["GET"]),
    ]
    return Starlette(routes=routes, exception_handlers={404: refused, 405: refused})


def serve(app: Starlette, host: str = "127.0.0.1", port: int = 8600) -> None:
    """Run the viewer with uvicorn until interrupted, as the review app is served
    (:func:`mirrorworld.review.app.serve`: a ``Host`` check against DNS rebinding, bounded request heads)."""
    from mirrorworld.review.app import serve as serve_review

    serve_review(app, host, port)
