"""The review web app (Starlette, server-rendered pages).

Pages and what each role sees:

=================================  ===========  =============  =========
route                              reviewer     adjudicator    admin
=================================  ===========  =============  =========
``GET /login``, ``POST /login``    yes          yes            yes
``GET /queue``, ``POST /take``     own queue    own queue      own queue
``GET /item/{id}``                 items they   every item     every item
                                   took
``POST /item/{id}/review``         own items    own items      own items
``POST /item/{id}/adjudicate``     no           yes            yes
``GET /stats``, ``/stats.json``,   no           yes            yes
``GET /drift``
``POST /item/{id}/gold``,          no           no             yes
``GET/POST /reviewers``, pause
=================================  ===========  =============  =========

An item a reviewer has taken but not graded is shown *blind*: the task, the
conversation and tool calls, and the replayed state diff, but neither the
verifier's verdict nor other reviewers' grades nor whether it is a gold item.
After they grade it they see the verdict (and the known answer of a gold
item). An item a reviewer never took is a 404 to them, not a 403, so item
ids reveal nothing. Adjudicators and admins see every item in full except one
they are grading blind themselves.

Security. Sign-in attempts are throttled per name and client address, per
address across names, and per name across addresses, with a browser that
signed in as a name before counted apart so that nobody can lock its owner
out (the limits and why: :class:`~mirrorworld.review.store.SignInLimits`);
the limit is checked and the attempt counted in one transaction before the
password hash is, so concurrent guesses cannot slip past it
(:meth:`~mirrorworld.review.store.ReviewStore.sign_in`). The client is the
connection's address: the app trusts no forwarding header, so behind a
proxy every stranger shares one address and the per-address limits, while
known browsers keep their own. A sign-in creates a server-side session; its
token travels in an ``HttpOnly``, ``SameSite=Strict`` cookie signed with the
database's secret (``itsdangerous``), so a forged or altered cookie is
rejected before any lookup, and signing out ends the session for good; the
database keeps only the token's SHA-256. Every form carries the session's
CSRF token (the sign-in form a nonce bound to a signed pre-session cookie,
good for one post: each answer to a post carries a fresh form) and a POST
without the right one is refused, as is one whose ``Origin`` is another site.
Pages are sent with a Content-Security-Policy that allows only this site's
own script and stylesheet.

The JSON API for pipelines and simulated reviewers (bearer tokens, no
cookies) is served under ``/api/v1`` beside the pages: :mod:`mirrorworld.review.api`.

Forms are ``application/x-www-form-urlencoded`` only, at most 64 KiB, strict
UTF-8, no repeated or unknown fields: anything else is a 4xx and changes
nothing. Every write is one transaction in the store (see
:mod:`mirrorworld.review.store`).
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl

from itsdangerous import BadSignature, URLSafeTimedSerializer
from jinja2 import DictLoader, Environment, StrictUndefined
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from mirrorworld.core.registry import Registry
from mirrorworld.errors import MirrorworldError
from mirrorworld.review.api import ApiConfig, api_routes, submit_grade
from mirrorworld.review.drift import DriftPolicy, compute_drift
from mirrorworld.review.episode import episode_view
from mirrorworld.review.quality import quality_report
from mirrorworld.review.queue import take_next
from mirrorworld.review.stats import StatsOptions, compute_stats
from mirrorworld.review.store import (
    MAX_REASON,
    NONCE_SECONDS,
    ROLES,
    Reviewer,
    ReviewInput,
    ReviewStore,
    SignInLimits,
    record_verdict,
)
from mirrorworld.review.svg import bar_chart, line_chart
from mirrorworld.review.templates import APP_CSS, APP_JS, TEMPLATES
from mirrorworld.ship.compare import IncomparableError

__all__ = ["HTTPError", "create_app"]

SESSION_COOKIE = "mw_review"
LOGIN_COOKIE = "mw_review_login"
DEVICE_COOKIE = "mw_review_device"
DEVICE_SECONDS = 90 * 24 * 3600
"""How long a browser that signed in as a name keeps its own sign-in allowance for it."""
MAX_BODY = 64 * 1024
MAX_FIELDS = 64

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)


class HTTPError(Exception):
    """A request the app refuses: rendered as an error page with ``status``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Auth:
    reviewer: Reviewer
    csrf: str
    token: str


