"""A client of the review API (:mod:`mirrorworld.review.api`) for training loops and simulated reviewers.

    from mirrorworld.review.client import ReviewAPI

    with ReviewAPI("http://127.0.0.1:8765", token) as api:
        sent = api.submit("ppo/update-40", world, records, sample={"size": 8})
        done = api.status(sent["queued"], wait=30)      # long-polls until one is resolved
        print(api.agreement()["verifier_vs_human"]["agreement"]["value"])

Every method is one request (``labels_all`` pages through them) and returns
the answer's JSON; an error answer raises :class:`ReviewAPIError` with the
server's ``code`` and ``message``, a request that never got an answer an
:class:`httpx.HTTPError` as httpx raises it. ``transport`` takes any httpx
transport (``httpx.ASGITransport``, ``httpx.MockTransport``) for tests.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from mirrorworld.errors import MirrorworldError

if TYPE_CHECKING:
    from mirrorworld.core.world import World
    from mirrorworld.run.runner import EpisodeRecord

__all__ = ["ReviewAPI", "ReviewAPIError"]


class ReviewAPIError(MirrorworldError):
    """The review API refused a request: ``status`` (HTTP), ``code`` and ``message`` as the server sent them."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"review API {status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message


def _record(rec: EpisodeRecord | Mapping[str, Any]) -> dict[str, Any]:
    if is_dataclass(rec) and not isinstance(rec, type):
        return asdict(rec)
    return dict(rec)  # type: ignore[arg-type]


class ReviewAPI:
    """The review API at ``base_url`` (the review app's address), acting with ``token``."""

    def __init__(
        self, base_url: str, token: str, timeout: float = 30.0, *, transport: httpx.BaseTransport | None = None
    ) -> None:
        self.http = httpx.Client(
            base_url=base_url.rstrip("/") + "/api/v1",
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
            timeout=timeout,
            transport=transport,
        )

    def __enter__(self) -> ReviewAPI:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def _call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> Any:
        try:
            content = None if body is None else json.dumps(body, default=str, allow_nan=False).encode()
        except ValueError:
            raise MirrorworldError("the request holds NaN or Infinity, which JSON cannot carry") from None
        headers = {"Content-Type": "application/json"} if content is not None else {}
        resp = self.http.request(
            method,
            path,
            content=content,
            params=params,
            headers=headers,
            timeout=self.http.timeout if timeout is None else timeout,
        )
        try:
            data = resp.json()
        except ValueError:
            data = None
        if resp.status_code >= 400:
            err = data.get("error") if isinstance(data, dict) else None
            if isinstance(err, dict):
                raise ReviewAPIError(resp.status_code, str(err.get("code")), str(err.get("message")))
            raise ReviewAPIError(resp.status_code, "http", resp.text[:200])
        return data

    # -- pipelines ---------------------------------------------------------------------

    def submit(
        self,
        run_name: str,
        world: World | str,
        records: Iterable[EpisodeRecord | Mapping[str, Any]],
        *,
        agent: str = "",
        meta: Mapping[str, Any] | None = None,
        sample: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Submit episodes as the run ``run_name`` (``api:<run_name>`` on the server); see ``POST /episodes``.

        ``world`` is a :class:`~mirrorworld.core.world.World` (its id, content
        hash and score parts go into the run's metadata, so agreement stays
        comparable across submissions) or a world id. ``sample`` as the API
        takes it: ``{"size": 8}`` queues 8 more items; without it, all of them.
        """
        run_meta = dict(meta or {})
        if isinstance(world, str):
            world_id = world
        else:
            world_id = world.id
            run_meta.setdefault("world_hash", world.content_hash)
            run_meta.setdefault("world_parts", world.score_parts())
        body = {
            "run": {"name": run_name, "world": world_id, "agent": agent, "meta": run_meta},
            "episodes": [_record(r) for r in records],
            "sample": dict(sample or {}),
        }
        result: dict[str, Any] = self._call("POST", "/episodes", body=body)
        return result

    def submit_run_file(
        self, path: str | Path, *, run_name: str | None = None, sample: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Submit a run file's episodes, read (and checked) here; the run is named after the file by default."""
        from mirrorworld.run.trajectories import RunFile

        p = Path(path)
        with RunFile.open(p) as run:
            meta = run.meta
            records = list(run.episodes())
        keep: dict[str, Any] = {k: meta[k] for k in ("world_hash", "world_parts", "split", "artifact") if k in meta}
        return self.submit(
            run_name or p.stem,
            str(meta.get("world", "")),
            records,
            agent=str(meta.get("agent", "")),
            meta=keep,
            sample=sample,
        )

    def item(self, item_id: int) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", f"/items/{int(item_id)}")
        return result

    def status(self, ids: Sequence[int], *, wait: float | None = None) -> dict[str, Any]:
        """The items' status (``GET /items``); ``wait`` seconds long-polls for one to be resolved."""
        params: dict[str, Any] = {"ids": ",".join(str(int(i)) for i in ids)}
        timeout = None
        if wait:
            params["wait"] = wait
            timeout = float(wait) + float(self.http.timeout.read or 30.0)
        result: dict[str, Any] = self._call("GET", "/items", params=params, timeout=timeout)
        return result

    def agreement(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "/agreement")
        return result

    def drift(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "/drift")
        return result

    def labels(self, *, after: int = 0, limit: int = 100) -> dict[str, Any]:
        """One page of labels; pass its ``next`` as ``after`` for the next one."""
        result: dict[str, Any] = self._call("GET", "/labels", params={"after": after, "limit": limit})
        return result

    def labels_all(self, *, limit: int = 500) -> Iterator[dict[str, Any]]:
        """Every labelled item, page after page."""
        after: int | None = 0
        while after is not None:
            page = self.labels(after=after, limit=limit)
            yield from page["items"]
            after = page["next"]

    # -- reviewers ---------------------------------------------------------------------

    def me(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "/me")
        return result

    def take(self) -> dict[str, Any] | None:
        """The next item to grade, blind (no verdict); None when there is none for this reviewer or they are paused."""
        item: dict[str, Any] | None = self._call("POST", "/queue/take")["item"]
        return item

    def review(
        self,
        item_id: int,
        passed: bool,
        *,
        rubric: Mapping[str, bool] | None = None,
        reason: str = "",
        flags: Sequence[str] = (),
        reason_keys: int | None = None,
    ) -> dict[str, Any]:
        """Grade an item this reviewer took: ``{"review", "created", "paused"}``."""
        body = {
            "passed": passed,
            "rubric": dict(rubric or {}),
            "reason": reason,
            "flags": list(flags),
            "reason_keys": len(reason) if reason_keys is None else reason_keys,
        }
        result: dict[str, Any] = self._call("POST", f"/items/{int(item_id)}/review", body=body)
        return result

    # -- administration ----------------------------------------------------------------

    def add_webhook(self, url: str, events: Sequence[str] = ("item.resolved",)) -> dict[str, Any]:
        """Register a webhook; the answer holds its ``secret`` (signing the deliveries), shown only now."""
        result: dict[str, Any] = self._call("POST", "/webhooks", body={"url": url, "events": list(events)})
        return result

    def webhooks(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._call("GET", "/webhooks")["webhooks"]
        return result

    def delete_webhook(self, webhook_id: int) -> None:
        self._call("DELETE", f"/webhooks/{int(webhook_id)}")

    def create_token(
        self, reviewer: str, *, role: str | None = None, label: str = "", create_reviewer: bool = False
    ) -> dict[str, Any]:
        """A new token for ``reviewer`` (``create_reviewer``: make the account if missing); ``token`` is its secret."""
        body = {"reviewer": reviewer, "role": role, "label": label, "create_reviewer": create_reviewer}
        result: dict[str, Any] = self._call("POST", "/tokens", body=body)
        return result

    def revoke_token(self, token_id: int) -> None:
        self._call("DELETE", f"/tokens/{int(token_id)}")
