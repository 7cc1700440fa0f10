"""The progress bar long commands draw on stderr (and never on a pipe they report JSON to)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["progress_bar", "wants_progress"]

Update = Callable[[int, "int | None"], None]
"""``update(done, total)``: how far the work is (``total`` None while unknown)."""


def wants_progress(*, json_output: bool, disabled: bool = False) -> bool:
    """Draw a bar unless told not to, or unless JSON goes to a terminal-less stderr too."""
    return not disabled and (not json_output or sys.stderr.isatty())


@contextmanager
def progress_bar(description: str, total: int | None, *, enabled: bool) -> Iterator[Update]:
    """A transient bar (done/total, time left) on stderr; yields its ``update`` function."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
        disable=not enabled,
    ) as bar:
        job = bar.add_task(description, total=total)

        def update(done: int, new_total: int | None = total) -> None:
            bar.update(job, completed=done, total=new_total)

        yield update
