"""Evaluate a model behind an OpenAI-compatible endpoint, end to end and offline.

The endpoint here is the bundled scripted server (:mod:`mirrorworld.agents.endpoint`):
a stand-in model that plays each task's gold solution, so the run passes, and
that can be told to fail the way real endpoints fail. Point ``--base-url`` at
your own server (vLLM, SGLang, llama.cpp, a hosted API) and ``--model`` at its
model to evaluate a real one: the command is the same.

    python examples/llm_eval.py                   # 18 helpdesk tasks, 4 at a time
    python examples/llm_eval.py --faults          # two tasks hit an endpoint failure; resume finishes the run
    python examples/llm_eval.py --smoke           # as CI runs it

What it shows: ``mirrorworld run --agent openai`` (the official SDK, retries,
concurrency), the summary with infrastructure errors counted apart from graded
episodes, the run file's record of the model, endpoint and token usage, and
``--resume``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from mirrorworld import make_world
from mirrorworld.agents.endpoint import ScriptedEndpoint
from mirrorworld.run import RunFile, plan_episodes


def mirrorworld(*args: str) -> int:
    """Run the ``mirrorworld`` command as a user would (the same Python, so the same installation)."""
    print("$ mirrorworld " + " ".join(args), flush=True)
    return subprocess.run([sys.executable, "-m", "mirrorworld", *args], check=False).returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=18)
    parser.add_argument("--faults", action="store_true", help="fail two tasks' first requests for good (HTTP 400, 500)")
    parser.add_argument("--smoke", action="store_true", help="6 tasks, with the faults")
    ns = parser.parse_args()
    episodes, faults = (6, True) if ns.smoke else (ns.episodes, ns.faults)
    world = make_world("helpdesk")
    broken: dict[str, str] = {}
    if faults:
        ids = [world.task_at(p.task).id for p in plan_episodes(world, episodes=episodes, split="test")]
        broken = {ids[0]: "http400", ids[1]: "http500"}
    out = Path(tempfile.mkdtemp(prefix="mirrorworld-llm-eval-")) / "run.sqlite"
    with ScriptedEndpoint.for_run(world, episodes=episodes, faults=broken, delay_s=0.05) as endpoint:
        common = ["--no-progress", "--timeout", "10", "--retries", "1"]
        code = mirrorworld(
            "run",
            "--world",
            "helpdesk",
            "--agent",
            "openai",
            "--base-url",
            endpoint.url,
            "--model",
            "scripted",
            "--episodes",
            str(episodes),
            "--concurrency",
            "4",
            "--out",
            str(out),
            *common,
        )
        print(f"exit status {code}\n")
        if broken:
            endpoint.faults.clear()  # the endpoint is healthy again: finish the run where it stopped
            code = mirrorworld("run", "--resume", str(out), "--base-url", endpoint.url, *common)
            print(f"exit status {code}\n")
    with RunFile.open(out) as run:
        meta = run.meta
    config, usage = meta["agent_config"], meta["summary"].get("usage", {})
    print(f"model {config['model']} at {config['base_url']} ({config['sdk']}), sampling {config['sampling']}")
    print(f"{usage.get('requests', 0)} requests, {usage.get('total_tokens', 0)} tokens; run file {out}")
    if code != 0:
        sys.exit(code)


if __name__ == "__main__":
    main()
