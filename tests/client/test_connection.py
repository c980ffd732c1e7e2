"""eoslog.client.connection.BrokerConnection: against a real (embedded) broker, plain and SASL_SSL, and
against a scripted peer (a socket server in a thread) for what a broker does not do on purpose: closing
in the middle of a response, answering with another correlation id, never answering, dribbling a
response a byte at a time."""

from __future__ import annotations

import socket
import ssl
import struct
import threading
from typing import Self

import pytest
from click.testing import CliRunner

from eoslog.client.connection import (
    BrokerConnection,
    ConnectionLost,
    CorrelationIdMismatch,
    bootstrap_servers,
)
from eoslog.protocol import codec, messages
from eoslog.records.builder import SimpleRecord, build_batch
from eoslog.security.client import ClientSecurity, ClientSecurityError
from eoslog.testing.embedded import EmbeddedBroker
from eoslog.testing.process import free_port

PRODUCE, FETCH, METADATA, API_VERSIONS = 0, 1, 3, 18
TOPIC = "connection-test"


# ---- bootstrap.servers --------------------------------------------------------------------------------

def test_bootstrap_servers_are_parsed_in_order_with_listener_names_and_ipv6_brackets():
    assert bootstrap_servers(" a:1, [::1]:2,SASL_SSL://b.example:3,") == [("a", 1), ("::1", 2), ("b.example", 3)]


@pytest.mark.parametrize("bootstrap", ["", " , ", "host", "host:", ":9092", "host:port"])
def test_a_bootstrap_without_host_and_port_is_refused(bootstrap):
    with pytest.raises(ValueError):
        bootstrap_servers(bootstrap)


# ---- a real broker -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker() as embedded:
        yield embedded


