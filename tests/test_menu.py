"""The action menu: built only from what the agent saw, consumed by every RL library without glue.

* A canary planted in a task's gold solution, its hidden fields and its facts
  never reaches a menu call or changes a feature: the wrapper reads
  observations only.
* Gymnasium's and Stable-Baselines3's checkers pass, sb3-contrib's
  MaskablePPO learns on it, TorchRL's ``check_env_specs`` passes and its
  actions reach the world as the calls they name, SuperSuit's wrappers apply,
  vector environments (sync and async) keep observations intact.
* The menu can express the gold solution of the families it is meant for: a
  demonstration that picks the gold's calls from the menu (after reading what
  it needs) passes on test-split tasks.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import replace
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from mirrorworld.core.task import Fact, Task, ToolCall
from mirrorworld.envs.gymnasium import MirrorEnv, decode_action
from mirrorworld.envs.menu import ActionMenu, _slot
from mirrorworld.train.demos import demonstrate

pytestmark = [
    pytest.mark.filterwarnings("ignore:.*is different from the unwrapped version:UserWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
]

CANARY = "zq-canary-7731"
_CANARY_OF = {
    "money": "987654.32",
    "number": "987654",
    "id": "987654",
    "date": "1987-06-05",
    "email": "zq-canary-7731@canary.example",
    "text": CANARY,
}


def _menu(world: str = "helpdesk", **kw: Any) -> ActionMenu:
    return ActionMenu(MirrorEnv(world, max_steps=kw.pop("max_steps", 8)), **kw)


def _planted(world: Any, task: Task) -> Task:
    """``task`` with a canary in the gold's free texts, its hidden fields and its facts (the gold stays valid)."""

    def prose(tool: str, name: str) -> bool:
        return any(p.name == name and p.free_text for p in world.tools_by_name[tool].params)

    gold = tuple(
        ToolCall(
            c.tool,
            {k: (f"{v} {CANARY}" if isinstance(v, str) and prose(c.tool, k) else v) for k, v in c.args.items()},
        )
        for c in task.gold
    )
    facts = (
        *(replace(f, distractors=(*f.distractors, _CANARY_OF[f.kind])) for f in task.facts),
        Fact(label=CANARY, value=CANARY, kind="text"),
    )
    return replace(task, gold=gold, hidden={**task.hidden, CANARY: CANARY}, facts=facts)


@pytest.mark.parametrize("world", ["helpdesk", "sales"])
def test_no_gold_hidden_field_or_fact_reaches_the_menu_or_the_features(world: str) -> None:
    env, twin = _menu(world), _menu(world)
    rng = np.random.default_rng(3)
    for family in [f.name for f in env.unwrapped.world.families]:  # type: ignore[attr-defined]
        task = env.unwrapped.world.task(family, 11)  # type: ignore[attr-defined]
        a, info_a = env.reset(options={"task": task})
        b, _ = twin.reset(options={"task": _planted(env.unwrapped.world, task)})  # type: ignore[attr-defined]
        for _ in range(8):
            assert np.array_equal(a, b), family
            shown = json.dumps([c.args for c in twin.menu], default=str)
            assert CANARY not in shown and "987654" not in shown and "1987-06-05" not in shown, family
            slot = int(rng.choice(np.flatnonzero(info_a["action_mask"])))
            a, _, done, cut, info_a = env.step(slot)
            b, _, done_b, cut_b, _ = twin.step(slot)
            assert (done, cut) == (done_b, cut_b)
            if done or cut:
                break


def test_the_checkers_of_gymnasium_and_stable_baselines3_pass() -> None:
    from gymnasium.utils.env_checker import check_env as gym_check

    gym_check(_menu(), skip_render_check=True)
    sb3 = pytest.importorskip("stable_baselines3.common.env_checker")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sb3.check_env(_menu())


