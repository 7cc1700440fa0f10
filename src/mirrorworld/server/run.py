"""Running the server: in the foreground (``mirrorworld serve``) or on a background thread.

:func:`serve` runs uvicorn in the calling thread until SIGINT/SIGTERM, then
shuts down gracefully: it stops accepting connections, lets in-flight requests
finish (up to ``graceful_timeout_s``), closes WebSocket connections and closes
every session.

:class:`BackgroundServer` runs the same server on a daemon thread bound to an
ephemeral loopback port — for tests and notebooks::

    with BackgroundServer() as server, Client(server.url) as client:
        session = client.create("helpdesk", family="refund_damaged", seed=0)
        result = session.step("get_policy")

Leaving the ``with`` block shuts the server down the same graceful way and
joins its thread, so nothing is left running.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import socket
import sys
import threading
from collections.abc import Callable, Coroutine
from dataclasses import replace
from types import TracebackType
from typing import Any

import uvicorn

from mirrorworld.core.registry import Registry
from mirrorworld.errors import MirrorworldError
from mirrorworld.server.app import create_app
from mirrorworld.server.config import ServerConfig
from mirrorworld.server.protocols import http_protocol, ws_protocol
from mirrorworld.server.wire import inert

__all__ = ["BackgroundServer", "configure_logging", "run_async", "serve", "settle_heap", "uvicorn_config"]


def run_async(main: Coroutine[Any, Any, None]) -> None:
    """Run ``main`` to completion on a new event loop (uvloop's when it is installed)."""
    factory: Callable[[], asyncio.AbstractEventLoop] | None = None
    try:
        import uvloop

        factory = uvloop.new_event_loop
    except ImportError:
        pass
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(main)


class _InertFormatter(logging.Formatter):
    """Writes each record's message inert (see :func:`~mirrorworld.server.wire.inert`); a traceback follows as is.

    The server makes the request data it logs inert where it logs it; this
    keeps any message of the process to one line all the same.
    """

    def formatMessage(self, record: logging.LogRecord) -> str:
        return inert(super().formatMessage(record), limit=8192)


def configure_logging(level: int = logging.INFO) -> None:
    """One line per record on stderr: time, level, logger, message (made inert)."""
    logger = logging.getLogger("mirrorworld.server")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_InertFormatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False
    logger.setLevel(level)


def uvicorn_config(app: Any, config: ServerConfig, **overrides: Any) -> uvicorn.Config:
    """The uvicorn settings the server runs with (one worker; our own access log).

    The HTTP and WebSocket protocols are :mod:`mirrorworld.server.protocols`':
    request heads bounded in size and time whichever parser runs, and a clean
    ``1007`` for a text message that is not UTF-8.
    """
    settings: dict[str, Any] = {
        "http": http_protocol(config),
        "ws": ws_protocol(config),
        "host": config.host,
        "port": config.port,
        "access_log": False,
        "log_level": "warning",
        "ws_max_size": config.max_body_bytes,
        "ws_ping_interval": 20.0,
        "ws_ping_timeout": 20.0,
        "timeout_graceful_shutdown": config.graceful_timeout_s,
        "timeout_keep_alive": 30,
        "lifespan": "on",
        "proxy_headers": False,
        "h11_max_incomplete_event_size": config.max_head_bytes,
    }
    settings.update(overrides)
    return uvicorn.Config(app, **settings)


def settle_heap(app: Any) -> None:
    """Build the served worlds now and exempt what startup made from the cycle collector.

    For a process that is the server (``mirrorworld serve``): the app, the
    worlds' images and caches live as long as it does, so ``gc.freeze`` keeps
    every collection of a step's garbage from walking them again.
    """
    manager = getattr(app, "manager", None)
    if manager is not None:
        manager.warm()
    gc.collect()
    gc.freeze()


def serve(config: ServerConfig, registry: Registry | None = None) -> None:
    """Serve until interrupted (see the module docstring)."""
    config = config.checked()
    configure_logging()
    app = create_app(config, registry)
    settle_heap(app)
    server = uvicorn.Server(uvicorn_config(app, config))
    logging.getLogger("mirrorworld.server").info("listening on http://%s:%d", config.host, config.port)
    server.run()
    if not server.started:
        raise MirrorworldError(f"could not serve on {config.host}:{config.port} (is the port in use?)")


class BackgroundServer:
    """The server on a daemon thread and an ephemeral port (see the module docstring).

    ``config.port`` is ignored: the port is picked by the OS and is in ``port``.
    """

    def __init__(self, config: ServerConfig | None = None, registry: Registry | None = None) -> None:
        config = config or ServerConfig()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((config.host, 0))
        self.port: int = self._sock.getsockname()[1]
        self.config = replace(config, port=self.port)
        self.app = create_app(self.config, registry)
        self.manager = self.app.manager  # type: ignore[attr-defined]
        self._server = uvicorn.Server(uvicorn_config(self.app, self.config))
        self._server.install_signal_handlers = lambda: None  # type: ignore[attr-defined,method-assign]
        self._thread = threading.Thread(target=self._run, name=f"mirrorworld-server-{self.port}", daemon=True)
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://{self.config.host}:{self.port}"

    def _run(self) -> None:
        try:
            run_async(self._server.serve(sockets=[self._sock]))
        except BaseException as err:  # reported by start()/stop()
            self._error = err

    def start(self) -> BackgroundServer:
        self._thread.start()
        while not self._server.started:
            if not self._thread.is_alive():
                raise MirrorworldError(f"the server did not start: {self._error!r}")
            self._thread.join(0.005)
        return self

    def stop(self) -> None:
        """Shut down gracefully and join the thread."""
        self._server.should_exit = True
        self._thread.join(timeout=self.config.graceful_timeout_s + 10)
        self._sock.close()

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