def _metadata(topics=None):
    return messages.MetadataRequest(
        topics=None if topics is None else [messages.MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=True)


def test_a_request_is_answered_and_the_socket_does_not_delay_small_writes(broker):
    with BrokerConnection.from_bootstrap(broker.bootstrap, client_id="connection-test") as conn:
        versions = conn.request(API_VERSIONS, 0, messages.ApiVersionsRequest())
        assert versions.error_code == 0 and any(k.api_key == FETCH for k in versions.api_keys)
        assert conn.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        assert conn.address == tuple(bootstrap_servers(broker.bootstrap)[0])
    assert conn.sock.fileno() == -1  # the context manager closed it


def test_from_bootstrap_connects_to_the_first_server_only(broker):
    refused = f"127.0.0.1:{free_port()}"
    with BrokerConnection.from_bootstrap(f"{broker.bootstrap},{refused}") as conn:
        assert conn.request(API_VERSIONS, 0, messages.ApiVersionsRequest()).error_code == 0
    with pytest.raises(ConnectionRefusedError):
        BrokerConnection.from_bootstrap(f"{refused},{broker.bootstrap}")


def test_pipelined_requests_are_answered_in_the_order_sent(broker):
    with BrokerConnection.from_bootstrap(broker.bootstrap) as conn:
        ids = [conn.send(API_VERSIONS, 0, messages.ApiVersionsRequest()),
               conn.send(METADATA, 4, _metadata([])),
               conn.send(API_VERSIONS, 3, messages.ApiVersionsRequest(client_software_name="t",
                                                                     client_software_version="1"))]
        assert ids == sorted(ids) and len(set(ids)) == 3
        with pytest.raises(RuntimeError, match="in flight"):
            conn.request(API_VERSIONS, 0, messages.ApiVersionsRequest())  # would read another's answer
        first, second, third = conn.receive(), conn.receive(), conn.receive()
        assert isinstance(first, messages.ApiVersionsResponse) and first.error_code == 0
        assert isinstance(second, messages.MetadataResponse) and second.brokers
        assert isinstance(third, messages.ApiVersionsResponse) and third.error_code == 0
        with pytest.raises(RuntimeError, match="no request in flight"):
            conn.receive()


def test_fetched_records_are_a_read_only_view_of_the_response_buffer(broker):
    with BrokerConnection.from_bootstrap(broker.bootstrap) as conn:
        [topic] = conn.request(METADATA, 4, _metadata([TOPIC])).topics
        if topic.error_code or not topic.partitions:  # created by that request: ask once it exists
            [topic] = conn.request(METADATA, 4, _metadata([TOPIC])).topics
        assert topic.error_code == 0, topic
        P = messages.ProduceRequest
        produced = conn.request(PRODUCE, 8, P(transactional_id=None, acks=-1, timeout_ms=10_000, topic_data=[
            P.TopicProduceData(name=TOPIC, partition_data=[P.PartitionProduceData(
                index=0, records=build_batch([SimpleRecord(b"k", b"v" * 1000)]))])]))
        assert produced.responses[0].partition_responses[0].error_code == 0
        F = messages.FetchRequest
        fetched = conn.request(FETCH, 11, F(
            replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
            session_epoch=-1, topics=[F.FetchTopic(topic=TOPIC, partitions=[F.FetchPartition(
                partition=0, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
                partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id=""))
        records = fetched.responses[0].partitions[0].records
        assert type(records) is memoryview and records.readonly
        # Zero copy: the records are a slice of the one buffer the whole response was received into.
        assert type(records.obj) is bytearray and len(records.obj) > len(records) > 1000
        assert bytes(records).count(b"v" * 1000) == 1
        with pytest.raises(TypeError):
            records[0] = 0


def test_tls_and_sasl_through_client_security(tmp_path):
    from eoslog.testing.certs import make_certs
    from eoslog.tools.users_cli import users_group

    certs = make_certs(tmp_path / "certs", ())
    data_dir = tmp_path / "data"
    added = CliRunner().invoke(users_group, ["add", "connection-user", "--data-dir", str(data_dir),
                                             "--password-file", "-"], input="connection-secret\n")
    assert added.exit_code == 0, added.output
    port = free_port()
    properties = {"listeners": f"PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:{port}",
                  "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
                  "ssl.keystore.location": str(certs.broker)}
    login = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "connection-user",
             "ssl.ca.location": str(certs.ca)}
    with EmbeddedBroker(data_dir=data_dir, properties=properties):
        security = ClientSecurity.from_properties({**login, "sasl.password": "connection-secret"})
        with BrokerConnection("127.0.0.1", port, timeout_s=10, security=security) as conn:
            assert isinstance(conn.sock, ssl.SSLSocket)
            assert conn.request(API_VERSIONS, 0, messages.ApiVersionsRequest()).error_code == 0
        with pytest.raises(ClientSecurityError, match="SASL authentication"):
            BrokerConnection("127.0.0.1", port, timeout_s=10,
                             security=ClientSecurity.from_properties({**login, "sasl.password": "wrong"}))


# ---- a scripted peer ---------------------------------------------------------------------------------

class ScriptedPeer:
    """Accepts one connection and runs ``script(sock)`` on it in a thread; ``release`` lets a script that
    waits for the test finish. Errors in the script fail the test at exit."""

    def __init__(self, script) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.release = threading.Event()
        self.failure: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, args=(script,), daemon=True)
        self.thread.start()

    def _run(self, script) -> None:
        try:
            sock, _ = self.listener.accept()
            with sock:
                script(self, sock)
        except BaseException as exc:  # noqa: BLE001 - reported by __exit__
            self.failure.append(exc)

    def read_request(self, sock) -> codec.RequestHeader:
        size = struct.unpack(">i", _read_exactly(sock, 4))[0]
        header, _ = codec.decode_request(_read_exactly(sock, size))
        return header

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.release.set()
        self.thread.join(10)
        self.listener.close()
        assert not self.thread.is_alive(), "the scripted peer did not finish"
        if self.failure:
            raise self.failure[0]


def _read_exactly(sock, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "the client closed the connection"
        data += chunk
    return data


def _api_versions_answer(correlation_id: int) -> bytes:
    response = messages.ApiVersionsResponse(error_code=0, api_keys=[
        messages.ApiVersionsResponse.ApiVersion(api_key=API_VERSIONS, min_version=0, max_version=3)])
    return b"".join(codec.encode_response(codec.RequestHeader(API_VERSIONS, 0, correlation_id, None), response))


def _connect(peer: ScriptedPeer, timeout_s: float = 10) -> BrokerConnection:
    return BrokerConnection("127.0.0.1", peer.port, timeout_s=timeout_s)


def test_a_response_in_many_small_pieces_is_read_whole():
    def script(peer, sock):
        header = peer.read_request(sock)
        for byte in _api_versions_answer(header.correlation_id):
            sock.sendall(bytes([byte]))

    with ScriptedPeer(script) as peer, _connect(peer) as conn:
        answer = conn.request(API_VERSIONS, 0, messages.ApiVersionsRequest())
        assert [(k.api_key, k.max_version) for k in answer.api_keys] == [(API_VERSIONS, 3)]


def test_a_peer_closing_in_the_middle_of_a_response_is_a_lost_connection():
    def script(peer, sock):
        header = peer.read_request(sock)
        sock.sendall(_api_versions_answer(header.correlation_id)[:9])  # size, correlation id, one byte

    with ScriptedPeer(script) as peer, _connect(peer) as conn:
        with pytest.raises(ConnectionLost, match="the broker closed the connection"):
            conn.request(API_VERSIONS, 0, messages.ApiVersionsRequest())
        assert conn.sock.fileno() == -1


def test_a_peer_closing_before_answering_is_a_lost_connection_and_a_connection_error():
    def script(peer, sock):
        peer.read_request(sock)

    # ConnectionError: what the callers that retry catch
    with ScriptedPeer(script) as peer, _connect(peer) as conn, pytest.raises(ConnectionError):
        conn.request(API_VERSIONS, 0, messages.ApiVersionsRequest())


def test_an_answer_with_another_correlation_id_closes_the_connection():
    def script(peer, sock):
        header = peer.read_request(sock)
        sock.sendall(_api_versions_answer(header.correlation_id + 7))
        peer.release.wait(10)

    with ScriptedPeer(script) as peer, _connect(peer) as conn:
        with pytest.raises(CorrelationIdMismatch) as raised:
            conn.request(API_VERSIONS, 0, messages.ApiVersionsRequest())
        assert (raised.value.got, raised.value.expected) == (8, 1)
        assert str(raised.value) == "response for correlation id 8, expected 1"
        assert conn.sock.fileno() == -1


def test_a_negative_frame_size_is_a_lost_connection():
    def script(peer, sock):
        peer.read_request(sock)
        sock.sendall(struct.pack(">i", -5))
        peer.release.wait(10)

    with ScriptedPeer(script) as peer, _connect(peer) as conn, pytest.raises(ConnectionLost, match="size -5"):
        conn.request(API_VERSIONS, 0, messages.ApiVersionsRequest())


def test_no_answer_within_the_timeout_closes_the_connection():
    def script(peer, sock):
        peer.read_request(sock)
        peer.release.wait(10)  # the answer would come after the client gave up

    with ScriptedPeer(script) as peer, _connect(peer, timeout_s=0.2) as conn:
        with pytest.raises(TimeoutError):
            conn.request(API_VERSIONS, 0, messages.ApiVersionsRequest())
        assert conn.sock.fileno() == -1  # a late answer must not be taken for the next request's
