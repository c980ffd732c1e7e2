"""A broker's connection to another broker (replica fetches, OffsetForLeaderEpoch, transaction markers,
transaction verification): Kafka's wire protocol through our own codec over asyncio streams.

Requests are pipelined: each is written as soon as it is made, and a reader task hands the responses
out in order (a Kafka broker answers a connection's requests in the order it received them), so a
marker waiting for its partition's high watermark does not hold up a verification behind it. A
timeout, a hang-up or an unparsable answer closes the connection and fails every request on it;
the next request connects again.

Which of another broker's listeners it connects to, and how, is a :class:`BrokerLink`: the
``inter.broker.listener.name`` endpoint of the other broker's registration, with TLS when that
listener's protocol needs it and a step after connecting (where SASL authentication will go).
"""

from __future__ import annotations

import asyncio
import collections
import ssl
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

_SIZE = struct.Struct(">i")


class BrokerConnectionError(ConnectionError):
    """The other broker could not be reached, hung up, or answered with something unparsable."""


# Runs once a connection is open (and its TLS handshake done), before the first request: SASL's place.
AfterConnect = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
TLS_HANDSHAKE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class BrokerLink:
    """How this broker reaches the others: the listener (by name) it connects to, and its security."""

    listener: str = "PLAINTEXT"
    ssl: ssl.SSLContext | None = None
    after_connect: AfterConnect | None = None

    def address(self, registration) -> tuple[str, int] | None:
        """The other broker's endpoint for this link's listener; None when it does not serve one."""
        endpoint = registration.endpoint(self.listener) if registration is not None else None
        return None if endpoint is None else (endpoint.host, endpoint.port)


PLAINTEXT_LINK = BrokerLink()


class BrokerClient:
    def __init__(self, host: str, port: int, client_id: str, link: BrokerLink = PLAINTEXT_LINK) -> None:
        self.host, self.port, self.client_id = host, port, client_id
        self.link = link
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task | None = None
        # (correlation id, api key, api version, future) of each request written, oldest first.
        self._waiting: collections.deque[tuple[int, int, int, asyncio.Future]] = collections.deque()
        self._correlation_id = 0
        self._connect_lock = asyncio.Lock()

    async def request(self, api_key: int, api_version: int, request, timeout_s: float):
        try:
            return await asyncio.wait_for(self._request(api_key, api_version, request), timeout_s)
        except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError) as exc:  # ssl.SSLError is an OSError
            self.close()
            raise BrokerConnectionError(f"{self.host}:{self.port}: {exc!r}") from exc

    async def _request(self, api_key: int, api_version: int, request):
        from eoslog.protocol import codec  # loaded after the broker's port opens, not with this module

        writer = await self._connected()
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        header = codec.RequestHeader(api_key, api_version, self._correlation_id, self.client_id)
        future = asyncio.get_running_loop().create_future()
        self._waiting.append((self._correlation_id, api_key, api_version, future))
        writer.write(codec.encode_request(header, request))
        await writer.drain()
        return await future

    async def _connected(self) -> asyncio.StreamWriter:
        async with self._connect_lock:
            if self._writer is None:
                tls = {} if self.link.ssl is None else {
                    "ssl": self.link.ssl, "server_hostname": self.host,
                    "ssl_handshake_timeout": TLS_HANDSHAKE_TIMEOUT_S}
                reader, writer = await asyncio.open_connection(self.host, self.port, limit=1 << 20, **tls)
                if self.link.after_connect is not None:
                    try:
                        await self.link.after_connect(reader, writer)
                    except BaseException:
                        writer.close()
                        raise
                self._writer = writer
                self._reader_task = asyncio.get_running_loop().create_task(self._read_responses(reader, writer))
            return self._writer

    async def _read_responses(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        from eoslog.protocol import codec

        try:
            while True:
                (size,) = _SIZE.unpack(await reader.readexactly(4))
                frame = await reader.readexactly(size)
                if not self._waiting:
                    raise ValueError("a response nobody asked for")
                expected, api_key, api_version, future = self._waiting.popleft()
                correlation_id, response = codec.decode_response_frame(api_key, api_version, frame)
                if correlation_id != expected:
                    raise ValueError(f"correlation id {correlation_id}, expected {expected}")
                if not future.done():
                    future.set_result(response)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - every waiting request learns the connection is gone
            if self._writer is writer:
                self._fail_all(exc)

    def _fail_all(self, exc: BaseException) -> None:
        if self._writer is not None:
            self._writer.close()
        self._writer = None
        waiting, self._waiting = self._waiting, collections.deque()
        for _, _, _, future in waiting:
            if not future.done():
                future.set_exception(BrokerConnectionError(f"{self.host}:{self.port}: {exc!r}"))

    def close(self) -> None:
        task, self._reader_task = self._reader_task, None
        self._fail_all(ConnectionResetError("closed"))
        if task is not None and task is not asyncio.current_task():
            task.cancel()
