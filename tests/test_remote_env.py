"""RemoteMirrorEnv: the same observations, rewards, flags and verdicts as MirrorEnv, from a server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("websockets")

from gymnasium.utils.env_checker import check_env

from mirrorworld import make_world
from mirrorworld.client import RemoteError
from mirrorworld.envs.gymnasium import MirrorEnv
from mirrorworld.envs.remote import RemoteMirrorEnv
from mirrorworld.server import BackgroundServer, ServerConfig


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    with BackgroundServer(ServerConfig(access_log=False)) as s:
        yield s


def same(a: Any, b: Any) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], np.ndarray):
            assert np.array_equal(a[key], b[key]) and a[key].dtype == b[key].dtype, key
        else:
            assert a[key] == b[key], key


def actions_for(env: MirrorEnv | RemoteMirrorEnv, task_gold: Any) -> list[dict[str, Any]]:
    names = list(env.tool_names)
    junk: list[dict[str, Any]] = [
        {"tool_name": names.index("get_customer"), "tool_args": '{"customer_id": "x"}'},
        {"tool_name": 999, "tool_args": "{}"},
        {"tool_name": "search_customers", "tool_args": {"query": "Brown"}},
        {"tool_name": names.index("get_policy"), "tool_args": 42},
        {"nonsense": True},
    ]
    gold = [{"tool_name": names.index(c.tool), "tool_args": json.dumps(c.args)} for c in task_gold]
    return junk + gold


@pytest.mark.parametrize("transport", ["ws", "http"])
@pytest.mark.parametrize("reward", ["shaped", "sparse"])
def test_remote_and_local_environments_agree(server: BackgroundServer, transport: Any, reward: Any) -> None:
    local = MirrorEnv("helpdesk", split="train", max_steps=12, reward=reward)
    remote = RemoteMirrorEnv(server.url, split="train", max_steps=12, reward=reward, transport=transport)
    try:
        assert remote.tool_names == local.tool_names
        assert remote.observation_space == local.observation_space and remote.action_space == local.action_space
        for seed in (0, 3, 7):
            lo, li = local.reset(seed=seed)
            ro, ri = remote.reset(seed=seed)
            same(lo, ro)
            assert li == ri
            assert remote.state_hash() == local.state_hash()
            task = local.episode.task  # type: ignore[union-attr]
            for action in actions_for(local, task.gold):
                lres = local.step(action)
                rres = remote.step(action)
                same(lres[0], rres[0])
                assert lres[1:] == rres[1:]
                if lres[2] or lres[3]:
                    break
            assert lres[2] and lres[4]["verdict"]["passed"]
            assert remote.state_hash() == local.state_hash()
    finally:
        local.close()
        remote.close()


def test_truncation_and_options(server: BackgroundServer) -> None:
    local = MirrorEnv("helpdesk", split="test", max_steps=2)
    remote = RemoteMirrorEnv(server.url, split="test", max_steps=2)
    try:
        for env in (local, remote):
            env.reset(options={"task_id": "triage/5"})
        action = {"tool_name": "get_policy", "tool_args": ""}
        for _ in range(2):
            lres, rres = local.step(action), remote.step(action)
            same(lres[0], rres[0])
            assert lres[1:] == rres[1:]
        assert rres[3] and not rres[2] and "verdict" in rres[4]
    finally:
        local.close()
        remote.close()


def test_passes_gymnasiums_checker(server: BackgroundServer) -> None:
    env = RemoteMirrorEnv(server.url, max_steps=5)
    try:
        check_env(env, skip_render_check=True)
    finally:
        env.close()


def test_refused_requests_raise_and_the_session_is_closed(server: BackgroundServer) -> None:
    with pytest.raises(RemoteError) as err:
        RemoteMirrorEnv(server.url, world="nope")
    assert err.value.code == "unknown_world"
    env = RemoteMirrorEnv(server.url, transport="http")
    env.reset(seed=1)
    sid = env.session.id  # type: ignore[union-attr]
    assert sid in server.manager
    env.close()
    assert sid not in server.manager
    assert make_world("helpdesk").id == env.world_id