Form = dict[str, str]


class _App:
    def __init__(
        self,
        store: ReviewStore,
        *,
        registry: Registry | None,
        stats_options: StatsOptions,
        drift_policy: DriftPolicy,
        secure_cookies: bool,
        sign_in_limits: SignInLimits,
    ) -> None:
        self.store = store
        self.limits = sign_in_limits
        self.registry = registry
        self.stats_options = stats_options
        self.drift_policy = drift_policy
        self.secure = secure_cookies
        self.sessions = URLSafeTimedSerializer(store.secret, salt="mirrorworld-review/session")
        self.logins = URLSafeTimedSerializer(store.secret, salt="mirrorworld-review/login")
        self.devices = URLSafeTimedSerializer(store.secret, salt="mirrorworld-review/device")
        self.env = Environment(loader=DictLoader(TEMPLATES), autoescape=True, undefined=StrictUndefined)
        self._stats_cache: tuple[tuple[int, ...], dict[str, Any]] | None = None

    # -- plumbing ------------------------------------------------------------------

    def render(self, name: str, http_status: int = 200, **ctx: Any) -> HTMLResponse:
        ctx.setdefault("user", None)
        ctx.setdefault("csrf", "")
        ctx.setdefault("flash", None)
        ctx.setdefault("title", name.removesuffix(".html"))
        return HTMLResponse(self.env.get_template(name).render(**ctx), status_code=http_status)

    def auth(self, request: Request) -> Auth | None:
        cookie = request.cookies.get(SESSION_COOKIE)
        if not cookie:
            return None
        try:
            token = self.sessions.loads(cookie, max_age=12 * 3600)
        except BadSignature:
            return None
        if not isinstance(token, str):
            return None
        found = self.store.session(token)
        if found is None:
            return None
        return Auth(found[0], found[1], token)

    def need(self, request: Request, role: str = "reviewer") -> Auth:
        auth = self.auth(request)
        if auth is None:
            raise HTTPError(401, "sign in first")
        if not auth.reviewer.can(role):  # type: ignore[arg-type]
            raise HTTPError(403, f"this page is for the {role} role and above")
        return auth

    @staticmethod
    def check_csrf(form: Form, expected: str) -> None:
        got = form.get("csrf", "")
        if not expected or not hmac.compare_digest(got.encode(), expected.encode()):
            raise HTTPError(403, "the form's security token is missing or wrong; reload the page and try again")

    # -- sign-in -------------------------------------------------------------------

    def login_page(self, request: Request, form: Form | None) -> Response:
        if form is None:
            if self.auth(request) is not None:
                return RedirectResponse("/queue", status_code=303)
            return self._login_form(None, 200)
        nonce_cookie = request.cookies.get(LOGIN_COOKIE, "")
        try:
            nonce = self.logins.loads(nonce_cookie, max_age=NONCE_SECONDS)
        except BadSignature:
            nonce = None
        if not isinstance(nonce, str):
            return self._login_form("Your sign-in form expired; try again.", 403)
        self.check_csrf(form, nonce)
        _only(form, {"csrf", "name", "password"})
        name = form.get("name", "")
        device = self._device(request, name)
        client = request.client.host if request.client is not None else "unknown"
        result = self.store.sign_in(
            name, form.get("password", ""), client=client, nonce=nonce, device=device, limits=self.limits
        )
        if result.outcome == "replayed":
            if self.auth(request) is not None:  # a form sent twice whose first post signed the browser in
                return RedirectResponse("/queue", status_code=303)
            return self._login_form("This sign-in form was sent already; try again.", 403)
        if result.outcome == "locked":
            minutes = max(1, round(self.limits.window / 60))
            return self._login_form(f"Too many failed sign-ins; wait {minutes} minutes.", 429)
        if result.outcome != "ok" or result.reviewer is None:
            return self._login_form("Wrong name or password.", 401)
        resp = RedirectResponse("/queue", status_code=303)
        resp.set_cookie(
            SESSION_COOKIE,
            self.sessions.dumps(result.token),
            httponly=True,
            samesite="strict",
            secure=self.secure,
            max_age=12 * 3600,
        )
        resp.set_cookie(
            DEVICE_COOKIE,
            self.devices.dumps({"name": name, "device": device or secrets.token_urlsafe(16)}),
            httponly=True,
            samesite="strict",
            secure=self.secure,
            max_age=DEVICE_SECONDS,
        )
        resp.delete_cookie(LOGIN_COOKIE)
        return resp

    def _device(self, request: Request, name: str) -> str | None:
        """The device id of this browser's signed device cookie when it was issued for ``name``."""
        try:
            found = self.devices.loads(request.cookies.get(DEVICE_COOKIE, ""), max_age=DEVICE_SECONDS)
        except BadSignature:
            return None
        if not isinstance(found, dict) or found.get("name") != name:
            return None
        device = found.get("device")
        return device if isinstance(device, str) and 0 < len(device) <= 64 else None

    def _login_form(self, error: str | None, status: int) -> Response:
        nonce = secrets.token_urlsafe(24)
        resp = self.render("login.html", status, title="Sign in", login_csrf=nonce, error=error)
        resp.set_cookie(
            LOGIN_COOKIE,
            self.logins.dumps(nonce),
            httponly=True,
            samesite="strict",
            secure=self.secure,
            max_age=NONCE_SECONDS,
        )
        return resp

    def logout(self, request: Request, form: Form) -> Response:
        auth = self.need(request)
        self.check_csrf(form, auth.csrf)
        self.store.end_session(auth.token)
        resp = RedirectResponse("/login", status_code=303)
        resp.delete_cookie(SESSION_COOKIE)
        return resp

    # -- reviewing -----------------------------------------------------------------

    def queue(self, request: Request) -> Response:
        auth = self.need(request)
        rid = auth.reviewer.id
        with self.store.read() as conn:
            recent = conn.execute(
                "SELECT v.item_id, i.task_id, v.passed, v.seconds FROM reviews v JOIN items i ON i.id=v.item_id"
                " WHERE v.reviewer_id=? ORDER BY v.submitted_at DESC, v.id DESC LIMIT 20",
                (rid,),
            ).fetchall()
            done = conn.execute("SELECT COUNT(*) FROM reviews WHERE reviewer_id=?", (rid,)).fetchone()[0]
            open_row = conn.execute(
                "SELECT a.item_id FROM assignments a LEFT JOIN reviews v ON v.item_id=a.item_id AND"
                " v.reviewer_id=a.reviewer_id WHERE a.reviewer_id=? AND v.id IS NULL ORDER BY a.started_at LIMIT 1",
                (rid,),
            ).fetchone()
            waiting = conn.execute(
                "SELECT COUNT(*) FROM items i WHERE i.position IS NOT NULL AND"
                " (SELECT COUNT(*) FROM reviews v WHERE v.item_id=i.id) < i.overlap"
            ).fetchone()[0]
        rows = [{"item_id": r[0], "task": r[1], "passed": bool(r[2]), "seconds": r[3]} for r in recent]
        flash = request.query_params.get("msg")
        return self.render(
            "queue.html",
            user=auth.reviewer,
            csrf=auth.csrf,
            title="Queue",
            recent=rows,
            done=done,
            waiting=waiting,
            open_item=open_row[0] if open_row else None,
            flash={"empty": "Nothing left in the queue for you.", "paused": "You are paused from the queue."}.get(
                flash or ""
            ),
        )

    def take(self, request: Request, form: Form) -> Response:
        auth = self.need(request)
        self.check_csrf(form, auth.csrf)
        _only(form, {"csrf"})
        if auth.reviewer.paused:
            return RedirectResponse("/queue?msg=paused", status_code=303)
        item_id = take_next(self.store, auth.reviewer)
        if item_id is None:
            return RedirectResponse("/queue?msg=empty", status_code=303)
        return RedirectResponse(f"/item/{item_id}", status_code=303)

    def item_page(self, request: Request, item_id: int) -> Response:
        auth = self.need(request)
        user = auth.reviewer
        item = self.store.item(item_id)
        if item is None:
            raise HTTPError(404, "no such item")
        mine_rows = self.store.reviews(None, "v.item_id=? AND v.reviewer_id=?", (item_id, user.id))
        mine = mine_rows[0] if mine_rows else None
        assigned = self.store.assignment(item_id, user.id) is not None
        full = user.can("adjudicator")
        if mine is None and assigned:
            mode = "grade"
        elif mine is not None or full:
            mode = "result"
        else:
            raise HTTPError(404, "no such item")
        record = self.store.record(item_id)
        view = episode_view(record, self.registry)
        ctx: dict[str, Any] = {
            "user": user,
            "csrf": auth.csrf,
            "title": f"Item {item_id}",
            "item": item,
            "view": view,
            "mode": mode,
            "mine": mine,
            "show_agent": mode == "result" and full,
            "reviews": None,
            "adjudication": None,
            "verdict": None,
        }
        if mode == "result":
            ctx["verdict"] = record_verdict(record)
            if full:
                ctx["reviews"] = self.store.reviews(None, "v.item_id=?", (item_id,))
                ctx["adjudication"] = self.store.adjudications().get(item_id)
        return self.render("item.html", **ctx)

    def submit(self, request: Request, item_id: int, form: Form) -> Response:
        auth = self.need(request)
        self.check_csrf(form, auth.csrf)
        item = self.store.item(item_id)
        if item is None or self.store.assignment(item_id, auth.reviewer.id) is None:
            raise HTTPError(404, "no such item")
        rubric_fields = {f"rubric_{i}": ref.key for i, ref in enumerate(item.checks)}
        _only(
            form,
            {
                "csrf",
                "verdict",
                "reason",
                "reason_keys",
                "reason_pasted",
                "hacking",
                "task_wrong",
                "edge_case",
                *rubric_fields,
            },
        )
        verdict = form.get("verdict")
        if verdict not in ("pass", "fail"):
            raise HTTPError(400, "choose pass or fail")
        rubric: dict[str, bool] = {}
        for name, key in rubric_fields.items():
            value = form.get(name, "")
            if value not in ("", "pass", "fail"):
                raise HTTPError(400, f"{name} must be empty, pass or fail")
            if value:
                rubric[key] = value == "pass"
        reason = form.get("reason", "").replace("\r\n", "\n")
        if len(reason) > MAX_REASON:
            raise HTTPError(400, f"a reason has at most {MAX_REASON} characters")
        flags = {}
        for name in ("hacking", "task_wrong", "edge_case"):
            box = form.get(name)
            if box not in (None, "on"):
                raise HTTPError(400, f"{name} is a checkbox")
            flags[name] = box == "on"
        keys = form.get("reason_keys", "0")
        if not keys.isascii() or not keys.isdigit() or len(keys) > 7:
            raise HTTPError(400, "reason_keys must be a count")
        pasted = form.get("reason_pasted", "0")
        if pasted not in ("0", "1"):
            raise HTTPError(400, "reason_pasted must be 0 or 1")
        review = ReviewInput(
            item_id=item_id,
            reviewer_id=auth.reviewer.id,
            passed=verdict == "pass",
            reason=reason,
            rubric=rubric,
            flag_hacking=flags["hacking"],
            flag_task_wrong=flags["task_wrong"],
            flag_edge_case=flags["edge_case"],
            reason_keys=int(keys),
            reason_pasted=pasted == "1",
        )
        submit_grade(self.store, review)
        return RedirectResponse(f"/item/{item_id}", status_code=303)

    # -- adjudication and administration ---------------------------------------------

    def adjudicate(self, request: Request, item_id: int, form: Form) -> Response:
        auth = self.need(request, "adjudicator")
        self.check_csrf(form, auth.csrf)
        _only(form, {"csrf", "verdict", "reason"})
        verdict = form.get("verdict")
        if verdict not in ("pass", "fail"):
            raise HTTPError(400, "choose pass or fail")
        reason = form.get("reason", "")
        if len(reason) > MAX_REASON:
            raise HTTPError(400, f"a reason has at most {MAX_REASON} characters")
        if self.store.item(item_id) is None:
            raise HTTPError(404, "no such item")
        self.store.adjudicate(item_id, auth.reviewer.id, verdict == "pass", reason)
        return RedirectResponse(f"/item/{item_id}", status_code=303)

    def make_gold(self, request: Request, item_id: int, form: Form) -> Response:
        auth = self.need(request, "admin")
        self.check_csrf(form, auth.csrf)
        _only(form, {"csrf"})
        adj = self.store.adjudications().get(item_id)
        if adj is None:
            raise HTTPError(400, "only an adjudicated item can become a gold item")
        self.store.make_gold(item_id, bool(adj["passed"]), auth.reviewer.id)
        return RedirectResponse(f"/item/{item_id}", status_code=303)

    def stats_data(self) -> dict[str, Any]:
        key = self.store.version()
        if self._stats_cache is None or self._stats_cache[0] != key:
            try:
                self._stats_cache = (key, compute_stats(self.store, self.stats_options))
            except IncomparableError as err:
                raise HTTPError(409, str(err)) from None
        return self._stats_cache[1]

    def stats_page(self, request: Request) -> Response:
        auth = self.need(request, "adjudicator")
        return self.render("stats.html", user=auth.reviewer, csrf=auth.csrf, title="Agreement", s=self.stats_data())

    def stats_json(self, request: Request) -> Response:
        self.need(request, "adjudicator")
        return JSONResponse(self.stats_data())

    def drift_page(self, request: Request) -> Response:
        auth = self.need(request, "adjudicator")
        d = compute_drift(self.store, self.drift_policy)
        for w in d["windows"]:
            w["label"] = datetime.fromtimestamp(w["start"], UTC).strftime("%Y-%m-%d")
        charts = {
            "windows": line_chart(
                "Agreement with the verifier per window",
                [w["label"] for w in d["windows"]],
                {"agreement": [w["agreement"] for w in d["windows"]], "AC1": [w["ac1"] for w in d["windows"]]},
                lo=-0.2,
            ),
            "versions": bar_chart(
                "Agreement per verifier version",
                [v["version"][:8] for v in d["versions"]],
                [v["agreement"] for v in d["versions"]],
            ),
            "psi": bar_chart(
                "Score PSI against the agent's first run",
                [f"run {r['run']}" for r in d["runs"] if not r["reference"]],
                [r["score"]["psi"] for r in d["runs"] if not r["reference"]],
                hi=max([0.5] + [r["score"]["psi"] for r in d["runs"] if not r["reference"]]),
                thresholds=[(0.1, "0.1 moderate"), (self.drift_policy.psi_alarm, "alarm")],
            ),
        }
        return self.render("drift.html", user=auth.reviewer, csrf=auth.csrf, title="Drift", d=d, charts=charts)

    def reviewers_page(self, request: Request, form: Form | None) -> Response:
        auth = self.need(request, "admin")
        flash = None
        if form is not None:
            self.check_csrf(form, auth.csrf)
            _only(form, {"csrf", "name", "password", "role"})
            role = form.get("role", "reviewer")
            if role not in ROLES:
                raise HTTPError(400, "unknown role")
            try:
                self.store.add_reviewer(form.get("name", ""), form.get("password", ""), role)  # type: ignore[arg-type]
            except MirrorworldError as err:
                raise HTTPError(400, str(err)) from None
            return RedirectResponse("/reviewers", status_code=303)
        return self.render(
            "reviewers.html",
            user=auth.reviewer,
            csrf=auth.csrf,
            title="Reviewers",
            flash=flash,
            quality=quality_report(self.store),
        )

    def set_paused(self, request: Request, reviewer_id: int, paused: bool, form: Form) -> Response:
        auth = self.need(request, "admin")
        self.check_csrf(form, auth.csrf)
        _only(form, {"csrf"})
        try:
            self.store.set_paused(
                reviewer_id, paused, f"paused by {auth.reviewer.name}" if paused else "", by=auth.reviewer.id
            )
        except MirrorworldError as err:
            raise HTTPError(404, str(err)) from None
        return RedirectResponse("/reviewers", status_code=303)

    def error_page(self, request: Request, err: HTTPError) -> Response:
        if err.status == 401:
            return RedirectResponse("/login", status_code=303)
        auth = self.auth(request)
        return self.render(
            "error.html",
            err.status,
            user=auth.reviewer if auth else None,
            csrf=auth.csrf if auth else "",
            title=str(err.status),
            status=err.status,
            message=err.message,
        )


