"""One blocking Kafka-protocol connection to one broker: what eoslog's own clients speak through (the
admin tools, the groups tool, the transaction-group client and producer, the Spark source's Fetch path).

The framing is Kafka's: an int32 size prefix, request header v1 or v2 and response header v0 or v1, as
the generated codec (``eoslog.protocol.codec``) chooses for each API and version. Opening one goes
through ``security.client.ClientSecurity`` when given one (TLS, then the SASL exchange) and sets
TCP_NODELAY (pipelined requests must not wait for the previous one's acknowledgement).

Contract:

- Requests may be pipelined: :meth:`BrokerConnection.send` writes one and returns its correlation id;
  :meth:`BrokerConnection.receive` answers the oldest request not yet answered, which the broker
  answers first (Kafka answers a connection's requests in order). :meth:`BrokerConnection.request` is
  the two together, for a connection with nothing else in flight.
- Each response is read with ``recv_into`` into one buffer of its own and decoded from a read-only view
  of it, so a Fetch response's records are a memoryview of that buffer, never copied; the buffer lives
  as long as something refers to it.
- Every socket operation waits at most ``timeout_s`` (``socket.timeout``, an OSError, on expiry).
- A failure while reading an answer closes the connection, and whatever was in flight is lost: after a
  timeout the answer may still come, and would be read out of step (Kafka's clients disconnect on a
  request timeout too). :class:`ConnectionLost` (a ConnectionError: the broker's side) says the broker
  closed the connection, or answered with another correlation id. Callers that show users their own
  messages wrap it where they call.
- One thread at a time: nothing here is locked.
"""

from __future__ import annotations

import itertools
import socket
import struct
from collections import deque
from typing import Self

from eoslog.protocol import codec
from eoslog.security.client import ClientSecurity

CLIENT_ID = "eoslog-client"
DEFAULT_TIMEOUT_S = 30.0
_INT32 = struct.Struct(">i")  # the size prefix, and a response's first field: its correlation id


class ConnectionLost(ConnectionError):
    """The broker closed the connection, or its answers no longer match the requests (the remote's fault)."""


class CorrelationIdMismatch(ConnectionLost):
    """A response carried another correlation id than the request it should answer."""

    def __init__(self, got: int, expected: int) -> None:
        super().__init__(f"response for correlation id {got}, expected {expected}")
        self.got = got
        self.expected = expected


def bootstrap_servers(bootstrap: str) -> list[tuple[str, int]]:
    """``host:port,[::1]:port,SASL_SSL://host:port`` as (host, port) pairs, in order: Kafka's
    bootstrap.servers, with a listener name prefix allowed and IPv6 hosts in brackets."""
    servers = []
    for item in bootstrap.split(","):
        item = item.strip().split("://", 1)[-1]
        if not item:
            continue
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"{item!r} in bootstrap {bootstrap!r}: expected HOST:PORT")
        servers.append((host.strip("[]"), int(port)))
    if not servers:
        raise ValueError(f"no server in bootstrap {bootstrap!r}")
    return servers


class BrokerConnection:
    """A connection to the broker at (``host``, ``port``), open from construction until :meth:`close`.

    ``address`` is the (host, port) it was opened to; ``sock`` is its socket (an ``ssl.SSLSocket``
    under TLS).
    """

    def __init__(self, host: str, port: int, *, client_id: str = CLIENT_ID,
                 timeout_s: float = DEFAULT_TIMEOUT_S, security: ClientSecurity | None = None) -> None:
        self.address = (host, port)
        self.client_id = client_id
        if security is None:
            self.sock = socket.create_connection((host, port), timeout=timeout_s)
        else:
            self.sock = security.connect(host, port, timeout_s)
        self._ids = itertools.count(1)
        self._pending: deque[tuple[int, int, int]] = deque()  # (correlation id, api key, version), sent order
        self._size = bytearray(4)
        self._size_view = memoryview(self._size)
        try:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if security is not None:
                security.authenticate(self.request)
        except BaseException:
            self.sock.close()
            raise

    @classmethod
    def from_bootstrap(cls, bootstrap: str, **options) -> Self:
        """To the first server of ``bootstrap`` (see :func:`bootstrap_servers`); the others are not tried.
        ``options`` are the constructor's."""
        host, port = bootstrap_servers(bootstrap)[0]
        return cls(host, port, **options)

    def __repr__(self) -> str:
        return f"BrokerConnection({self.address[0]}:{self.address[1]}, client_id={self.client_id!r})"

    # ---- requests ----------------------------------------------------------------------------------

    def send(self, api_key: int, version: int, request) -> int:
        """Writes ``request`` without waiting for its answer; returns its correlation id."""
        correlation_id = next(self._ids)
        self.sock.sendall(codec.encode_request(codec.RequestHeader(api_key, version, correlation_id,
                                                                   self.client_id), request))
        self._pending.append((correlation_id, api_key, version))
        return correlation_id

    def receive(self):
        """The decoded answer to the oldest request sent and not yet answered."""
        if not self._pending:
            raise RuntimeError("receive() with no request in flight")
        correlation_id, api_key, version = self._pending.popleft()
        frame = self._read_frame()
        # Checked before decoding: another request's answer would not decode as this one's.
        if len(frame) < 4:
            self.close()
            raise ConnectionLost(f"a response of {len(frame)} bytes, too short for a correlation id")
        got = _INT32.unpack_from(frame)[0]
        if got != correlation_id:
            self.close()
            raise CorrelationIdMismatch(got, correlation_id)
        return codec.decode_response(api_key, version, frame)

    def request(self, api_key: int, version: int, request):
        """Sends ``request`` and returns its decoded answer."""
        if self._pending:
            raise RuntimeError(f"request() with {len(self._pending)} requests in flight: receive() their "
                               "answers first")
        self.send(api_key, version, request)
        return self.receive()

    # ---- reading -----------------------------------------------------------------------------------

    def _read_frame(self) -> memoryview:
        """One response, after its size prefix, received in place into a buffer of its own."""
        try:
            self._fill(self._size_view)
            size = _INT32.unpack(self._size)[0]
            if size < 0:
                raise ConnectionLost(f"the broker sent a frame of size {size}")
            buf = memoryview(bytearray(size))
            self._fill(buf)
        except OSError:  # ConnectionLost and socket.timeout among them
            # As Kafka's clients do: an answer still to come would be read out of step with the requests.
            self.close()
            raise
        # Read-only: whoever holds a response's records cannot change them under another holder.
        return buf.toreadonly()

    def _fill(self, view: memoryview) -> None:
        recv_into = self.sock.recv_into
        wanted = len(view)
        got = 0
        while got < wanted:
            read = recv_into(view[got:] if got else view)
            if not read:
                raise ConnectionLost("the broker closed the connection")
            got += read

    # ---- life --------------------------------------------------------------------------------------

    def close(self) -> None:
        """Closes the socket; answers not yet received are lost. Closing twice is harmless."""
        self._pending.clear()
        self.sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