def test_maskable_ppo_trains_on_the_menu() -> None:
    contrib = pytest.importorskip("sb3_contrib")
    env = _menu(max_steps=6)
    model = contrib.MaskablePPO("MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=1, seed=0, verbose=0)
    model.learn(total_timesteps=128)
    obs, info = env.reset(seed=2)
    action, _ = model.predict(obs, action_masks=env.action_masks(), deterministic=True)
    assert info["action_mask"][int(action)]


def test_torchrl_checks_the_specs_and_its_actions_reach_the_world() -> None:
    pytest.importorskip("torchrl")
    import torch
    from torchrl.envs import GymWrapper
    from torchrl.envs.utils import check_env_specs

    menu = _menu()
    env = GymWrapper(menu)
    check_env_specs(env)
    env.reset()
    valid = int(np.flatnonzero(menu.action_masks())[0])
    tool = menu.menu[valid].tool
    action = torch.nn.functional.one_hot(torch.tensor(valid), menu.slots)
    env.step(env.reset().set("action", action))
    last = menu.unwrapped.episode.session.events[-1]  # type: ignore[attr-defined]
    assert last.tool == tool and last.ok


def test_supersuit_wrappers_apply() -> None:
    ss = pytest.importorskip("supersuit")
    stacked = ss.frame_stack_v1(_menu(), 2)
    obs, _ = stacked.reset(seed=1)
    assert obs.shape == (2 * _menu().observation_space.shape[0],)  # type: ignore[index]
    cast = ss.dtype_v0(_menu(), np.float16)
    assert cast.reset(seed=1)[0].dtype == np.float16


@pytest.mark.parametrize(
    "action",
    [3, np.int64(3), np.array(3), np.array([3]), np.array(3, dtype=np.int32)],
    ids=["int", "np.int64", "0-d array", "1-element array", "0-d int32"],
)
def test_every_integer_form_names_the_same_slot(action: Any) -> None:
    assert _slot(action) == 3
    name, _ = decode_action({"tool_name": action, "tool_args": "{}"}, ("a", "b", "c", "d"))
    assert name == "d"


def test_a_torch_tensor_names_a_slot_and_a_float_does_not() -> None:
    torch = pytest.importorskip("torch")
    assert _slot(torch.tensor(5)) == 5
    assert _slot(2.0) == -1 and _slot("3") == -1 and _slot(True) == -1


def test_an_empty_slot_is_an_error_observation_not_a_crash() -> None:
    env = _menu()
    env.reset(seed=4)
    empty = env.slots - 1
    assert not env.action_masks()[empty]
    _, reward, done, cut, _ = env.step(empty)
    events = env.unwrapped.episode.session.events  # type: ignore[attr-defined]
    assert not events[-1].ok and reward <= 0 and not done and not cut


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_vector_envs_keep_text_observations_intact(mode: str) -> None:
    envs = gym.make_vec("mirrorworld/Helpdesk-v0", num_envs=2, vectorization_mode=mode)
    try:
        obs, _ = envs.reset(seed=[5, 9])
        single = MirrorEnv("helpdesk")
        for i, seed in enumerate((5, 9)):
            assert obs["instruction"][i] == single.reset(seed=seed)[0]["instruction"]
        obs, *_ = envs.step({"tool_name": np.array([0, 0]), "tool_args": ("{}", "{}")})
        assert all(json.loads(obs["last_result"][i])["policy"] for i in range(2))
    finally:
        envs.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_menu_vectorises(mode: str) -> None:
    make = [lambda: _menu(max_steps=4), lambda: _menu(max_steps=4)]
    envs = gym.vector.SyncVectorEnv(make) if mode == "sync" else gym.vector.AsyncVectorEnv(make)
    try:
        obs, info = envs.reset(seed=1)
        assert obs.shape == (2, _menu().observation_space.shape[0])  # type: ignore[index]
        for _ in range(6):
            actions = np.array([int(np.flatnonzero(m)[0]) for m in info["action_mask"]])
            obs, _, _, _, info = envs.step(actions)
        assert np.isfinite(obs).all()
    finally:
        envs.close()


EXPRESSIBLE = [
    "refund_damaged",
    "refund_with_approval",
    "deny_refund",
    "cancel_order",
    "sla_escalation",
    "merge_duplicates",
    "update_email",
    "kb_answer",
]


@pytest.mark.parametrize("family", EXPRESSIBLE)
def test_the_menu_can_express_the_gold(family: str) -> None:
    env = ActionMenu(MirrorEnv("helpdesk", split="test", max_steps=16))
    world = env.unwrapped.world  # type: ignore[attr-defined]
    passed = [demonstrate(env, world.task(family, seed)) is not None for seed in range(8)]
    assert sum(passed) >= 7, passed


def test_an_id_a_record_lacks_comes_from_the_record_about_the_case() -> None:
    """Of a customer's tickets, the merge target offered first is the one about the order the customer names."""
    from mirrorworld.envs.menu import Seen, menu_calls

    world = _menu().world
    seen = Seen()
    seen.start('Ticket #802. Customer: "I opened two tickets about order #886. Can you combine them?"')
    tickets = [
        {"id": 801, "subject": "Where is order #886?", "status": "open"},
        {"id": 640, "subject": "Billing question", "status": "open"},
        {"id": 655, "subject": "Password reset", "status": "open"},
    ]
    seen.add(1, json.dumps({"tickets": tickets}))
    merges = [c.args for c, _ in menu_calls(world.tools, seen, world.menu_macros(), 200) if c.tool == "merge_tickets"]
    assert merges[0] == {"source_ticket_id": 802, "target_ticket_id": 801}, merges


def test_what_another_party_said_fills_ids_and_codes_but_dates_do_not() -> None:
    from mirrorworld.core.registry import default
    from mirrorworld.envs.menu import Seen, menu_calls

    world = default.get("helpdesk_team")
    seen = Seen()
    seen.start('Live chat (ticket #801). Customer: "Hi, this is Ann (ann@x.example). Change my email to a@y.example."')
    seen.add(1, json.dumps({"ticket": {"id": 801, "customer_id": 276}}))
    said = {"id": 4, "from": "customer", "body": "#526", "at": "2026-03-16T09:04:00Z"}
    seen.add(2, json.dumps(said), spoken=True)
    seen.add(3, json.dumps({**said, "id": 5, "body": "Got it - the code is 758268."}), spoken=True)
    calls = [(c.tool, c.args) for c, _ in menu_calls(world.tools, seen, world.menu_macros(), 400)]
    assert ("get_order", {"order_id": 526}) in calls
    assert ("verify_code", {"customer_id": 276, "code": "758268"}) in calls
    assert not any(a.get("customer_id") in (758268, 2026) for _, a in calls)  # a code, a date: no ids
    assert not any(a.get("code") == "2026" for _, a in calls)
    # a result's own texts are the world's, not a party's words: they name no codes
    quiet = Seen()
    quiet.start("Ticket #801.")
    quiet.add(1, json.dumps({"ticket": {"id": 801, "customer_id": 276, "subject": "code 758268"}}))
    assert not any(c.tool == "verify_code" for c, _ in menu_calls(world.tools, quiet, world.menu_macros(), 400))


def test_a_write_that_succeeded_is_not_offered_again_on_the_same_records() -> None:
    env = ActionMenu(MirrorEnv("helpdesk", split="test", max_steps=10))
    world = env.unwrapped.world  # type: ignore[attr-defined]
    task = world.task("refund_damaged", 3)
    gold = {c.tool: c.args for c in task.gold}
    env.reset(options={"task": task})

    def take(tool: str, **args: Any) -> None:
        slot = next(
            i for i, c in enumerate(env.menu) if c.tool == tool and all(c.args.get(k) == v for k, v in args.items())
        )
        env.step(slot)

    take("get_order", order_id=gold["issue_refund"]["order_id"])
    line = gold["issue_refund"]["line_id"]
    assert sum(c.tool == "issue_refund" and c.args["line_id"] == line for c in env.menu) > 1
    take("issue_refund", line_id=line, reason="damaged")
    assert not any(c.tool == "issue_refund" and c.args["line_id"] == line for c in env.menu)
    assert any(c.tool == "respond" for c in env.menu)


@pytest.mark.parametrize(
    "said",
    [
        '{"body": "#99999999999999999999 order #1234567890123 code 0000000000000"}',
        '{"body": ["#5", {"body": "ticket 7"}], "from": true, "at": "2026-01-01"}',
        '[1, 2, "#3"]',
        '"#526"',
        "not json at all #526",
        '{"error": {"code": "x"}, "body": "#526"}',
        '{"body": "' + "#1 " * 5000 + '"}',
    ],
)
def test_whatever_another_party_sends_the_menu_stays_well_formed(said: str) -> None:
    from mirrorworld.core.registry import default
    from mirrorworld.envs.menu import Menu

    world = default.get("helpdesk_team")
    menu = Menu(world.tools, world.menu_macros(), 48, 12)
    menu.start('Live chat (ticket #801). Customer: "Hi (ann@x.example), my order is broken."')
    menu.note(said)
    menu.refresh(over=False)
    features = menu.features()
    assert features.shape == (menu.layout.size,) and np.isfinite(features).all()
    assert len(menu.calls) <= 48 and menu.mask().any()
    for call in menu.calls:
        json.dumps(call.args)  # every argument is plain JSON
        assert all(not isinstance(v, int) or abs(v) < 10**12 for v in call.args.values())
