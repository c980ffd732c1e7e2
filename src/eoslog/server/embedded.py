"""A real broker in this process, for tests, ``eoslog bench`` and ``eoslog demo``:
``with embedded_broker() as bootstrap: ...``.

The broker runs on its own event loop in a daemon thread, on a free loopback port, with a temporary
data directory (unless one is given). Clients talk to it over real TCP, exactly as to ``eoslog serve``.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator

from eoslog.server.broker import Broker
from eoslog.server.config import BrokerConfig


class EmbeddedBroker:
    def __init__(self, data_dir: Path | None = None, properties: dict[str, str] | None = None,
                 host: str = "127.0.0.1", port: int = 0) -> None:
        self._tempdir: tempfile.TemporaryDirectory | None = None
        if data_dir is None:
            self._tempdir = tempfile.TemporaryDirectory(prefix="eoslog-")
            data_dir = Path(self._tempdir.name)
        self.config = BrokerConfig(data_dir=Path(data_dir), listen_host=host, listen_port=port)
        # Tests want rebalances to start at once; Kafka's 3 s delay only slows them down.
        self.config.group_initial_rebalance_delay_ms = 0
        self.config.apply_properties(properties or {})
        self.broker: Broker | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.startup_seconds = 0.0

    @property
    def bootstrap(self) -> str:
        assert self.broker is not None and self.broker.bound_port is not None
        return f"{self.config.listen_host}:{self.broker.bound_port}"

    def start(self, timeout: float = 30.0) -> str:
        from eoslog.server.run import new_event_loop

        started = time.monotonic()
        ready = threading.Event()
        failure: list[BaseException] = []
        self._loop = new_event_loop()

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            try:
                self.broker = Broker(self.config)
                self._loop.run_until_complete(self.broker.start())
            except BaseException as exc:  # noqa: BLE001 - handed to the starting thread
                failure.append(exc)
                ready.set()
                return
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="eoslog-embedded", daemon=True)
        self._thread.start()
        if not ready.wait(timeout):
            raise TimeoutError(f"embedded broker not ready within {timeout} s")
        if failure:
            raise failure[0]
        self.startup_seconds = time.monotonic() - started
        return self.bootstrap

    def stop(self) -> None:
        if self._loop is None or self.broker is None:
            return
        future = asyncio.run_coroutine_threadsafe(self.broker.stop(), self._loop)
        future.result(timeout=60)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._loop.close()
        self._loop = None
        self.broker = None
        if self._tempdir is not None:
            self._tempdir.cleanup()

    def call(self, fn, *args, timeout: float = 30.0):
        """Runs ``fn(*args)`` on the broker's loop (a coroutine function or a plain one) and returns its result."""
        assert self._loop is not None

        async def invoke():
            result = fn(*args)
            if asyncio.iscoroutine(result):
                result = await result
            return result

        return asyncio.run_coroutine_threadsafe(invoke(), self._loop).result(timeout)

    def __enter__(self) -> "EmbeddedBroker":
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()


@contextlib.contextmanager
def embedded_broker(data_dir: Path | None = None, properties: dict[str, str] | None = None) -> Iterator[str]:
    """Starts a broker on a free loopback port and yields its bootstrap address ("127.0.0.1:PORT")."""
    with EmbeddedBroker(data_dir, properties) as broker:
        yield broker.bootstrap
