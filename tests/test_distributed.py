"""Ray scale-out on a real local cluster: a head node and one worker node, one CPU each.

One module-scoped cluster serves every test; actors ask for one CPU, so a
pool of two puts one actor on each node. The run tests compare a run on the
cluster with a local run of the same plan record by record; the vector tests
compare ``RayVectorEnv`` with Gymnasium's ``SyncVectorEnv`` step by step.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ray = pytest.importorskip("ray")

import gymnasium as gym  # noqa: E402
from gymnasium.vector import AutoresetMode  # noqa: E402

from mirrorworld.agents import OracleAgent  # noqa: E402
from mirrorworld.agents.base import Agent, EpisodeContext, Message  # noqa: E402
from mirrorworld.cli import main  # noqa: E402
from mirrorworld.core.registry import default  # noqa: E402
from mirrorworld.distributed import EnvFactory, EpisodePool, RayVectorEnv, run_on_ray  # noqa: E402
from mirrorworld.run import RunFile, plan_episodes, run_episodes  # noqa: E402
from mirrorworld.run.runner import EpisodeRecord  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings(r"ignore::DeprecationWarning:ray\."),
    pytest.mark.filterwarnings(r"ignore::DeprecationWarning:google\."),
    pytest.mark.filterwarnings(r"ignore::UserWarning:ray\."),
    pytest.mark.filterwarnings(r"ignore::FutureWarning:ray\."),
    pytest.mark.filterwarnings(r"ignore::ResourceWarning"),
]

WORLD = default.get("helpdesk")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A head and one worker node (separate raylets), and this process connected to them; yields the GCS address."""
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    c.add_node(num_cpus=1)
    c.wait_for_nodes()
    ray.init(address=c.address, log_to_driver=False, include_dashboard=False)
    # The module's crashing agent is pickled by value: the workers cannot import this test file.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        yield c.address
    finally:
        ray.shutdown()
        c.shutdown()


def _replayed_hash(record: EpisodeRecord) -> str:
    """The end state's hash: the record's calls replayed on a fresh session of its task."""
    with WORLD.session(WORLD.task_at(record.task_id)) as s:
        for call in record.calls:
            s.call(call["tool"], call["args"])
        return s.state_hash()


def _same(a: EpisodeRecord, b: EpisodeRecord) -> None:
    assert (a.index, a.task_id, a.trial, a.passed, a.score, a.reward, a.steps) == (
        b.index,
        b.task_id,
        b.trial,
        b.passed,
        b.score,
        b.reward,
        b.steps,
    )
    assert a.verdict == b.verdict and a.calls == b.calls and a.messages == b.messages and a.failure == b.failure


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mirrorworld", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )


# -- runs ------------------------------------------------------------------------------


def test_run_ray_merges_into_one_run_file_with_the_local_verdicts(cluster: str, tmp_path: Path) -> None:
    """``mirrorworld run --ray ADDRESS --workers 2``, its own process: one file, the local run's records and summary."""
    remote, local = tmp_path / "ray.sqlite", tmp_path / "local.sqlite"
    args = ("run", "--episodes", "14", "--trials", "2", "--json", "--no-progress")
    done = _cli(*args, "--ray", cluster, "--workers", "2", "--out", str(remote))
    assert done.returncode == 0, done.stderr[-2000:]
    assert main([*args, "--out", str(local)]) == 0
    with RunFile.open(remote) as r, RunFile.open(local) as lo:
        ray_records, local_records = list(r.episodes()), list(lo.episodes())
        ray_summary, local_summary = r.meta["summary"], lo.meta["summary"]
        assert r.meta["ray"] == {"address": cluster, "workers": 2}
    assert len(ray_records) == len(local_records) == 28
    for a, b in zip(ray_records, local_records, strict=True):
        _same(a, b)
    assert [_replayed_hash(r) for r in ray_records] == [_replayed_hash(r) for r in local_records]
    volatile = ("seconds", "episodes_per_s", "run_file")
    assert {k: v for k, v in ray_summary.items() if k not in volatile} == {
        k: v for k, v in local_summary.items() if k not in volatile
    }
    assert json.loads(done.stdout)["passed"] == local_summary["passed"] > 0


