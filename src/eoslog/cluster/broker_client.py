"""A broker's connection to another broker (replica fetches, OffsetForLeaderEpoch): Kafka's wire
protocol through our own codec, one request in flight at a time, asyncio streams."""

from __future__ import annotations

import asyncio
import struct

from eoslog.protocol import codec

_SIZE = struct.Struct(">i")


class BrokerConnectionError(ConnectionError):
    """The other broker could not be reached, hung up, or answered with something unparsable."""


class BrokerClient:
    def __init__(self, host: str, port: int, client_id: str) -> None:
        self.host, self.port, self.client_id = host, port, client_id
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation_id = 0
        self._lock = asyncio.Lock()

    async def request(self, api_key: int, api_version: int, request, timeout_s: float):
        async with self._lock:
            try:
                return await asyncio.wait_for(self._round_trip(api_key, api_version, request), timeout_s)
            except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError) as exc:
                self.close()
                raise BrokerConnectionError(f"{self.host}:{self.port}: {exc!r}") from exc

    async def _round_trip(self, api_key: int, api_version: int, request):
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port, limit=1 << 20)
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        header = codec.RequestHeader(api_key, api_version, self._correlation_id, self.client_id)
        self._writer.write(codec.encode_request(header, request))
        await self._writer.drain()
        (size,) = _SIZE.unpack(await self._reader.readexactly(4))
        frame = await self._reader.readexactly(size)
        correlation_id, response = codec.decode_response_frame(api_key, api_version, frame)
        if correlation_id != self._correlation_id:
            raise ValueError(f"correlation id {correlation_id}, expected {self._correlation_id}")
        return response

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None
