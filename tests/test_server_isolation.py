"""No state leaks between sessions: 10,000 sessions, randomly interleaved, from concurrent clients.

Eight WebSocket clients each run many concurrent workers; every worker opens
sessions one after another, writes one or two unique canary notes onto the
same ticket in each (every session starts from the same data, so they all
write to the same row ids), reads the ticket back at random points and checks
that it sees exactly its own canaries and none of any other session's. The
server handles them all interleaved on one event loop.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("websockets")

from mirrorworld.client import AsyncClient, AsyncRemoteSession
from mirrorworld.server import BackgroundServer, ServerConfig

SESSIONS = 10_000
CLIENTS = 8
WORKERS = 12
TICKET = 11  # a pending ticket of the pristine data, writable in every task
FAMILIES = ["kb_answer", "update_email", "triage", "cancel_order"]


def canaries(result: Any) -> list[str]:
    return sorted(m["body"] for m in result["messages"] if m["body"].startswith("canary-"))


async def play(session: AsyncRemoteSession, rng: random.Random, name: str) -> int:
    """Write canaries and check reads in a random order; return the number of checks."""
    mine: list[str] = []
    plan = ["write", "read", *rng.choice([[], ["write"], ["read"], ["write", "read"]])]
    rng.shuffle(plan)
    checks = 0
    for op in [*plan, "read"]:
        if op == "write":
            body = f"canary-{name}-{len(mine)}"
            r = await session.step("reply_ticket", {"ticket_id": TICKET, "body": body, "public": False})
            assert r.ok, r.result
            mine.append(body)
        else:
            r = await session.step("get_ticket", {"ticket_id": TICKET})
            assert r.ok, r.result
            assert canaries(r.result) == sorted(mine), f"{name} saw {canaries(r.result)}, wrote {mine}"
            checks += 1
        if rng.random() < 0.3:
            await asyncio.sleep(0)
    return checks


async def client(url: str, k: int, per_client: int) -> tuple[int, int]:
    opened = checks = 0
    async with AsyncClient(url, transport="ws") as c:
        counter = iter(range(per_client))

        async def worker(w: int) -> None:
            nonlocal opened, checks
            rng = random.Random(f"{k}/{w}")
            for i in counter:
                session = await c.create(family=rng.choice(FAMILIES), seed=rng.randrange(50), max_steps=50)
                opened += 1
                done = await play(session, rng, f"{k}-{i}")
                checks += done
                await session.close()

        await asyncio.gather(*(worker(w) for w in range(WORKERS)))
    return opened, checks


def test_ten_thousand_interleaved_sessions_never_see_each_others_writes() -> None:
    with BackgroundServer(ServerConfig(access_log=False, max_sessions=SESSIONS)) as server:

        async def main() -> list[tuple[int, int]]:
            per_client = SESSIONS // CLIENTS
            return await asyncio.gather(*(client(server.url, k, per_client) for k in range(CLIENTS)))

        results = asyncio.run(main())
        assert sum(opened for opened, _ in results) == SESSIONS
        assert sum(checks for _, checks in results) >= 2 * SESSIONS
        assert len(server.manager) == 0  # every session was closed
        stats = server.manager.stats()
        assert stats["created"] == SESSIONS and stats["closed"] == SESSIONS
