"""A fault-injecting TCP proxy that understands Kafka framing.

Every Kafka message, in both directions, is a 4-byte big-endian size followed by that many bytes. The
proxy reads whole frames, forwards every request frame to the broker, and for each response frame
decides (with one seeded random generator) to:

- **drop** it: the broker has executed the request but the client never learns the outcome. A Kafka
  client waits for a missing response until its request timeout, so the proxy also closes the client
  connection ``drop_close_ms`` later and discards every later response on that connection. The client
  then reconnects and retries a request the broker already applied — the case idempotence and
  transactions exist for.
- **delay** it by a random time from ``delay_ms``. Responses on one connection still leave in the order
  they arrived (a Kafka client matches responses to requests by order), so a delay also holds back the
  responses behind it.
- **cut** the connection, at a frame of either direction, either between frames or after a random part
  of the frame (a torn request or a torn response).

Rates are probabilities per frame and can be changed while traffic flows (:meth:`FaultProxy.set_faults`);
:meth:`FaultProxy.pause` holds every frame (both directions) until :meth:`FaultProxy.resume`.

**Delay and replay** one kind of request: :meth:`FaultProxy.hold_requests` holds every request frame of
the given API keys (and, TCP being ordered, whatever follows it on that connection) until
:meth:`FaultProxy.release_requests` forwards them, unchanged, to the broker. A request the client gave up
on then arrives after everything it did meanwhile -- a Produce or EndTxn of a transaction that has since
ended, the case KIP-890 part 2 is about.

A network partition between brokers: each connection is known by the client id of its first request
(an eoslog broker's own connections say ``eoslog-<role>-<broker id>``), and :meth:`FaultProxy.block_clients`
closes every connection whose client id matches a pattern, now and whenever one is made, until
:meth:`FaultProxy.unblock_clients`. Put each broker of a cluster behind its own proxy, advertised in its
registration, and blocking broker 2's ids in broker 1's proxy cuts the link 2 -> 1 while clients and
ZooKeeper still reach both.

Using it with a real Kafka client: Metadata responses carry the broker's advertised address, and clients
connect to that address for everything after the bootstrap. Start the broker with its advertised listener
set to the proxy's address, e.g. ``eoslog serve --advertised-listener 127.0.0.1:PROXYPORT``, so that all
traffic keeps going through the proxy. With a proxy started first on port 0, pass
``listen_port=<fixed port>`` instead or start the broker after the proxy has bound its port (the proxy
connects upstream lazily, per client connection).

Threads: the proxy runs on one asyncio event loop. Synchronous tests call :meth:`start_in_thread`, which
runs that loop in a daemon thread; :meth:`set_faults`, :meth:`pause`, :meth:`resume` and :meth:`stop` may
then be called from any thread. Counters and the fault log are written only by the loop's thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import logging
import random
import re
import struct
import threading
import time
from collections.abc import Callable
from typing import Self

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
# Kafka's socket.request.max.bytes defaults to 100 MiB; anything far beyond is not Kafka traffic.
_MAX_FRAME = 1 << 30
_UPSTREAM_CONNECT_TIMEOUT_S = 5.0


@dataclasses.dataclass(frozen=True)
class FaultSettings:
    """The fault rates in force; replaced as a whole so a frame never sees half of an update."""

    drop_response_rate: float = 0.0
    delay_response_rate: float = 0.0
    delay_ms: tuple[float, float] = (50.0, 500.0)
    cut_rate: float = 0.0

    def __post_init__(self) -> None:
        for name in ("drop_response_rate", "delay_response_rate", "cut_rate"):
            rate = getattr(self, name)
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"{name} must be within [0, 1], got {rate}")
        low, high = self.delay_ms
        if low < 0 or high < low:
            raise ValueError(f"delay_ms must be (low, high) with 0 <= low <= high, got {self.delay_ms}")

    def describe(self) -> str:
        parts = []
        if self.drop_response_rate:
            parts.append(f"drop={self.drop_response_rate:g}")
        if self.delay_response_rate:
            parts.append(f"delay={self.delay_response_rate:g}@{self.delay_ms[0]:g}-{self.delay_ms[1]:g}ms")
        if self.cut_rate:
            parts.append(f"cut={self.cut_rate:g}")
        return " ".join(parts) or "none"


@dataclasses.dataclass
class FaultCounters:
    """What the proxy has done so far; read with :meth:`FaultProxy.snapshot`."""

    connections: int = 0
    upstream_connect_failures: int = 0
    requests_forwarded: int = 0
    responses_forwarded: int = 0
    responses_dropped: int = 0
    # Responses thrown away because an earlier response on the same connection was dropped.
    responses_discarded: int = 0
    responses_delayed: int = 0
    cuts: int = 0
    cuts_mid_frame: int = 0
    pauses: int = 0
    requests_held: int = 0  # held by hold_requests(), forwarded late by release_requests()


@dataclasses.dataclass(frozen=True)
class FaultEvent:
    """One entry of the fault log. ``time`` is wall-clock seconds (``time.time()``), the time base of
    eoslog's verifier histories, so fault windows can be drawn over a history's throughput."""

    time: float
    kind: str  # "drop", "delay", "cut", "pause", "resume", "set_faults", "hold", "release"
    connection: int | None = None
    detail: str = ""


class _Connection:
    """One client connection and its upstream twin, with three tasks: requests client -> broker,
    responses broker -> queue (where faults are decided), queue -> client (where delays are served)."""

    def __init__(self, connection_id: int, client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
                 upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> None:
        self.id = connection_id
        self.client_reader, self.client_writer = client
        self.upstream_reader, self.upstream_writer = upstream
        # (deliver_at loop time, frame bytes, is_cut) in arrival order; None marks upstream EOF.
        self.outbound: asyncio.Queue[tuple[float, bytes, bool] | None] = asyncio.Queue()
        self.tasks: list[asyncio.Task] = []
        self.doomed = False  # a response was dropped: every later one is discarded
        self.closed = False
        self.client_id: str | None = None  # from the first request's header

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        current = asyncio.current_task()
        for task in self.tasks:
            if task is not current:
                task.cancel()
        for writer in (self.client_writer, self.upstream_writer):
            writer.close()


def _client_id(frame: bytes) -> str | None:
    """The client id of a request frame (size, api key, version, correlation id, then the id as a
    2-byte-length string in every request header version)."""
    if len(frame) < 14:
        return None
    (length,) = struct.unpack_from(">h", frame, 12)
    if length < 0 or len(frame) < 14 + length:
        return None
    return frame[14:14 + length].decode("utf-8", "replace")


async def _read_frame(reader: asyncio.StreamReader) -> bytes | None:
    """One size-prefixed frame including its prefix, or None at a clean or torn end of stream."""
    try:
        prefix = await reader.readexactly(4)
        (size,) = _SIZE.unpack(prefix)
        if size < 0 or size > _MAX_FRAME:
            log.warning("fault proxy: frame size %d is not Kafka framing; closing", size)
            return None
        return prefix + await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None


class FaultProxy:
    """A TCP proxy between Kafka clients and one broker that drops, delays or cuts on demand."""

    def __init__(self, upstream_host: str, upstream_port: int, listen_host: str = "127.0.0.1",
                 listen_port: int = 0, *, drop_response_rate: float = 0.0,
                 delay_response_rate: float = 0.0, delay_ms: tuple[float, float] = (50, 500),
                 cut_rate: float = 0.0, seed: int | None = None, drop_close_ms: float = 100.0) -> None:
        self.upstream_host = upstream_host
        self.upstream_port = upstream_port
        self.listen_host = listen_host
        self.listen_port = listen_port
        self.port: int | None = None  # the bound port, once started
        self.drop_close_ms = drop_close_ms
        self._settings = FaultSettings(float(drop_response_rate), float(delay_response_rate),
                                       (float(delay_ms[0]), float(delay_ms[1])), float(cut_rate))
        self._random = random.Random(seed)
        self.counters = FaultCounters()
        self.fault_log: list[FaultEvent] = [FaultEvent(time.time(), "set_faults", None,
                                                       self._settings.describe())]
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._connections: dict[int, _Connection] = {}
        self._next_connection_id = 0
        self._server: asyncio.base_events.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._closing = False
        self._blocked: list[re.Pattern[str]] = []
        self._held_keys: frozenset[int] = frozenset()
        self._hold_left: int | None = None  # how many more frames to hold; None = all of them
        self._release: asyncio.Event = asyncio.Event()  # set to let the requests held so far go

    # ------------------------------------------------------------------ lifecycle (asyncio)

    async def start(self) -> int:
        """Bind the listening socket; returns the bound port."""
        self._loop = asyncio.get_running_loop()
        self._closing = False
        self._server = await asyncio.start_server(self._on_client, self.listen_host, self.listen_port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        """Stop listening and close every connection."""
        self._closing = True
        if self._server is not None:
            self._server.close()
        tasks = []
        for connection in list(self._connections.values()):
            connection.close()
            tasks.extend(connection.tasks)
        self._connections.clear()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.close()

    # ------------------------------------------------------------------ lifecycle (threads)

    def start_in_thread(self, timeout: float = 10.0) -> int:
        """Run the proxy's event loop in a daemon thread; returns the bound port."""
        if self._thread is not None:
            raise RuntimeError("the proxy already runs in a thread")
        started: concurrent.futures.Future[int] = concurrent.futures.Future()

        def run() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            try:
                started.set_result(loop.run_until_complete(self.start()))
            except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
                started.set_exception(error)
                loop.close()
                return
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self.close())
                loop.close()

        self._thread = threading.Thread(target=run, name=f"fault-proxy-{self.upstream_port}", daemon=True)
        self._thread.start()
        return started.result(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop a proxy started with :meth:`start_in_thread` and wait for its thread."""
        thread, loop = self._thread, self._loop
        if thread is None or loop is None:
            return
        if not loop.is_closed():
            loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        if thread.is_alive():
            raise TimeoutError("fault proxy thread did not stop")
        self._thread = None

    # ------------------------------------------------------------------ controls (any thread)

    def set_faults(self, *, drop_response_rate: float | None = None, delay_response_rate: float | None = None,
                   delay_ms: tuple[float, float] | None = None, cut_rate: float | None = None) -> None:
        """Change some fault rates; the others keep their values."""
        changes: dict = {}
        if drop_response_rate is not None:
            changes["drop_response_rate"] = float(drop_response_rate)
        if delay_response_rate is not None:
            changes["delay_response_rate"] = float(delay_response_rate)
        if delay_ms is not None:
            changes["delay_ms"] = (float(delay_ms[0]), float(delay_ms[1]))
        if cut_rate is not None:
            changes["cut_rate"] = float(cut_rate)
        settings = dataclasses.replace(self._settings, **changes)  # validates before anything changes

        def apply() -> None:
            self._settings = settings
            self._record("set_faults", None, settings.describe())

        self._in_loop(apply)

    @property
    def settings(self) -> FaultSettings:
        return self._settings

    def pause(self) -> None:
        """Hold every frame, in both directions, until :meth:`resume`. Connections stay open."""

        def apply() -> None:
            if self._flowing.is_set():
                self._flowing.clear()
                self.counters.pauses += 1
                self._record("pause")

        self._in_loop(apply)

    def resume(self) -> None:
        def apply() -> None:
            if not self._flowing.is_set():
                self._flowing.set()
                self._record("resume")

        self._in_loop(apply)

    def block_clients(self, pattern: str) -> None:
        """Close every connection whose client id fully matches ``pattern`` (a regex), and every such
        connection made from now on, until :meth:`unblock_clients`."""
        compiled = re.compile(pattern)

        def apply() -> None:
            self._blocked.append(compiled)
            self._record("block", None, pattern)
            for connection in list(self._connections.values()):
                if connection.client_id is not None and compiled.fullmatch(connection.client_id):
                    self.counters.cuts += 1
                    self._close(connection)

        self._in_loop(apply)

    def unblock_clients(self) -> None:
        def apply() -> None:
            if self._blocked:
                self._blocked = []
                self._record("unblock")

        self._in_loop(apply)

    def hold_requests(self, *api_keys: int, count: int | None = None) -> None:
        """From now on hold every request frame of these API keys (see the module docstring); with
        ``count``, only the next ``count`` of them: later ones flow again, overtaking the held ones."""
        keys = frozenset(api_keys)

        def apply() -> None:
            self._held_keys = keys
            self._hold_left = count
            self._record("hold", None, "api keys " + ",".join(map(str, sorted(keys)))
                         + ("" if count is None else f", {count} request(s)"))

        self._in_loop(apply)

    def release_requests(self) -> None:
        """Stop holding, and forward every held request (in the order each connection sent them)."""

        def apply() -> None:
            self._held_keys = frozenset()
            self._release.set()
            self._release = asyncio.Event()
            self._record("release")

        self._in_loop(apply)

    def _is_blocked(self, client_id: str | None) -> bool:
        return client_id is not None and any(p.fullmatch(client_id) for p in self._blocked)

    @property
    def paused(self) -> bool:
        return not self._flowing.is_set()

    def snapshot(self) -> dict[str, int]:
        """A copy of the counters."""
        return dataclasses.asdict(self.counters)

    @property
    def connection_count(self) -> int:
        """Connections currently open through the proxy."""
        return len(self._connections)

    def fault_windows(self, end: float | None = None) -> list[tuple[float, float, str]]:
        """Periods with faults in force, as ``(start, end, label)`` in ``time.time()`` seconds: every
        pause..resume, and every period whose rates were not all zero. Open periods end at ``end``
        (default: now). Ready for :func:`eoslog.verify.plot.plot`."""
        end = time.time() if end is None else end
        windows: list[tuple[float, float, str]] = []
        pause_start: float | None = None
        rates_start: float | None = None
        rates_label = "none"
        for event in list(self.fault_log):
            if event.kind == "pause":
                pause_start = event.time
            elif event.kind == "resume" and pause_start is not None:
                windows.append((pause_start, event.time, "pause"))
                pause_start = None
            elif event.kind == "set_faults":
                if rates_start is not None and rates_label != "none":
                    windows.append((rates_start, event.time, rates_label))
                rates_start, rates_label = event.time, event.detail
        if pause_start is not None:
            windows.append((pause_start, end, "pause"))
        if rates_start is not None and rates_label != "none":
            windows.append((rates_start, end, rates_label))
        windows.sort()
        return windows

    def _in_loop(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the proxy's loop and wait for it, so a control call has taken effect on return."""
        loop = self._loop
        if loop is None or loop.is_closed() or not loop.is_running():
            fn()
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            fn()
            return
        done: concurrent.futures.Future[None] = concurrent.futures.Future()

        def call() -> None:
            try:
                fn()
                done.set_result(None)
            except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
                done.set_exception(error)

        loop.call_soon_threadsafe(call)
        done.result(timeout=10.0)

    def _record(self, kind: str, connection: int | None = None, detail: str = "") -> None:
        self.fault_log.append(FaultEvent(time.time(), kind, connection, detail))

    # ------------------------------------------------------------------ data path

    async def _on_client(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            upstream = await asyncio.wait_for(
                asyncio.open_connection(self.upstream_host, self.upstream_port), _UPSTREAM_CONNECT_TIMEOUT_S)
        except (TimeoutError, OSError) as error:
            log.info("fault proxy: upstream %s:%d unreachable: %s", self.upstream_host, self.upstream_port, error)
            self.counters.upstream_connect_failures += 1
            client_writer.close()
            return
        if self._closing:  # the proxy closed while this connection was being set up
            upstream[1].close()
            client_writer.close()
            return
        self._next_connection_id += 1
        self.counters.connections += 1
        connection = _Connection(self._next_connection_id, (client_reader, client_writer), upstream)
        self._connections[connection.id] = connection
        connection.tasks = [
            asyncio.create_task(self._pump_requests(connection)),
            asyncio.create_task(self._read_responses(connection)),
            asyncio.create_task(self._write_responses(connection)),
        ]

    def _close(self, connection: _Connection) -> None:
        connection.close()
        self._connections.pop(connection.id, None)

    def _should_cut(self) -> bool:
        rate = self._settings.cut_rate
        return rate > 0.0 and self._random.random() < rate

    async def _cut(self, connection: _Connection, writer: asyncio.StreamWriter, frame: bytes) -> None:
        """Close the connection, half the time after sending a random part of ``frame``."""
        mid_frame = self._random.random() < 0.5
        self.counters.cuts += 1
        if mid_frame:
            self.counters.cuts_mid_frame += 1
            writer.write(frame[: self._random.randint(1, len(frame) - 1)])
            try:
                await asyncio.wait_for(writer.drain(), 1.0)
            except (TimeoutError, ConnectionError):
                pass
        self._record("cut", connection.id, "mid-frame" if mid_frame else "between frames")
        self._close(connection)

    async def _pump_requests(self, connection: _Connection) -> None:
        try:
            while True:
                frame = await _read_frame(connection.client_reader)
                if frame is None:
                    break
                if connection.client_id is None:
                    connection.client_id = _client_id(frame) or ""
                await self._flowing.wait()
                if self._held_keys and len(frame) >= 6 and struct.unpack_from(">h", frame, 4)[0] in self._held_keys:
                    self.counters.requests_held += 1
                    if self._hold_left is not None:
                        self._hold_left -= 1
                        if self._hold_left <= 0:
                            self._held_keys = frozenset()  # this one is the last held
                    self._record("hold", connection.id, f"api key {struct.unpack_from('>h', frame, 4)[0]}")
                    await self._release.wait()
                if self._is_blocked(connection.client_id):
                    self.counters.cuts += 1
                    return  # the finally closes both sides: the link is down
                if self._should_cut():
                    await self._cut(connection, connection.upstream_writer, frame)
                    return
                connection.upstream_writer.write(frame)
                await connection.upstream_writer.drain()
                self.counters.requests_forwarded += 1
        except ConnectionError:
            pass
        finally:
            self._close(connection)

    async def _read_responses(self, connection: _Connection) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                frame = await _read_frame(connection.upstream_reader)
                if frame is None:
                    break
                await self._flowing.wait()
                if connection.doomed:
                    self.counters.responses_discarded += 1
                    continue
                settings = self._settings
                if self._should_cut():
                    connection.outbound.put_nowait((loop.time(), frame, True))
                    continue
                if settings.drop_response_rate > 0.0 and self._random.random() < settings.drop_response_rate:
                    self.counters.responses_dropped += 1
                    self._record("drop", connection.id)
                    connection.doomed = True
                    loop.call_later(self.drop_close_ms / 1000.0, self._close, connection)
                    continue
                deliver_at = loop.time()
                if settings.delay_response_rate > 0.0 and self._random.random() < settings.delay_response_rate:
                    delay_ms = self._random.uniform(*settings.delay_ms)
                    deliver_at += delay_ms / 1000.0
                    self.counters.responses_delayed += 1
                    self._record("delay", connection.id, f"{delay_ms:.1f}ms")
                connection.outbound.put_nowait((deliver_at, frame, False))
        finally:
            # Upstream closed: what is queued still goes out, then the client connection closes.
            connection.outbound.put_nowait(None)

    async def _write_responses(self, connection: _Connection) -> None:
        loop = asyncio.get_running_loop()
        writer = connection.client_writer
        try:
            while True:
                item = await connection.outbound.get()
                if item is None:
                    break
                deliver_at, frame, is_cut = item
                wait = deliver_at - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                await self._flowing.wait()
                if is_cut:
                    await self._cut(connection, writer, frame)
                    return
                writer.write(frame)
                await writer.drain()
                self.counters.responses_forwarded += 1
        except ConnectionError:
            pass
        finally:
            self._close(connection)


__all__ = ["FaultCounters", "FaultEvent", "FaultProxy", "FaultSettings"]