def _only(form: Form, allowed: set[str]) -> None:
    extra = sorted(set(form) - allowed)
    if extra:
        raise HTTPError(400, f"unexpected form field {extra[0][:40]!r}")


async def _read_form(request: Request) -> Form:
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/x-www-form-urlencoded":
        raise HTTPError(415, "forms are sent as application/x-www-form-urlencoded")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            raise HTTPError(413, "the form is too large")
    try:
        text = body.decode("utf-8")
        pairs = parse_qsl(
            text, keep_blank_values=True, strict_parsing=False, errors="strict", max_num_fields=MAX_FIELDS
        )
    except (UnicodeDecodeError, ValueError):
        raise HTTPError(400, "the form is not valid UTF-8 form data") from None
    form: Form = {}
    for k, v in pairs:
        if k in form:
            raise HTTPError(400, f"the form repeats the field {k[:40]!r}")
        if "\x00" in k or "\x00" in v:
            raise HTTPError(400, "the form contains a NUL character")
        form[k] = v
    return form


def _same_origin(request: Request) -> bool:
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    host = request.headers.get("host", "")
    return origin in (f"http://{host}", f"https://{host}")


def create_app(
    store: ReviewStore,
    *,
    registry: Registry | None = None,
    stats_options: StatsOptions | None = None,
    drift_policy: DriftPolicy | None = None,
    secure_cookies: bool = False,
    sign_in_limits: SignInLimits | None = None,
    api: ApiConfig | None = None,
) -> Starlette:
    """The ASGI app over ``store``. ``secure_cookies`` for deployments behind HTTPS; ``api`` bounds the JSON API."""
    app = _App(
        store,
        registry=registry,
        stats_options=stats_options or StatsOptions(),
        drift_policy=drift_policy or DriftPolicy(),
        secure_cookies=secure_cookies,
        sign_in_limits=sign_in_limits or SignInLimits(),
    )

    def page(fn: Callable[..., Response], *, post: bool = False) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            started = time.perf_counter()
            try:
                form: Form | None = None
                if request.method == "POST":
                    if not _same_origin(request):
                        raise HTTPError(403, "cross-site form posts are refused")
                    form = await _read_form(request)
                args = [int(v) for v in request.path_params.values()]
                if post:
                    resp = await run_in_threadpool(fn, request, *args, form)
                else:
                    resp = await run_in_threadpool(fn, request, *args)
            except HTTPError as err:
                resp = await run_in_threadpool(app.error_page, request, err)
            except MirrorworldError as err:
                resp = await run_in_threadpool(app.error_page, request, HTTPError(400, str(err)))
            resp.headers["Content-Security-Policy"] = CSP
            resp.headers["X-Content-Type-Options"] = "nosniff"
            resp.headers["Referrer-Policy"] = "same-origin"
            resp.headers["X-Frame-Options"] = "DENY"
            resp.headers["Cache-Control"] = "no-store"
            resp.headers["Server-Timing"] = f"app;dur={(time.perf_counter() - started) * 1000:.1f}"
            return resp

        return endpoint

    def static(body: str, media: str) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            return Response(
                body, media_type=media, headers={"Cache-Control": "max-age=300", "X-Content-Type-Options": "nosniff"}
            )

        return endpoint

    def home(request: Request) -> Response:
        return RedirectResponse("/queue" if app.auth(request) else "/login", status_code=303)

    def login(request: Request, form: Form | None) -> Response:
        return app.login_page(request, form)

    routes = [
        Route("/", page(home)),
        Route("/login", page(login, post=True), methods=["GET", "POST"]),
        Route("/logout", page(app.logout, post=True), methods=["POST"]),
        Route("/queue", page(app.queue)),
        Route("/take", page(app.take, post=True), methods=["POST"]),
        Route("/item/{item_id:rowid}", page(app.item_page)),
        Route("/item/{item_id:rowid}/review", page(app.submit, post=True), methods=["POST"]),
        Route("/item/{item_id:rowid}/adjudicate", page(app.adjudicate, post=True), methods=["POST"]),
        Route("/item/{item_id:rowid}/gold", page(app.make_gold, post=True), methods=["POST"]),
        Route("/stats", page(app.stats_page)),
        Route("/stats.json", page(app.stats_json)),
        Route("/drift", page(app.drift_page)),
        Route("/reviewers", page(app.reviewers_page, post=True), methods=["GET", "POST"]),
        Route(
            "/reviewers/{reviewer_id:rowid}/pause",
            page(lambda r, i, f: app.set_paused(r, i, True, f), post=True),
            methods=["POST"],
        ),
        Route(
            "/reviewers/{reviewer_id:rowid}/resume",
            page(lambda r, i, f: app.set_paused(r, i, False, f), post=True),
            methods=["POST"],
        ),
        Route("/static/app.js", static(APP_JS, "text/javascript")),
        Route("/static/app.css", static(APP_CSS, "text/css")),
    ]
    api_app = api_routes(
        store, registry=registry, stats_options=app.stats_options, drift_policy=app.drift_policy, config=api
    )
    return Starlette(routes=[*routes, *api_app])


