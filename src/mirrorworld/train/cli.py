"""``mirrorworld train``: train a policy on a world's action menu and measure it on held-out tasks.

Writes, under ``--out``:

* ``results.json`` — the arguments, the learning history, the per-family test
  table (trained, random, oracle) and the ``audit-run`` summary of the trained
  policy's test episodes;
* ``table.md`` — the table, for a README;
* ``curve.png`` — the learning curve (with matplotlib installed);
* ``test_episodes.jsonl`` — the trained policy's test episodes, as
  ``mirrorworld audit-run --world W`` reads them;
* ``policy.pt`` — the trained network's weights.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from mirrorworld.errors import MirrorworldError
from mirrorworld.options import registry_of, world_option
from mirrorworld.progress import progress_bar, wants_progress

__all__ = ["register"]


def register(sub: Any, registry: Any = None) -> dict[str, Any]:
    """Add ``train`` to an argparse subparsers object; return its handler."""
    t = sub.add_parser("train", help="train a PPO policy on a world's action menu, evaluate it on the test split")
    world_option(t, registry)
    t.add_argument("--algo", choices=("ppo",), default="ppo")
    t.add_argument("--families", default=None, help="comma-separated task families (default: all)")
    t.add_argument("--minutes", type=float, default=15.0, help="wall-clock budget for training")
    t.add_argument("--steps", type=int, default=400_000, help="environment steps at most")
    t.add_argument("--reward", choices=("shaped", "sparse"), default="shaped")
    t.add_argument(
        "--warm-start",
        type=int,
        default=1000,
        metavar="N",
        help="clone demonstrations of N train tasks before PPO (0: PPO from scratch)",
    )
    t.add_argument("--episodes", type=int, default=30, help="test tasks per family")
    t.add_argument("--seed", type=int, default=1)
    t.add_argument("--out", default="runs/train", help="folder for the results, curve and episodes")
    t.add_argument("--json", action="store_true", help="print the results as JSON")
    t.add_argument("--no-progress", action="store_true")
    return {"train": cmd_train}


def _table_md(table: dict[str, dict[str, float]]) -> str:
    lines = ["| family | trained | random | oracle |", "|---|---|---|---|"]
    for family, row in table.items():
        lines.append(f"| {family} | {row['trained']:.0%} | {row['random']:.0%} | {row['oracle']:.0%} |")
    mean = {k: sum(r[k] for r in table.values()) / max(len(table), 1) for k in ("trained", "random", "oracle")}
    lines.append(f"| **mean** | **{mean['trained']:.0%}** | {mean['random']:.0%} | {mean['oracle']:.0%} |")
    return "\n".join(lines) + "\n"


def _plot(history: dict[str, Any], path: Path, title: str) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=120)
    ax.plot(history["steps"], history["heldout_pass"], marker="o", label="pass rate, held-out train tasks")
    returns = [float("nan") if r is None else r for r in history["train_return"]]
    ax.plot(history["steps"], returns, marker=".", label="mean episode return (rollouts)")
    ax.set_xlabel("environment steps")
    ax.set_ylim(-0.1, 1.05)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def cmd_train(args: argparse.Namespace) -> int:
    try:
        import torch
    except ImportError:
        raise MirrorworldError("training needs torch: pip install 'mirrorworld[train]'") from None
    from mirrorworld.audit.runlog import audit_run
    from mirrorworld.train.evaluate import evaluate, trajectories_jsonl
    from mirrorworld.train.ppo import Args, families_of, train

    registry = registry_of(args)
    world = registry.get(args.world)
    families = tuple(f.strip() for f in args.families.split(",") if f.strip()) if args.families else ()
    for f in families:
        world.family(f)
    if args.minutes <= 0 or args.steps <= 0 or args.episodes <= 0 or args.warm_start < 0:
        raise MirrorworldError("--minutes, --steps and --episodes must be positive, --warm-start not negative")
    run = Args(
        world=registry.spec(args.world).name,
        families=families,
        total_steps=args.steps,
        minutes=args.minutes,
        reward=args.reward,
        seed=args.seed,
        warm_start=args.warm_start,
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    show = wants_progress(json_output=args.json, disabled=args.no_progress)
    with progress_bar("training", run.total_steps, enabled=show) as update:
        policy, history = train(run, progress=lambda done, total, _msg: update(done, total))
    covered = families_of(run)
    with progress_bar("evaluating on the test split", len(covered), enabled=show) as update:
        table: dict[str, dict[str, float]] = {}
        played: list[dict[str, Any]] = []
        for i, family in enumerate(covered):
            part, eps = evaluate(policy, run, [family], episodes=args.episodes, seed=args.seed)
            table.update(part)
            played += eps
            update(i + 1, len(covered))
    episodes_path = trajectories_jsonl(played, out / "test_episodes.jsonl")
    audit = audit_run(episodes_path, world)
    torch.save(policy.state_dict(), out / "policy.pt")
    (out / "table.md").write_text(_table_md(table), encoding="utf-8")
    curve = _plot(history.to_dict(), out / "curve.png", f"PPO on {world.id} action menu")
    results = {
        "world": world.id,
        "world_hash": world.content_hash,
        "args": dict(vars(run)),
        "history": history.to_dict(),
        "test": table,
        "audit": {k: audit[k] for k in ("episodes", "flagged", "flagged_but_passed", "by_rule")},
        "files": {"curve": str(out / "curve.png") if curve else None, "episodes": str(episodes_path)},
    }
    (out / "results.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(_table_md(table), end="")
    print(
        f"trained {history.wall_s:.0f} s, {history.steps[-1] if history.steps else 0} steps, "
        f"{history.episodes} episodes; audit-run flagged {audit['flagged']} of {audit['episodes']} test episodes"
    )
    print(f"results in {out}/")
    return 0
