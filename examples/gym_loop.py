"""A Gymnasium loop on the helpdesk world, from ``gym.make`` to the verdict, as you would first write one.

Importing ``mirrorworld`` registers every installed world as a Gymnasium id
(``mirrorworld/Helpdesk-v0``). The loop resets onto a task of the test split,
steps it with ``{"tool_name": index, "tool_args": json}`` actions, prints each
step (the call, an excerpt of the result the agent got, the reward), then the
verdict the env hands back in ``info["verdict"]`` on the step that ends the
episode, gate by gate with its checks; the gold episode then prints
``env.render()`` (``render_mode="ansi"``: the conversation so far, safe to print).
That is the first task of each policy; the others get one line each, and the
run ends with each policy's success rate.

Two policies play the same tasks:

* ``gold``: a hand-written policy that plays the task's gold solution. It reads
  the task from ``env.unwrapped.episode`` (privileged: a real agent sees only
  the observation), so every episode passes;
* ``random``: ``env.action_space.sample()``, a random tool with random text as
  its arguments. Every call is an error observation (``invalid_json``), never an
  exception; the episode runs out of steps and fails.

    python examples/gym_loop.py                 # 9 test tasks (one per family) per policy
    python examples/gym_loop.py --episodes 18
    python examples/gym_loop.py --smoke         # one task per policy, as CI runs it

Needs nothing beyond the base install.
"""

from __future__ import annotations

import argparse
import json
import warnings
from collections.abc import Callable
from typing import Any

import gymnasium as gym

import mirrorworld  # noqa: F401 - registers mirrorworld/Helpdesk-v0 and the other worlds' ids
from mirrorworld.inert import inert

# Gymnasium calls an id "out of date" when a higher version is registered under the same name:
# Helpdesk-v1 is the helpdesk after a release (a drift scenario, see mirrorworld drift), not a fix of v0.
warnings.filterwarnings("ignore", message=r".*is out of date", category=DeprecationWarning)

Policy = Callable[[gym.Env[Any, Any], dict[str, Any]], dict[str, Any]]


def gold_policy(env: gym.Env[Any, Any], obs: dict[str, Any]) -> dict[str, Any]:
    """The next call of the task's gold solution, as a Gymnasium action."""
    episode = env.unwrapped.episode  # type: ignore[attr-defined]
    gold, made = episode.task.gold, int(obs["step"])
    call = gold[min(made, len(gold) - 1)]
    tools: tuple[str, ...] = env.unwrapped.tool_names  # type: ignore[attr-defined]
    return {"tool_name": tools.index(call.tool), "tool_args": json.dumps(call.args)}


def random_policy(env: gym.Env[Any, Any], obs: dict[str, Any]) -> dict[str, Any]:
    """Any action of the action space, uniformly: a random tool, random text as its arguments."""
    return env.action_space.sample()  # type: ignore[no-any-return]


def show(text: Any, limit: int) -> str:
    """Untrusted text (what an agent sent, what a tool returned) as one line, inert and bounded."""
    return inert(text, limit, lines=False)


def print_verdict(verdict: dict[str, Any], total: float) -> None:
    print(
        f"  verdict: {'PASSED' if verdict['passed'] else 'FAILED'}, score {verdict['score']:.2f}, return {total:+.3f}"
    )
    for name, gate in verdict["breakdown"].items():
        if name in ("process", "guards"):
            continue
        checks = ", ".join(f"{show(c, 60)} {'ok' if ok else 'FAILED'}" for c, ok in gate.get("checks", {}).items())
        print(f"    {name:<14} {'pass' if gate['passed'] else 'FAIL'}" + (f"  checks: {checks}" if checks else ""))
        for line in gate["evidence"][:2]:
            print(f"      - {show(line, 110)}")
    guards = verdict["breakdown"]["guards"]
    print(
        f"    guards: {guards['calls']} calls, {guards['refused_calls']} refused, {guards['repeated_calls']} repeated"
    )


def play(env: gym.Env[Any, Any], policy: Policy, seed: int, *, detail: bool) -> bool:
    """One episode on task ``seed`` of the split, step by step with ``detail``, else in one line; whether it passed."""
    obs, info = env.reset(seed=seed)
    env.action_space.seed(seed)
    task_id = info["task_id"]
    if detail:
        print(f"\n{task_id}: {show(obs['instruction'], 110)}")
    tools: tuple[str, ...] = env.unwrapped.tool_names  # type: ignore[attr-defined]
    total, done = 0.0, False
    while not done:
        action = policy(env, obs)
        obs, reward, terminated, truncated, info = env.step(action)
        total += float(reward)
        done = terminated or truncated
        if detail:
            call = f"{tools[action['tool_name']]} {show(action['tool_args'], 60)}"
            print(f"  {int(obs['step']):>2} {call:<80} reward {float(reward):+.3f}")
            print(f"       -> {show(obs['last_result'], 100)}")
    verdict = info["verdict"]
    if not detail:
        failed = [name for name, gate in verdict["breakdown"].items() if not gate.get("passed", True)]
        mark = "PASSED" if verdict["passed"] else f"FAILED ({', '.join(failed)})"
        print(f"{task_id:<26} {int(obs['step']):>2} steps  return {total:+.3f}  {mark}")
        return bool(verdict["passed"])
    if truncated and not terminated:
        print(f"  truncated at max_steps={env.unwrapped.max_steps} without a final message")  # type: ignore[attr-defined]
    print_verdict(verdict, total)
    if policy is gold_policy:
        print("  -- env.render() --")
        print("  " + env.render().rstrip().replace("\n", "\n  "))  # type: ignore[union-attr]
    print()
    return bool(verdict["passed"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=9, help="test tasks per policy (seeds 0..N-1; families cycle)")
    parser.add_argument("--max-steps", type=int, default=12)
    parser.add_argument("--smoke", action="store_true", help="one task per policy")
    args = parser.parse_args()
    episodes = 1 if args.smoke else args.episodes
    env = gym.make("mirrorworld/Helpdesk-v0", split="test", max_steps=args.max_steps, render_mode="ansi")
    passed: dict[str, int] = {}
    for name, policy in (("gold", gold_policy), ("random", random_policy)):
        print(f"\n=== {name} policy ===")
        passed[name] = sum(play(env, policy, seed, detail=seed == 0) for seed in range(episodes))
    env.close()
    print()
    for name, n in passed.items():
        print(f"{name:>6}: {n}/{episodes} passed ({n / episodes:.0%})")


if __name__ == "__main__":
    main()