class _RowId(Convertor[int]):
    """A path segment naming a row: 1 to 18 digits (a longer one is no row: 404, never an overflow)."""

    regex = "[0-9]{1,18}"

    def convert(self, value: str) -> int:
        return int(value)

    def to_string(self, value: int) -> str:
        return str(int(value))


register_url_convertor("rowid", _RowId())


class HostGuard:
    """Refuse a request whose ``Host`` is not this server's (DNS rebinding), as the session server does.

    Loopback names and the address the connection arrived at are this
    server's; ``allowed_hosts`` adds names (``"*"``: any). A refused request
    gets ``421`` before the app sees it.
    """

    def __init__(self, app: Any, allowed_hosts: tuple[str, ...] = ()) -> None:
        from mirrorworld.server.admission import Admission
        from mirrorworld.server.config import ServerConfig

        self.app = app
        self.admission = Admission(ServerConfig(allowed_hosts=allowed_hosts or None, allowed_origins=("*",)))

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            from mirrorworld.server.admission import read_head

            refusal = self.admission.refusal(scope, read_head(scope.get("headers", ())))
            if refusal is not None:
                body = f"{refusal.status}: {refusal.message}".encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": refusal.status,
                        "headers": [
                            (b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def serve(app: Starlette, host: str = "127.0.0.1", port: int = 8765, allowed_hosts: tuple[str, ...] = ()) -> None:
    """Run the app with uvicorn until interrupted.

    Requests go through :class:`HostGuard`, and the server's own HTTP protocol
    (:mod:`mirrorworld.server.protocols`: request heads bounded in bytes,
    line length and time) serves them.
    """
    import uvicorn

    from mirrorworld.server.config import ServerConfig
    from mirrorworld.server.protocols import http_protocol

    config = ServerConfig(host=host, port=port)
    uvicorn.run(
        HostGuard(app, allowed_hosts),
        host=host,
        port=port,
        log_level="warning",
        ws="none",
        lifespan="off",
        http=http_protocol(config),
        h11_max_incomplete_event_size=config.max_head_bytes,
    )