def test_the_pool_puts_a_world_rebuilt_from_its_spec_on_each_node(cluster: str) -> None:
    """Worlds travel as class and parameters: an actor receives a world without an image and builds its own."""
    WORLD.image  # noqa: B018 - the driver's world holds a built database
    blob = pickle.dumps(WORLD)
    assert len(blob) < 2_000 and b"SQLite format" not in blob
    with EpisodePool(WORLD, OracleAgent(), workers=2) as pool:
        infos = pool.infos
    assert len({i["node"] for i in infos}) == 2  # one CPU per node, one CPU per actor
    assert len({i["pid"] for i in infos}) == 2 and os.getpid() not in {i["pid"] for i in infos}
    assert all(i["arrived_with_image"] is False and i["world_hash"] == WORLD.content_hash for i in infos), infos


def test_the_plan_names_the_tasks_a_local_run_plays() -> None:
    planned = plan_episodes(WORLD, episodes=13, split="train", start=5, trials=2)
    assert [p.index for p in planned] == list(range(26))
    assert [str(p.task) for p in planned[::2]] == [WORLD.task_for("train", 5 + i).id for i in range(13)]


class CrashOn(Agent):
    """The oracle, except that the worker process dies on one task (a node lost, an OOM kill)."""

    name = "oracle"

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        self.oracle = OracleAgent()

    def reset(self, context: EpisodeContext) -> None:
        if context.task.id == self.task_id:
            os._exit(1)
        self.oracle.reset(context)

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> Message:
        return self.oracle.act(messages, tools)


def test_a_dead_worker_is_an_infrastructure_failure_never_a_score(cluster: str) -> None:
    planned = plan_episodes(WORLD, episodes=8)
    victim = str(planned[2].task)
    records = run_on_ray(WORLD, CrashOn(victim), episodes=8, workers=2, chunk_size=2)
    local = run_episodes(WORLD, OracleAgent(), episodes=8)
    lost = [r.index for r in records if r.errored]
    chunks = [[0, 1], [2, 3], [4, 5], [6, 7]]
    # the chunk the worker was playing when it died, and the one queued behind it, if any
    assert lost in ([2, 3], [2, 3, 4, 5], [2, 3, 6, 7]), lost
    assert all(c[0] in lost for c in chunks if c[1] in lost)
    for r in (records[i] for i in lost):
        assert r.failure is not None and r.failure.boundary == "infrastructure" and r.failure.kind == "WorkerError"
        assert r.verdict == {} and not r.passed
    for r, lo in zip(records, local, strict=True):
        if not r.errored:
            _same(r, lo)  # the restarted actor (and the other one) played the rest as a local run does
    from mirrorworld.run import summarize

    summary = summarize(records)
    assert summary["errors_by_boundary"] == {"infrastructure": len(lost)} and summary["graded"] == 8 - len(lost)
    assert summary["pass_rate"] == 1.0


# -- the command line ----------------------------------------------------------------------


