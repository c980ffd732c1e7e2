"""A Fetch answer's file regions are streamed as the socket drains: a consumer that reads slowly costs the
broker about WRITE_HIGH_WATER of memory, not its whole answer, and still gets every byte in order, over a
descriptor of its own (docs/benchmarks.md, "fetch responses read into memory for slow consumers").

A real broker and a raw socket that stops reading; the broker's connection is inspected on its loop."""

from __future__ import annotations

import os
import socket
import struct

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.protocol import codec, messages
from eoslog.protocol.codec import RequestHeader
from eoslog.records import decode_batches
from eoslog.server import network
from eoslog.testing.embedded import EmbeddedBroker
from eoslog.testing.wait import wait_until
from tests.interop.test_backpressure import fetch_request

TOPIC = "streamed"
VALUE = 100_000


def _answer_records() -> int:
    """Enough 100 KB records that the answer outgrows what the kernel's socket buffers take at once
    (net.ipv4.tcp_wmem's maximum, 4 MiB by default) by 2 MB more than the broker may hold itself."""
    try:
        with open("/proc/sys/net/ipv4/tcp_wmem") as wmem:
            kernel = int(wmem.read().split()[2])
    except (OSError, ValueError, IndexError):
        kernel = 4 * 1024 * 1024
    return (kernel + network.WRITE_HIGH_WATER + 2_000_000) // VALUE + 1


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(min(n - len(data), 1 << 20))
        assert chunk, f"connection closed after {len(data)} of {n} bytes"
        data += chunk
    return bytes(data)


def _client_connections(embedded: EmbeddedBroker, port: int):
    return [c for c in embedded.broker.dispatcher.connections if c.peer.endswith(f":{port}")]


def test_a_slow_consumer_holds_little_memory_and_gets_every_byte():
    with EmbeddedBroker() as embedded:
        producer = Producer({"bootstrap.servers": embedded.bootstrap, "linger.ms": 50,
                             "message.max.bytes": 2_000_000})
        admin = AdminClient({"bootstrap.servers": embedded.bootstrap})  # kept alive until the answer is in
        admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
        values = [bytes([i % 256]) * VALUE for i in range(_answer_records())]
        for value in values:
            producer.produce(TOPIC, value, partition=0)
        second = [b"second-%d" % i for i in range(5)]  # a region behind the parked one, in the same answer
        for value in second:
            producer.produce(TOPIC, value, partition=1)
        assert producer.flush(30) == 0

        host, port = embedded.bootstrap.split(":")
        sock = socket.create_connection((host, int(port)), timeout=30)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        local_port = sock.getsockname()[1]
        request = fetch_request(TOPIC, 50_000_000)
        request.topics[0].partitions.append(messages.FetchRequest.FetchPartition(
            partition=1, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
            partition_max_bytes=1_000_000))
        sock.sendall(codec.encode_request(RequestHeader(1, 11, 7, "slow"), request))

        def parked():  # the rest of partition 0's region and partition 1's wait, each on its own descriptor
            found = _client_connections(embedded, local_port)
            return found and found[0]._unsent and len(found[0]._owned_fds) == 2 and found[0]

        connection = wait_until(lambda: embedded.call(parked), timeout=20, what="a parked file region")
        held = embedded.call(lambda: connection._transport.get_write_buffer_size())
        assert held <= network.WRITE_HIGH_WATER + network.READ_CHUNK, held
        assert all(os.fstat(fd) for fd in connection._owned_fds)  # open while parked

        size = struct.unpack(">i", _recv_exactly(sock, 4))[0]
        correlation_id, response = codec.decode_response_frame(1, 11, _recv_exactly(sock, size))
        assert correlation_id == 7
        got = {}
        for partition in response.responses[0].partitions:
            assert partition.error_code == 0
            batches = decode_batches(bytes(partition.records))
            got[partition.partition_index] = [r.value for batch in batches for r in batch.absolute_records()]
        assert got == {0: values, 1: second}  # every byte, in order

        # Sent: the duplicate descriptor is closed (_write_region), nothing is left parked.
        wait_until(lambda: embedded.call(lambda: not connection._unsent and not connection._owned_fds),
                   timeout=10, what="the parked region released")
        sock.close()
