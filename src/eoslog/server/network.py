"""The network layer: Kafka framing on asyncio Protocols.

Contract
- One :class:`KafkaConnection` per client socket, all on the broker's single event loop.
- Requests are handed to the dispatcher in arrival order, synchronously, as soon as a whole frame is in;
  a handler's synchronous part (appends, for instance) therefore runs in arrival order too.
- Responses are written in request order even when a later request finishes first (Kafka clients match
  responses to requests by correlation id, but librdkafka and others also rely on order).
- Backpressure: when the socket's write buffer passes the high-water mark we stop reading from that
  client until it drains, so a client that stops reading cannot make the broker buffer without bound.
- A handler may :meth:`~KafkaConnection.hold` the connection: no further request of it is dispatched
  until released (a transactional Produce waiting for its remote coordinator's verification must not
  be overtaken by the same producer's next batch). Reads pause meanwhile, so holding costs no memory.
- A frame larger than ``socket.request.max.bytes`` closes the connection: we cannot skip it without
  reading it, and Kafka does the same.
- Resource bounds (server/limits.py): a connection over ``max.connections`` or
  ``max.connections.per.ip`` is closed when accepted. A frame waiting for ``queued.max.request.bytes``
  pauses its connection's reads until the pool has room. A connection with nothing in flight and no
  bytes either way for ``connections.max.idle.ms`` is closed by :func:`close_idle`.
- SASL listeners (security/sasl.py): until the client has authenticated, only ApiVersions, SaslHandshake
  and SaslAuthenticate are dispatched (anything else closes the connection), frames are bounded by
  ``sasl.server.max.receive.size``, and the connection is closed if it has not authenticated within its
  deadline. With ``connections.max.reauth.ms`` a session expires: after that only re-authentication is
  served, and any other request closes the connection (KIP-368).
- Bytes come in through ``asyncio.BufferedProtocol`` into buffers the frame reader (server/framing.py)
  hands out, so a large Produce request is received straight into the buffer the log writes from.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from eoslog.api.errors import CloseConnection
from eoslog.log.eager_future import EagerFuture, after_batch, batched
from eoslog.log.region import FileRegion
from eoslog.server.framing import FrameReader, FrameTooLarge, NeedMemory
from eoslog.server.limits import ConnectionQuotas, MemoryPool

if TYPE_CHECKING:
    from eoslog.server.dispatcher import Dispatcher

log = logging.getLogger(__name__)

# What a connection may hold unsent before it stops reading requests and stops reading file regions
# into memory (pause_writing); both go on once the socket drained below the low mark (resume_writing).
# A Fetch answer's file regions are streamed under the same limit, so a consumer that reads slowly costs
# the broker about this much memory, not its whole answer (up to fetch.max.bytes, 50 MiB by default):
# docs/benchmarks.md, "fetch responses read into memory for slow consumers".
WRITE_HIGH_WATER = 1 * 1024 * 1024
WRITE_LOW_WATER = 256 * 1024
# What sendfile does not take at once is read and queued in slices of this size.
READ_CHUNK = 256 * 1024
SENDFILE = hasattr(os, "sendfile") and os.environ.get("EOSLOG_SENDFILE", "1") != "0"


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, dispatcher: Dispatcher, max_request_bytes: int, pool: MemoryPool | None = None,
                 quotas: ConnectionQuotas | None = None, listener=None, principal_mapper=None,
                 sasl=None, authentication_timeout_s: float | None = None,
                 unauthenticated_max_request_bytes: int | None = None, reauth_ms: int = 0) -> None:
        self._dispatcher = dispatcher
        self._max_request_bytes = max_request_bytes
        self._pool = pool if pool is not None else MemoryPool()
        self._quotas = quotas
        self._frames = FrameReader(max_request_bytes, pool=self._pool)
        # Each entry: [pieces or None, future or None]; written strictly from the left.
        self._pending: deque[list[Any]] = deque()
        self._drain_scheduled = False
        self._transport: asyncio.Transport | None = None
        self._reading_paused = False
        self._writing_paused = False
        self._holds = 0
        self._starved = False  # waiting for queued.max.request.bytes
        self._counted_ip: str | None = None  # counted in the quotas
        self.peer = "?"
        self.closed = False
        self.last_active = time.monotonic()
        self.listener = listener  # server/listeners.py Listener it came in on (None: a bare test connection)
        self._principal_mapper = principal_mapper
        self.principal = "User:ANONYMOUS"  # from the client certificate on TLS listeners (server/tls.py)
        # SASL listeners: the exchange's state (security/sasl.py SaslSession), None elsewhere; then the
        # principal is the authenticated user's.
        self.sasl = sasl
        self.session_expires_at: float | None = None  # monotonic; KIP-368 session end, None: no end
        self.reauth_ms = reauth_ms  # connections.max.reauth.ms: each session's lifetime, 0: unlimited
        self._authentication_timeout_s = authentication_timeout_s
        self._authentication_deadline: asyncio.TimerHandle | None = None
        self._close_when_written = False
        if sasl is not None and unauthenticated_max_request_bytes is not None:
            self._frames.max_frame = min(max_request_bytes, unauthenticated_max_request_bytes)
        self._socket_fd: int | None = None
        # Pieces waiting for the socket to drain, in order: the rest of a file region (over a descriptor
        # of its own, see _park) and everything written after it.
        self._unsent: deque[Any] = deque()
        self._owned_fds: set[int] = set()

    # --- asyncio.Protocol ---------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        if self._quotas is not None:
            ip = peer[0] if peer else "?"
            refused = self._quotas.admit(ip)
            if refused is not None:
                log.warning("refusing connection from %s: %s", self.peer, refused)
                self.closed = True
                transport.abort()
                return
            self._counted_ip = ip
        sock = transport.get_extra_info("socket")
        ssl_object = transport.get_extra_info("ssl_object")
        # Never sendfile on TLS: the kernel would put the file's plaintext on the wire.
        self._socket_fd = sock.fileno() if sock is not None and SENDFILE and ssl_object is None else None
        if ssl_object is not None and self._principal_mapper is not None:
            from eoslog.server.tls import principal_of

            self.principal = principal_of(ssl_object, self._principal_mapper)
            log.debug("TLS connection from %s (%s): %s", self.peer, ssl_object.version(), self.principal)
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER, low=WRITE_LOW_WATER)  # type: ignore[attr-defined]
        if self.sasl is not None and self._authentication_timeout_s:
            self._authentication_deadline = asyncio.get_running_loop().call_later(
                self._authentication_timeout_s, self._authentication_expired)
        self._dispatcher.connection_opened(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._authentication_deadline is not None:
            self._authentication_deadline.cancel()
            self._authentication_deadline = None
        self._frames.close()
        self._pool.forget(self._memory_released)
        self._unsent.clear()
        for fd in self._owned_fds:
            os.close(fd)
        self._owned_fds.clear()
        if self._counted_ip is None:
            return  # refused at accept: never opened
        if self._quotas is not None:
            self._quotas.release(self._counted_ip)
        self._counted_ip = None
        for entry in self._pending:
            future = entry[1]
            if future is not None and not future.done():
                future.cancel()
        self._pending.clear()
        self._dispatcher.connection_closed(self)

    # --- SASL -------------------------------------------------------------------------------------
    def authenticated(self, principal: str, session_lifetime_s: float | None) -> None:
        """The SASL exchange completed: the principal is the user's from now on, frames may be as large
        as ``socket.request.max.bytes``, and the session ends after its lifetime (KIP-368), if it has one."""
        self.principal = principal
        self._frames.max_frame = self._max_request_bytes
        self.session_expires_at = None if session_lifetime_s is None else time.monotonic() + session_lifetime_s
        if self._authentication_deadline is not None:
            self._authentication_deadline.cancel()
            self._authentication_deadline = None

    def close_after_response(self) -> None:
        """Hang up once every response owed so far is written (a failed authentication: the client reads
        why, then the connection ends)."""
        self._close_when_written = True
        self._set_reading(False)

    def _authentication_expired(self) -> None:
        self._authentication_deadline = None
        if not self.closed and self.sasl is not None and not self.sasl.authenticated:
            log.warning("closing connection from %s: no SASL authentication within %.0f s", self.peer,
                        self._authentication_timeout_s)
            self.close()

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._set_reading(False)

    def resume_writing(self) -> None:
        self._writing_paused = False
        if self._unsent:
            pieces = list(self._unsent)
            self._unsent.clear()
            self._send(pieces)
            if self._writing_paused:  # it filled the socket again; the next resume_writing goes on
                return
        if not self._holds and not self._starved:
            self._set_reading(True)
        self._process_frames()

    def hold(self) -> Callable[[], None]:
        """Stops dispatching this connection's requests until the returned function is called (once is
        enough; later calls do nothing). Requests already dispatched are not affected."""
        self._holds += 1
        self._set_reading(False)
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            self._holds -= 1
            if self._holds == 0 and not self.closed:
                if not self._writing_paused and not self._starved:
                    self._set_reading(True)
                # Not from inside the holder's own call stack: frames are dispatched from the loop.
                asyncio.get_running_loop().call_soon(self._process_frames)

        return release

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._frames.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.last_active = time.monotonic()
        self._frames.buffer_updated(nbytes)
        self._process_frames()

    @batched  # the answers ready at once go out when this returns, one send per connection
    def _process_frames(self) -> None:
        """Dispatches every whole frame received, unless the client stopped reading our responses.

        Pausing the transport's reads is not enough on its own: one read can carry hundreds of small
        requests (300 Fetches fit in 30 KB), so we also stop taking frames out of the reader while the
        socket's write side is over its high-water mark, and pick up again in resume_writing.
        """
        while (not self._writing_paused and not self._holds and not self._starved and not self.closed
               and not self._close_when_written):
            try:
                frame = self._frames.next_frame()
            except FrameTooLarge as exc:
                log.warning("closing connection from %s: %s", self.peer, exc)
                self.close()
                return
            except NeedMemory as exc:
                log.debug("connection from %s waits: %s (%d of %d bytes in use)", self.peer, exc,
                          self._pool.used, self._pool.capacity)
                self._starved = True
                self._set_reading(False)
                self._pool.wait(self._memory_released)
                return
            if frame is None:
                return
            self._on_frame(frame)

    def _memory_released(self) -> None:
        """The pool gave memory back: try the waiting frame again (it may wait again)."""
        if self.closed or not self._starved:
            return
        self._starved = False
        if not self._writing_paused and not self._holds:
            self._set_reading(True)
        self._process_frames()

    @property
    def idle(self) -> bool:
        """Nothing in flight either way: no request being answered, no response being written. (A frame
        half received counts as nothing: a client that stops mid-frame is idle, and its memory goes back
        when it is closed.)"""
        transport = self._transport
        return (not self._pending and not self._holds and not self._starved and not self._unsent
                and (transport is None or transport.get_write_buffer_size() == 0))

    # --- requests and responses ---------------------------------------------------------------
    def _on_frame(self, frame: bytes | bytearray) -> None:
        try:
            outcome = self._dispatcher.dispatch(self, frame)
        except CloseConnection:
            self.close()
            return
        if outcome is None:  # acks=0 produce: no response at all
            return
        if isinstance(outcome, list):
            if not self._pending:
                self._write_pieces(outcome)
            else:
                self._pending.append([outcome, None])
            return
        entry = [None, outcome]
        self._pending.append(entry)
        ready = lambda fut, entry=entry: self._on_response_ready(entry, fut)
        if isinstance(outcome, EagerFuture):  # ready within the turn that answered it (eager_future.py)
            outcome.on_settled(ready)
        else:
            outcome.add_done_callback(ready)

    def _on_response_ready(self, entry: list[Any], future: asyncio.Future) -> None:
        if self.closed or future.cancelled():
            return
        exc = future.exception()
        if exc is not None:
            if not isinstance(exc, CloseConnection):
                log.error("request from %s failed unexpectedly; closing connection", self.peer, exc_info=exc)
            self.close()
            return
        entry[0] = future.result()
        if entry[0] is None:  # nothing to send (acks=0); just drop the slot
            entry[0] = []
        # Written when the callback that made it ready ends, not now: the responses of one group-commit
        # round become ready together, and a producer has up to 5 of them in flight, so they go out in one
        # send instead of one each (the send was the largest item of the loop's profile with 1,000
        # partitions). Not at the loop's next turn either: under load a turn is every readable socket's
        # requests, tens of milliseconds that every acknowledgement would wait again (eager_future.py).
        # Outside such a callback (a long poll's task, a timer) nothing else is about to be ready: now.
        if not self._drain_scheduled:
            self._drain_scheduled = True
            if not after_batch(self._drain_ready):
                self._drain_ready()

    def _drain_ready(self) -> None:
        self._drain_scheduled = False
        pending = self._pending
        if not pending or pending[0][0] is None:
            return
        pieces: list[Any] = []
        while pending and pending[0][0] is not None:
            pieces.extend(pending.popleft()[0])
        self._write_pieces(pieces)

    def _write_pieces(self, pieces: list[Any]) -> None:
        if self._transport is None or self.closed:
            return
        self.last_active = time.monotonic()
        if self._unsent:  # a region is waiting for the socket: everything after it waits behind it
            self._unsent.extend(map(self._own, pieces))
            return
        self._send(pieces)

    def _send(self, pieces: list[Any]) -> None:
        transport = self._transport
        if transport is None or self.closed:
            return
        try:
            batch: list[Any] = []  # consecutive in-memory pieces: one writelines, one system call
            for index, piece in enumerate(pieces):
                if isinstance(piece, FileRegion):
                    if batch:
                        transport.writelines(batch)
                        batch = []
                    rest = self._write_region(transport, piece)
                    if rest is not None:  # the socket is full: go on in resume_writing
                        self._park(rest, pieces[index + 1:])
                        return
                else:
                    batch.append(piece)
            if len(batch) == 1:
                transport.write(batch[0])
            elif batch:
                transport.writelines(batch)
            if self._close_when_written and not self._pending:
                self.close()  # the transport sends what it buffered, then closes
        except (CloseConnection, OSError) as exc:
            # A half-written response cannot be taken back: the only safe answer is to hang up.
            log.error("closing connection to %s: could not send a response: %s", self.peer, exc)
            self.close()

    def _park(self, rest: FileRegion, after: list[Any]) -> None:
        """Keeps the unsent rest of a region, and what follows it, until resume_writing."""
        self._unsent.append(self._own(rest))
        self._unsent.extend(map(self._own, after))

    def _own(self, piece: Any) -> Any:
        """A file region that is to wait gets a descriptor of its own (``dup``): it may wait longer than a
        deleted segment's grace period (file.delete.delay.ms), and reading through the segment's
        descriptor number after it was closed could read another file that reused the number. The
        duplicate keeps the segment's file open, deleted or not, until the region is sent or the
        connection closes."""
        if not isinstance(piece, FileRegion) or piece.fd in self._owned_fds:
            return piece
        owned = FileRegion(os.dup(piece.fd), piece.position, piece.length)
        self._owned_fds.add(owned.fd)
        return owned

    def _write_region(self, transport: asyncio.Transport, region: FileRegion) -> FileRegion | None:
        """Sends ``region``; returns the part not sent when pause_writing came, else None."""
        position, remaining = region.position, region.length
        # Zero-copy first: when nothing is queued in the transport, the kernel may move file pages
        # straight to the socket; whatever it does not take now is read and queued behind it, which
        # keeps the bytes in order. (Over loopback this measured no faster than pread + write, but it
        # spares a copy and an allocation per region.)
        if self._socket_fd is not None and transport.get_write_buffer_size() == 0:
            try:
                sent = os.sendfile(self._socket_fd, region.fd, position, remaining)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                self._socket_fd = None  # sendfile not possible on this socket: copy from now on
                sent = 0
            position += sent
            remaining -= sent
        while remaining > 0:
            if self._writing_paused:
                return FileRegion(region.fd, position, remaining)
            chunk = os.pread(region.fd, min(remaining, READ_CHUNK), position)
            if not chunk:
                # The segment shrank under us (it cannot while regions are live: deletion is deferred).
                raise CloseConnection(f"file region ended early at {position}")
            transport.write(chunk)  # may call pause_writing
            position += len(chunk)
            remaining -= len(chunk)
        if region.fd in self._owned_fds:
            self._owned_fds.discard(region.fd)
            os.close(region.fd)
        return None

    def _set_reading(self, enabled: bool) -> None:
        transport = self._transport
        if transport is None or self.closed:
            return
        if enabled and self._reading_paused:
            self._reading_paused = False
            transport.resume_reading()
        elif not enabled and not self._reading_paused:
            self._reading_paused = True
            transport.pause_reading()

    def close(self) -> None:
        if not self.closed and self._transport is not None:
            self.closed = True
            self._transport.close()


def close_idle(connections, max_idle_s: float, now: float | None = None) -> int:
    """``connections.max.idle.ms``: closes every connection with nothing in flight and no bytes either
    way for ``max_idle_s``. Returns how many it closed."""
    now = time.monotonic() if now is None else now
    closed = 0
    for connection in list(connections):
        if connection.idle and now - connection.last_active > max_idle_s:
            log.info("closing connection from %s: idle for more than connections.max.idle.ms", connection.peer)
            connection.close()
            closed += 1
    return closed