def test_without_ray_the_command_says_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    assert main(["run", "--ray", "--episodes", "1", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "mirrorworld[ray]" in err and "Traceback" not in err
    assert main(["bench", "--ray"]) == 1
    assert "mirrorworld[ray]" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--workers", "2"), "--workers needs --ray"),
        (("--ray", "--workers", "0"), "at least 1"),
        (("--ray", "--multi-agent"), "--multi-agent"),
    ],
)
def test_bad_ray_options_are_one_line(args: tuple[str, ...], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--episodes", "1", "--no-progress", *args]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err


def test_a_bad_address_is_one_line_in_seconds(tmp_path: Path) -> None:
    for address, says in [
        ("127.0.0.1:1", "no Ray cluster at 127.0.0.1:1"),
        ("not-an-address", "a Ray address is"),
        ("ray://127.0.0.1:1", "cannot connect to Ray"),
    ]:
        out = tmp_path / "run.sqlite"
        done = _cli("run", "--ray", address, "--episodes", "1", "--no-progress", "--out", str(out), timeout=60)
        assert done.returncode == 1, (address, done.stderr[-1000:])
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and says in lines[0] and "Traceback" not in done.stderr, (address, done.stderr)
        if address != "ray://127.0.0.1:1":
            assert not out.exists()
        out.unlink(missing_ok=True)


# -- the vector environment ------------------------------------------------------------------


def _pick(rng: np.random.Generator, masks: np.ndarray) -> np.ndarray:
    """A valid slot per environment (any slot where a menu is empty), drawn from ``rng``."""
    out = []
    for mask in masks:
        valid = np.flatnonzero(mask)
        out.append(int(rng.choice(valid)) if len(valid) else 0)
    return np.array(out, dtype=np.int64)


def _assert_same(a: Any, b: Any) -> None:
    """Equal, through dicts and object arrays (same-step infos hold arrays of observations and of info dicts)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b)
        for key in a:
            _assert_same(a[key], b[key])
    elif isinstance(a, np.ndarray) and a.dtype == object:
        assert isinstance(b, np.ndarray) and b.dtype == object and a.shape == b.shape
        for x, y in zip(a.tolist(), b.tolist(), strict=True):
            _assert_same(x, y)
    else:
        np.testing.assert_equal(a, b)


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_the_vector_on_actors_is_the_sync_vector_on_the_menu(cluster: str, mode: AutoresetMode) -> None:
    factory = EnvFactory(env={"split": "train", "max_steps": 4, "gamma": 0.99}, menu=True, menu_options={"slots": 16})
    sync = gym.vector.SyncVectorEnv([factory] * 4, autoreset_mode=mode)
    vec = RayVectorEnv(factory, 4, num_actors=2, autoreset_mode=mode.name.lower())
    try:
        assert vec.num_actors == 2 and vec.metadata["autoreset_mode"] == sync.metadata["autoreset_mode"]
        assert vec.single_observation_space == sync.single_observation_space
        assert vec.single_action_space == sync.single_action_space
        assert vec.observation_space == sync.observation_space and vec.action_space == sync.action_space
        (o1, i1), (o2, i2) = sync.reset(seed=7), vec.reset(seed=7)
        np.testing.assert_array_equal(o1, o2)
        _assert_same(i1, i2)
        rng = np.random.default_rng(0)
        ended = 0
        for _ in range(14):
            actions = _pick(rng, i1["action_mask"])
            s1, s2 = sync.step(actions), vec.step(actions)
            for x, y in zip(s1[:4], s2[:4], strict=True):
                np.testing.assert_array_equal(x, y)
            _assert_same(s1[4], s2[4])
            i1 = s1[4]
            ended += int(np.sum(s1[2] | s1[3]))
        assert ended >= 4  # episodes ended and were reset, in the mode's way
        np.testing.assert_array_equal(np.stack(sync.call("action_masks")), np.stack(vec.call("action_masks")))
    finally:
        sync.close()
        vec.close()


def test_the_vector_on_actors_is_the_sync_vector_on_the_plain_env(cluster: str) -> None:
    factory = EnvFactory(gym_id="mirrorworld/Helpdesk-v0", env={"max_steps": 3})
    sync = gym.vector.SyncVectorEnv([factory] * 3)
    vec = RayVectorEnv(factory, 3, num_actors=2)
    try:
        assert vec.single_observation_space == sync.single_observation_space
        o1, _ = sync.reset(seed=[3, 4, 5])
        o2, _ = vec.reset(seed=[3, 4, 5])
        for key in o1:
            np.testing.assert_equal(tuple(o1[key]) if key not in ("tool_mask", "step") else o1[key], o2[key])
        names = sync.envs[0].unwrapped.tool_names
        for t in range(5):
            tool = names.index("respond") if t == 1 else t % len(names)
            actions = {"tool_name": np.full(3, tool), "tool_args": ('{"message": "hello"}',) * 3}
            s1, s2 = sync.step(actions), vec.step(actions)
            for key in s1[0]:
                np.testing.assert_equal(s1[0][key], s2[0][key])
            for x, y in zip(s1[1:4], s2[1:4], strict=True):
                np.testing.assert_array_equal(x, y)
            assert json.dumps(s1[4], default=str, sort_keys=True) == json.dumps(s2[4], default=str, sort_keys=True)
    finally:
        sync.close()
        vec.close()


# -- the figure ----------------------------------------------------------------------------


def test_bench_ray_reports_both_rates_and_their_ratio(cluster: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``mirrorworld bench --ray``: the pools of one and two actors, warm, on the same fresh tasks (a tiny run)."""
    assert main(["bench", "--ray", cluster, "--workers", "2", "--episodes", "12", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["workers"] == 2 and report["episodes"] == 12 and report["rounds"] == 3
    assert report["one_worker_per_s"] > 0 and report["workers_per_s"] > 0 and report["cpu_ceiling"] > 0
    assert report["ratio"] == pytest.approx(report["workers_per_s"] / report["one_worker_per_s"], rel=0.01)


class CrashAlways(CrashOn):
    def reset(self, context: EpisodeContext) -> None:
        os._exit(1)


def test_a_worker_that_keeps_dying_is_retired_and_the_run_still_ends(cluster: str) -> None:
    records = run_on_ray(WORLD, CrashAlways(""), episodes=6, workers=1, chunk_size=1)
    assert [r.index for r in records] == list(range(6))
    assert all(r.failure is not None and r.failure.boundary == "infrastructure" for r in records)
