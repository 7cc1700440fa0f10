"""Connecting to Ray: a local cluster started for the run, or a running one by its address.

Ray is an optional extra (``pip install 'mirrorworld[ray]'``): nothing in
:mod:`mirrorworld.distributed` imports it at module level, and
:func:`require_ray` turns its absence into one readable
:class:`~mirrorworld.errors.MirrorworldError`.

Addresses, as ``mirrorworld run --ray [ADDRESS]`` takes them:

* none (``--ray`` alone, ``None`` or ``"local"``): start a Ray instance in this
  process's machine with ``num_cpus=workers`` (or every CPU), stopped when the
  run ends;
* ``auto``: the cluster this machine belongs to (``ray start`` ran here);
* ``HOST:PORT``: the head node's GCS (``ray start --head`` prints it, port 6379);
* ``ray://HOST:10001``: Ray Client (needs ``ray[client]``).

A ``HOST:PORT`` is probed with one TCP connection first: Ray itself retries an
unreachable GCS for minutes, and a typo deserves an answer in seconds. When
Ray is already initialised in this process (a notebook, a test's cluster),
:func:`connected` uses that connection and leaves it open.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from mirrorworld.errors import MirrorworldError

__all__ = ["LOCAL", "connected", "last_line", "probe_address", "require_ray"]

LOCAL = "local"
"""The address that means: start a local Ray instance for the run."""

_PROBE_TIMEOUT_S = 5.0


def require_ray() -> ModuleType:
    """The ``ray`` module; a one-line error naming the extra when it is not installed."""
    try:
        import ray
    except ImportError:
        raise MirrorworldError("--ray needs Ray, which is not installed: pip install 'mirrorworld[ray]'") from None
    return ray


def last_line(err: BaseException) -> str:
    """The last non-blank line of an error's text (Ray's errors end with their cause), bounded."""
    lines = [line for line in str(err).splitlines() if line.strip()]
    return (lines[-1].strip() if lines else type(err).__name__)[:300]


def probe_address(address: str, timeout: float = _PROBE_TIMEOUT_S) -> None:
    """Raise a one-line error unless something accepts TCP connections at ``HOST:PORT``.

    ``auto`` and ``ray://`` addresses are left to Ray, which answers them quickly.
    """
    if address == "auto" or address.startswith("ray://"):
        return
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise MirrorworldError(f"a Ray address is 'auto', HOST:PORT or ray://HOST:PORT, not {address[:200]!r}")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise MirrorworldError(f"no Ray cluster at {address[:200]}: {reason}") from None


@contextmanager
def connected(address: str | None = None, *, workers: int | None = None) -> Iterator[ModuleType]:
    """Ray connected for the duration of the block; yields the ``ray`` module.

    ``address`` is one of the forms in the module docstring. A local instance
    gets ``num_cpus=workers`` (so that many one-CPU actors fit); it, and a
    connection this function opened, are shut down at the end of the block.
    Errors (Ray missing, nothing at the address) are one-line
    :class:`~mirrorworld.errors.MirrorworldError`.
    """
    ray = require_ray()
    if ray.is_initialized():
        yield ray
        return
    options: dict[str, object] = {
        "include_dashboard": False,
        "log_to_driver": False,
        "logging_level": logging.ERROR,
        "configure_logging": True,
    }
    local = address in (None, "", LOCAL)
    if local:
        options["num_cpus"] = workers if workers is not None else os.cpu_count() or 1
    else:
        assert address is not None
        probe_address(address)
        options["address"] = address
    try:
        ray.init(**options)
    except (ConnectionError, ValueError, RuntimeError) as err:
        where = "start a local Ray instance" if local else f"connect to Ray at {address!s:.200}"
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise MirrorworldError(f"cannot {where}: {first[:300]}") from None
    try:
        yield ray
    finally:
        ray.shutdown()
