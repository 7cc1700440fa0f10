"""Proximal policy optimisation on a world's action menu, in one file, read top to bottom.

The shape of a CleanRL script: an :class:`Args` dataclass, the environments,
the agent network, the rollout, the update, the evaluation. It trains a
policy over :class:`~mirrorworld.envs.menu.ActionMenu` (a masked ``Discrete``
action over candidate calls, numeric features) on the **train** split and
evaluates it on the **test** split, whose task seeds it never saw.

The network scores every menu slot with one shared MLP over the slot's
features and an embedding of the global features, plus a bilinear match
between the slot's features and the global embedding (a pointer network, so
a call is judged by what it is, not by where the menu put it); the value head
reads the global embedding and the mean slot embedding. Invalid slots are
masked to ``-inf`` before the softmax.

The reward is the environment's: the verdict's score at the end, plus, with
``reward="shaped"``, the potential-based process reward discounted with the
same ``gamma`` the learner uses (:mod:`mirrorworld.verify.process`), so the
return of an episode is its score whatever the shaping.

Needs ``torch`` (the ``train`` extra).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

from mirrorworld.envs.gymnasium import MirrorEnv
from mirrorworld.envs.menu import ActionMenu, call_args

__all__ = ["Args", "History", "MenuPolicy", "make_env", "train"]


@dataclass
class Args:
    """Everything a run depends on."""

    world: str = "helpdesk"
    families: tuple[str, ...] = ()
    """Task families to train on (empty: all of the world's)."""
    total_steps: int = 200_000
    """Environment steps in all."""
    minutes: float = 15.0
    """Wall-clock budget: training stops at whichever of this and ``total_steps`` comes first."""
    num_envs: int = 8
    num_steps: int = 64
    """Steps per environment per rollout."""
    max_steps: int = 10
    """The environment's own step budget per episode."""
    slots: int = 48
    reward: Literal["shaped", "sparse"] = "shaped"
    gamma: float = 0.99
    gae_lambda: float = 0.95
    learning_rate: float = 5e-4
    update_epochs: int = 4
    num_minibatches: int = 4
    clip_coef: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    hidden: int = 128
    warm_start: int = 0
    """Train-split tasks whose gold, played through the menu, warm-start the policy by behaviour cloning
    (:mod:`mirrorworld.train.demos`; 0: PPO from scratch)."""
    warm_epochs: int = 60
    seed: int = 1
    torch_threads: int = 2
    eval_every: int = 0
    """Rollouts between evaluations on held-out train tasks for the learning curve (0: eight points in all)."""
    curve_episodes: int = 36


def make_env(args: Args, split: Literal["train", "test"] = "train") -> ActionMenu:
    """One environment of the run: the world's Gymnasium env on ``split`` behind an action menu."""
    base = MirrorEnv(
        args.world,
        split=split,
        families=args.families or None,
        max_steps=args.max_steps,
        reward=args.reward,
        gamma=args.gamma,
    )
    return ActionMenu(base, slots=args.slots)


# -- the agent ------------------------------------------------------------------------------


def _torch() -> Any:
    try:
        import torch
    except ImportError as e:  # pragma: no cover - exercised where torch is missing
        raise ImportError("training needs torch: pip install 'mirrorworld[train]'") from e
    return torch


def MenuPolicy(env: ActionMenu, hidden: int = 128) -> Any:
    """The pointer-style actor-critic over ``env``'s features (a ``torch.nn.Module``)."""
    torch = _torch()
    nn = torch.nn
    layout = env.layout
    g_dim = layout.size - layout.slots * layout.per_slot

    class _Policy(nn.Module):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.slots, self.per_slot, self.g_dim = layout.slots, layout.per_slot, g_dim
            self.glob = nn.Sequential(nn.Linear(g_dim, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
            self.slot = nn.Sequential(nn.Linear(layout.per_slot + hidden, hidden), nn.Tanh())
            self.key = nn.Linear(layout.per_slot, hidden)
            self.query = nn.Linear(hidden, hidden)
            self.score = nn.Linear(hidden, 1)
            self.value = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.Tanh(), nn.Linear(hidden, 1))

        def forward(self, x: Any, mask: Any) -> tuple[Any, Any]:
            g = self.glob(x[:, : self.g_dim])
            s = x[:, self.g_dim :].reshape(x.shape[0], self.slots, self.per_slot)
            h = self.slot(torch.cat([s, g.unsqueeze(1).expand(-1, self.slots, -1)], dim=-1))
            # A bilinear term (what the case asks for, against what the call is) and a per-slot score.
            match = (self.key(s) * self.query(g).unsqueeze(1)).sum(-1) / self.query.out_features**0.5
            logits = (self.score(h).squeeze(-1) + match).masked_fill(~mask, -1e9)
            valid = mask.float().unsqueeze(-1)
            pooled = (h * valid).sum(1) / valid.sum(1).clamp(min=1.0)
            return logits, self.value(torch.cat([g, pooled], dim=-1)).squeeze(-1)

    return _Policy()


# -- training -------------------------------------------------------------------------------


@dataclass
class History:
    """What a run measured as it went."""

    steps: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    train_return: list[float | None] = field(default_factory=list)
    """Mean episode return of the rollouts since the last point (None at the first point, before any)."""
    heldout_pass: list[float] = field(default_factory=list)
    """Greedy pass rate on train-split tasks the rollouts did not draw (indices past the training range)."""
    episodes: int = 0
    wall_s: float = 0.0
    demonstrations: int = 0
    """Passing demonstrations the warm start cloned (0: none)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def train(
    args: Args,
    *,
    progress: Callable[[int, int, str], None] | None = None,
) -> tuple[Any, History]:
    """Train a :func:`MenuPolicy` with PPO (see the module docstring); returns it and its :class:`History`."""
    torch = _torch()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.torch_threads)
    rng = np.random.default_rng(args.seed)
    envs = [make_env(args) for _ in range(args.num_envs)]
    heldout = make_env(args)
    policy = MenuPolicy(envs[0], args.hidden)
    optimizer = torch.optim.Adam(policy.parameters(), lr=args.learning_rate, eps=1e-5)
    n, t = args.num_envs, args.num_steps
    dim = envs[0].layout.size
    slots = args.slots
    obs_buf = np.zeros((t, n, dim), dtype=np.float32)
    mask_buf = np.zeros((t, n, slots), dtype=bool)
    act_buf = np.zeros((t, n), dtype=np.int64)
    logp_buf = np.zeros((t, n), dtype=np.float32)
    rew_buf = np.zeros((t, n), dtype=np.float32)
    done_buf = np.zeros((t, n), dtype=np.float32)
    val_buf = np.zeros((t, n), dtype=np.float32)

    train_range = 1 << 20  # rollouts draw task indices below this; held-out curve points use indices above

    def draw() -> int:
        return int(rng.integers(0, train_range))

    obs = np.zeros((n, dim), dtype=np.float32)
    masks = np.zeros((n, slots), dtype=bool)
    for i, env in enumerate(envs):
        o, info = env.reset(seed=draw())
        obs[i], masks[i] = o, info["action_mask"]
    history = History()
    start = time.perf_counter()
    if args.warm_start:
        history.demonstrations = _warm_start(policy, args, rng)
    rollouts = max(1, args.total_steps // (n * t))
    every = args.eval_every or max(1, rollouts // 8)
    period = args.minutes * 60 / 8  # a curve point at least this often, whichever budget ends the run
    returns_since: list[float] = []
    running = np.zeros(n, dtype=np.float64)
    step = 0

    def point(elapsed: float) -> None:
        history.steps.append(step)
        history.seconds.append(round(elapsed, 1))
        history.train_return.append(float(np.mean(returns_since)) if returns_since else None)
        passed = [run_greedy(policy, heldout, seed=train_range + j)[0] for j in range(args.curve_episodes)]
        history.heldout_pass.append(float(np.mean(passed)))
        if progress is not None:
            progress(step, args.total_steps, f"held-out pass {history.heldout_pass[-1]:.0%}")

    point(time.perf_counter() - start)  # where PPO starts: the warm start's policy, or an untrained one
    next_point = time.perf_counter() - start + period
    for rollout in range(1, rollouts + 1):
        for k in range(t):
            obs_buf[k], mask_buf[k] = obs, masks
            with torch.no_grad():
                logits, value = policy(torch.from_numpy(obs), torch.from_numpy(masks))
                dist = torch.distributions.Categorical(logits=logits)
                action = dist.sample()
            act_buf[k] = action.numpy()
            logp_buf[k] = dist.log_prob(action).numpy()
            val_buf[k] = value.numpy()
            for i, env in enumerate(envs):
                o, r, term, trunc, info = env.step(int(act_buf[k, i]))
                rew_buf[k, i] = float(r)
                running[i] += float(r)
                done = term or trunc
                done_buf[k, i] = 1.0 if done else 0.0
                if done:
                    returns_since.append(running[i])
                    running[i] = 0.0
                    history.episodes += 1
                    o, info = env.reset(seed=draw())
                obs[i], masks[i] = o, info["action_mask"]
            step += n
        with torch.no_grad():
            _, next_value = policy(torch.from_numpy(obs), torch.from_numpy(masks))
        advantages = np.zeros((t, n), dtype=np.float32)
        last = np.zeros(n, dtype=np.float32)
        nv = next_value.numpy()
        for k in reversed(range(t)):
            following = nv if k == t - 1 else val_buf[k + 1]
            nonterminal = 1.0 - done_buf[k]
            delta = rew_buf[k] + args.gamma * following * nonterminal - val_buf[k]
            last = delta + args.gamma * args.gae_lambda * nonterminal * last
            advantages[k] = last
        targets = advantages + val_buf
        b_obs = torch.from_numpy(obs_buf.reshape(t * n, dim))
        b_mask = torch.from_numpy(mask_buf.reshape(t * n, slots))
        b_act = torch.from_numpy(act_buf.reshape(-1))
        b_logp = torch.from_numpy(logp_buf.reshape(-1))
        b_adv = torch.from_numpy(advantages.reshape(-1))
        b_ret = torch.from_numpy(targets.reshape(-1))
        size = t * n
        mb = max(1, size // args.num_minibatches)
        for _epoch in range(args.update_epochs):
            order = torch.randperm(size)
            for lo in range(0, size, mb):
                idx = order[lo : lo + mb]
                logits, value = policy(b_obs[idx], b_mask[idx])
                dist = torch.distributions.Categorical(logits=logits)
                logp = dist.log_prob(b_act[idx])
                ratio = (logp - b_logp[idx]).exp()
                adv = b_adv[idx]
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                pg = torch.max(-adv * ratio, -adv * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)).mean()
                v_loss = 0.5 * ((value - b_ret[idx]) ** 2).mean()
                entropy = dist.entropy().mean()
                loss = pg + args.vf_coef * v_loss - args.ent_coef * entropy
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(policy.parameters(), args.max_grad_norm)
                optimizer.step()
        elapsed = time.perf_counter() - start
        out_of_time = elapsed > args.minutes * 60
        if rollout % every == 0 or rollout == rollouts or out_of_time or elapsed >= next_point:
            point(elapsed)
            returns_since = []
            next_point = elapsed + period
        if out_of_time:
            break
    history.wall_s = round(time.perf_counter() - start, 1)
    return policy, history


def _warm_start(policy: Any, args: Args, rng: np.random.Generator) -> int:
    """Behaviour cloning on demonstrations of ``args.warm_start`` train-split tasks; how many passed."""
    torch = _torch()
    from mirrorworld.train.demos import demonstrate

    env = make_env(args)
    world = env.world
    names = list(args.families) or [f.name for f in world.families]
    feats: list[np.ndarray] = []
    masks: list[np.ndarray] = []
    acts: list[int] = []
    kept = 0
    for _ in range(args.warm_start):
        task = world.task_for("train", int(rng.integers(0, 1 << 20)), names)
        demo = demonstrate(env, task)
        if demo is None:
            continue
        kept += 1
        for f, m, a in demo:
            feats.append(f)
            masks.append(m)
            acts.append(a)
    env.close()
    if not acts:
        return 0
    x = torch.from_numpy(np.stack(feats))
    m = torch.from_numpy(np.stack(masks))
    y = torch.tensor(acts)
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3)
    for _epoch in range(args.warm_epochs):
        order = torch.randperm(len(acts))
        for lo in range(0, len(acts), 128):
            idx = order[lo : lo + 128]
            logits, _ = policy(x[idx], m[idx])
            loss = torch.nn.functional.cross_entropy(logits, y[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return kept


# -- acting ---------------------------------------------------------------------------------


def greedy_action(policy: Any, obs: np.ndarray, mask: np.ndarray) -> int:
    """The policy's most likely valid slot."""
    torch = _torch()
    with torch.no_grad():
        logits, _ = policy(torch.from_numpy(obs[None]), torch.from_numpy(mask[None]))
    return int(logits.argmax(-1).item())


def run_greedy(
    policy: Any, env: ActionMenu, *, seed: int | None = None, options: dict[str, Any] | None = None
) -> tuple[bool, list[tuple[str, dict[str, Any]]]]:
    """Play one episode greedily; (passed, the calls made)."""
    obs, info = env.reset(seed=seed, options=options)
    calls: list[tuple[str, dict[str, Any]]] = []
    while True:
        slot = greedy_action(policy, obs, info["action_mask"])
        menu = env.menu
        if 0 <= slot < len(menu):
            calls.append((menu[slot].tool, dict(call_args(menu[slot]))))
        obs, _r, term, trunc, info = env.step(slot)
        if term or trunc:
            verdict = info.get("verdict") or {}
            return bool(verdict.get("passed")), calls


def run_random(env: ActionMenu, rng: np.random.Generator, *, options: dict[str, Any] | None = None) -> bool:
    """Play one episode choosing uniformly among the valid slots; whether it passed."""
    _obs, info = env.reset(options=options)
    while True:
        slot = int(rng.choice(np.flatnonzero(info["action_mask"])))
        _obs, _r, term, trunc, info = env.step(slot)
        if term or trunc:
            return bool((info.get("verdict") or {}).get("passed"))


def families_of(args: Args) -> Sequence[str]:
    """The families a run covers."""
    if args.families:
        return args.families
    from mirrorworld.core.registry import default

    return [f.name for f in default.get(args.world).families]
