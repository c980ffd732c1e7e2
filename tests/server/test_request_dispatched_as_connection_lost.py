"""A request dispatched in the loop turn that also loses its connection: the handler's coroutine is closed,
not left unstarted.

Found by `eoslog verify --cluster 3` (docs/verification.md, "Again after issue 16's performance work"): a
broker logged "coroutine '_verify_then_append' was never awaited". A connection stops dispatching while
a transactional Produce waits for the remote coordinator (``KafkaConnection.hold``) and dispatches the
frames it buffered meanwhile from a callback queued when the hold ends. When the connection's loss is
queued after that callback, the request that callback dispatches has its task cancelled before the
task's first step. The dispatcher used to wrap the handler's coroutine in one of its own (and the leader
hints wrapped the Produce handler's in another), which that cancellation left unstarted.

Real broker and connection; the hold's end and the loss are queued in that order on the broker's loop,
the order that leaves a handler's coroutine unstarted. A long-poll Fetch stands in for the Produce:
every handler that answers with a coroutine took the same path."""

from __future__ import annotations

import inspect
import socket

from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.api import fetch
from eoslog.protocol import codec
from eoslog.protocol.codec import RequestHeader
from eoslog.testing.embedded import EmbeddedBroker
from eoslog.testing.wait import wait_until
from tests.interop.test_backpressure import fetch_request

TOPIC = "lost"


def test_a_long_poll_dispatched_as_its_connection_is_lost_is_closed_not_left_unstarted(monkeypatch):
    polls = []
    long_poll = fetch._long_poll

    def recording(*args):
        coroutine = long_poll(*args)
        polls.append(coroutine)
        return coroutine

    monkeypatch.setattr(fetch, "_long_poll", recording)
    with EmbeddedBroker() as embedded:
        admin = AdminClient({"bootstrap.servers": embedded.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        host, port = embedded.bootstrap.split(":")
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            local_port = sock.getsockname()[1]

            def ours():
                return next((c for c in embedded.broker.dispatcher.connections if c.peer.endswith(f":{local_port}")),
                            None)

            connection = wait_until(lambda: embedded.call(ours), timeout=10, what="the broker's side of the socket")
            release = embedded.call(connection.hold)
            request = fetch_request(TOPIC, 1_000_000)
            request.max_wait_ms = 30_000  # an empty partition: the handler answers with its long poll
            frame = codec.encode_request(RequestHeader(1, 11, 7, "lost"), request)

            def receive_release_then_lose():
                # A held connection does not read its socket, so the Fetch is handed to it as the transport
                # hands what a read brought (in the same read as a held Produce, say).
                connection.get_buffer(-1)[:len(frame)] = frame
                connection.buffer_updated(len(frame))
                assert polls == []  # held: buffered, not dispatched
                release()  # queues the dispatch of the buffered Fetch
                connection._transport.abort()  # queues connection_lost, which runs before the Fetch's task

            embedded.call(receive_release_then_lose)
            wait_until(lambda: embedded.call(lambda: connection.closed and len(polls) == 1), timeout=10,
                       what="the Fetch dispatched and the connection lost")
            wait_until(lambda: inspect.getcoroutinestate(polls[0]) == inspect.CORO_CLOSED, timeout=10,
                       what="the long poll's coroutine closed, not left unstarted")
