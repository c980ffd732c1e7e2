"""The fault proxy against a small Kafka-framed server on loopback: frames in, frames out."""

from __future__ import annotations

import asyncio
import socket
import socketserver
import struct
import threading
import time
from typing import Self

import pytest

from eoslog.testing.faultproxy import FaultProxy, FaultSettings

SIZE = struct.Struct(">i")


def frame(body: bytes) -> bytes:
    return SIZE.pack(len(body)) + body


def response_for(request_body: bytes) -> bytes:
    return frame(b"resp:" + request_body)


def run(coro, timeout: float = 30.0):
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def until(predicate, timeout: float = 5.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


class FramedServer:
    """Answers every request frame with b"resp:" + its body; records what it received."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.torn = 0  # connections that ended inside a frame
        self.ended = 0  # connections that ended at all
        self.hold: asyncio.Event | None = None  # when set to an unset event, responses wait for it
        self._server: asyncio.base_events.Server | None = None
        self.port = 0

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info) -> None:
        self._server.close()
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    prefix = await reader.readexactly(4)
                except asyncio.IncompleteReadError as error:
                    self.torn += bool(error.partial)
                    return
                (size,) = SIZE.unpack(prefix)
                try:
                    body = await reader.readexactly(size)
                except asyncio.IncompleteReadError:
                    self.torn += 1
                    return
                self.frames.append(prefix + body)
                if self.hold is not None:
                    await self.hold.wait()
                writer.write(response_for(body))
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            self.ended += 1
            writer.close()


async def read_frame(reader: asyncio.StreamReader, timeout: float = 5.0) -> bytes:
    prefix = await asyncio.wait_for(reader.readexactly(4), timeout)
    (size,) = SIZE.unpack(prefix)
    return prefix + await asyncio.wait_for(reader.readexactly(size), timeout)


async def read_to_eof(reader: asyncio.StreamReader, timeout: float = 5.0) -> bytes:
    return await asyncio.wait_for(reader.read(), timeout)


def test_pass_through_is_byte_exact():
    async def scenario():
        async with FramedServer() as server, FaultProxy("127.0.0.1", server.port, seed=1) as proxy:
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            bodies = [b"", b"x", bytes(range(256)) * 4, b"\x00\xff" * 3, bytes(1 << 20)]
            # Pipelined in one write, then one frame dribbled in pieces across the size prefix.
            writer.write(b"".join(frame(body) for body in bodies))
            dribbled = frame(b"dribbled-frame")
            for piece in (dribbled[:2], dribbled[2:5], dribbled[5:]):
                writer.write(piece)
                await writer.drain()
            bodies.append(b"dribbled-frame")
            received = [await read_frame(reader) for _ in bodies]
            assert received == [response_for(body) for body in bodies]
            assert server.frames == [frame(body) for body in bodies]
            writer.close()
            snapshot = proxy.snapshot()
            assert snapshot["requests_forwarded"] == len(bodies)
            assert snapshot["responses_forwarded"] == len(bodies)
            faults = ("responses_dropped", "responses_delayed", "responses_discarded", "cuts")
            assert all(snapshot[name] == 0 for name in faults)
            assert snapshot["connections"] == 1

    run(scenario())


def test_drop_rate_one_executes_request_but_withholds_response_and_closes():
    async def scenario():
        async with FramedServer() as server, \
                FaultProxy("127.0.0.1", server.port, drop_response_rate=1.0, drop_close_ms=50) as proxy:
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writer.write(frame(b"produce-1") + frame(b"produce-2") + frame(b"produce-3"))
            await writer.drain()
            # The broker executed all three requests, yet the client gets no byte and an end of stream.
            assert await read_to_eof(reader) == b""
            await until(lambda: len(server.frames) == 3, what="server to receive the requests")
            await until(lambda: proxy.counters.responses_dropped + proxy.counters.responses_discarded == 3,
                        what="three responses withheld")
            assert proxy.counters.responses_dropped == 1
            assert proxy.counters.responses_forwarded == 0
            assert [event.kind for event in proxy.fault_log].count("drop") == 1
            await until(lambda: proxy.connection_count == 0, what="connection to close")
            writer.close()

    run(scenario())


def test_delays_preserve_order_per_connection():
    async def scenario():
        async with FramedServer() as server, FaultProxy(
                "127.0.0.1", server.port, delay_response_rate=0.5, delay_ms=(20, 60), seed=7) as proxy:
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            bodies = [f"request-{i}".encode() for i in range(30)]
            started = time.monotonic()
            writer.write(b"".join(frame(body) for body in bodies))
            received = [await read_frame(reader) for _ in bodies]
            elapsed = time.monotonic() - started
            assert received == [response_for(body) for body in bodies]
            delayed = proxy.counters.responses_delayed
            assert 0 < delayed < len(bodies)
            assert [event.kind for event in proxy.fault_log].count("delay") == delayed
            assert elapsed >= 0.020
            writer.close()

    run(scenario())


def test_delay_holds_a_response_for_at_least_the_minimum():
    async def scenario():
        async with FramedServer() as server, FaultProxy(
                "127.0.0.1", server.port, delay_response_rate=1.0, delay_ms=(150, 160)) as proxy:
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            started = time.monotonic()
            writer.write(frame(b"ping"))
            assert await read_frame(reader) == response_for(b"ping")
            assert time.monotonic() - started >= 0.150
            assert proxy.counters.responses_delayed == 1
            writer.close()

    run(scenario())


def test_cut_on_requests_closes_connections_between_and_inside_frames():
    async def scenario():
        async with FramedServer() as server, \
                FaultProxy("127.0.0.1", server.port, cut_rate=1.0, seed=3) as proxy:
            attempts = 8
            for i in range(attempts):
                reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
                writer.write(frame(f"request-{i}".encode() * 10))
                await writer.drain()
                assert await read_to_eof(reader) == b""
                writer.close()
            await until(lambda: server.ended == attempts, what="server connections to end")
            assert server.frames == []  # no request ever arrived whole
            counters = proxy.counters
            assert counters.cuts == attempts
            assert 0 < counters.cuts_mid_frame < attempts  # both kinds happened with this seed
            assert server.torn == counters.cuts_mid_frame
            assert counters.requests_forwarded == 0

    run(scenario())


def test_cut_on_a_response_tears_it():
    async def scenario():
        async with FramedServer() as server, FaultProxy("127.0.0.1", server.port, seed=5) as proxy:
            server.hold = asyncio.Event()
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writer.write(frame(b"fetch" * 50))
            await until(lambda: len(server.frames) == 1, what="request to arrive")
            proxy.set_faults(cut_rate=1.0)
            server.hold.set()
            tail = await read_to_eof(reader)
            assert len(tail) < len(response_for(b"fetch" * 50))  # never the whole response
            assert response_for(b"fetch" * 50).startswith(tail)
            assert proxy.counters.cuts == 1
            assert proxy.counters.responses_forwarded == 0
            writer.close()

    run(scenario())


def test_pause_holds_traffic_until_resume():
    async def scenario():
        async with FramedServer() as server, FaultProxy("127.0.0.1", server.port) as proxy:
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            proxy.pause()
            assert proxy.paused
            writer.write(frame(b"held"))
            await writer.drain()
            # Nothing may cross while paused: a bounded negative check.
            with pytest.raises(asyncio.TimeoutError):
                await read_frame(reader, timeout=0.3)
            assert server.frames == []
            proxy.resume()
            assert await read_frame(reader) == response_for(b"held")
            assert proxy.counters.pauses == 1
            windows = proxy.fault_windows()
            assert [label for _, _, label in windows] == ["pause"]
            start, end, _ = windows[0]
            assert end - start >= 0.3
            writer.close()

    run(scenario())


def test_set_faults_changes_rates_at_run_time_and_validates():
    async def scenario():
        async with FramedServer() as server, FaultProxy("127.0.0.1", server.port, drop_close_ms=20) as proxy:
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writer.write(frame(b"one"))
            assert await read_frame(reader) == response_for(b"one")
            proxy.set_faults(drop_response_rate=1.0)
            assert proxy.settings.drop_response_rate == 1.0
            assert proxy.settings.cut_rate == 0.0
            writer.write(frame(b"two"))
            assert await read_to_eof(reader) == b""
            assert proxy.counters.responses_dropped == 1
            with pytest.raises(ValueError):
                proxy.set_faults(cut_rate=1.5)
            with pytest.raises(ValueError):
                proxy.set_faults(delay_ms=(10, 5))
            assert proxy.settings.drop_response_rate == 1.0  # a rejected change changes nothing
            labels = [label for _, _, label in proxy.fault_windows()]
            assert labels == ["drop=1"]
            writer.close()

    run(scenario())


def test_unreachable_upstream_closes_the_client():
    async def scenario():
        with socket.socket() as probe:  # a port with nobody listening
            probe.bind(("127.0.0.1", 0))
            dead_port = probe.getsockname()[1]
        async with FaultProxy("127.0.0.1", dead_port) as proxy:
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            assert await read_to_eof(reader) == b""
            assert proxy.counters.upstream_connect_failures == 1
            writer.close()

    run(scenario())


def test_settings_reject_bad_rates():
    with pytest.raises(ValueError):
        FaultSettings(drop_response_rate=-0.1)
    with pytest.raises(ValueError):
        FaultProxy("127.0.0.1", 1, delay_response_rate=2.0)


class _ThreadedFramedHandler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        stream = self.request.makefile("rb")
        while True:
            prefix = stream.read(4)
            if len(prefix) < 4:
                return
            (size,) = SIZE.unpack(prefix)
            body = stream.read(size)
            if len(body) < size:
                return
            self.request.sendall(response_for(body))


def _recv_exactly(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            break
        data += chunk
    return data


def test_thread_mode_serves_synchronous_clients():
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _ThreadedFramedHandler)
    server.daemon_threads = True
    server_thread = threading.Thread(target=server.serve_forever, daemon=True)
    server_thread.start()
    proxy = FaultProxy("127.0.0.1", server.server_address[1], seed=11)
    try:
        port = proxy.start_in_thread()
        assert port == proxy.port and port > 0
        with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
            client.sendall(frame(b"sync"))
            assert _recv_exactly(client, len(response_for(b"sync"))) == response_for(b"sync")
            proxy.pause()  # from this (foreign) thread; takes effect before returning
            client.sendall(frame(b"later"))
            client.settimeout(0.2)
            with pytest.raises(socket.timeout):
                client.recv(1)
            client.settimeout(5)
            proxy.resume()
            assert _recv_exactly(client, len(response_for(b"later"))) == response_for(b"later")
            proxy.set_faults(drop_response_rate=1.0)
            client.sendall(frame(b"lost"))
            assert client.recv(1) == b""  # closed by the proxy after the drop
        assert proxy.snapshot()["responses_dropped"] == 1
    finally:
        proxy.stop()
        server.shutdown()
        server.server_close()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_hold_requests_delays_one_request_and_replays_it_after_later_ones():
    """Delay and replay: the next request of an API key waits in the proxy while later ones (of any
    connection) go through, then reaches the server unchanged on release."""

    def request(api_key: int, text: bytes) -> bytes:
        return struct.pack(">h", api_key) + text

    async def scenario():
        async with FramedServer() as server, FaultProxy("127.0.0.1", server.port) as proxy:
            late_reader, late_writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            proxy.hold_requests(0, 26, count=1)
            late_writer.write(frame(request(26, b"stale end")))
            await late_writer.drain()
            await until(lambda: proxy.counters.requests_held == 1, what="the request held")
            # Later requests, even of the held key, overtake it.
            for body in (request(0, b"produce"), request(26, b"end"), request(3, b"metadata")):
                writer.write(frame(body))
                await writer.drain()
                assert await read_frame(reader) == response_for(body)
            with pytest.raises(asyncio.TimeoutError):
                await read_frame(late_reader, timeout=0.2)
            assert frame(request(26, b"stale end")) not in server.frames
            proxy.release_requests()
            assert await read_frame(late_reader) == response_for(request(26, b"stale end"))
            assert server.frames[-1] == frame(request(26, b"stale end"))
            assert proxy.counters.requests_held == 1
            assert [e.kind for e in proxy.fault_log if e.kind in ("hold", "release")] == ["hold", "hold", "release"]
            writer.close()
            late_writer.close()

    run(scenario())
