"""The admin tools' view of a cluster: one blocking connection per broker, found through Metadata, and
each request sent where Kafka serves it: a partition's requests to its leader, a transactional id's or
a group's to its coordinator (FindCoordinator), cluster-wide listings to every broker. A single node is
the one-broker case of the same thing.
"""

from __future__ import annotations

import socket
import struct

import click

from eoslog.protocol import codec, messages
from eoslog.protocol.errors import ErrorCode
from eoslog.security.client import ClientSecurity, ClientSecurityError

CLIENT_ID = "eoslog-admin-tool"
METADATA, FIND_COORDINATOR = 3, 10
GROUP, TRANSACTION = 0, 1  # FindCoordinator key types


def _load_security(ctx, param, path):
    if path is None:
        return None
    try:
        return ClientSecurity.from_file(path)
    except (ClientSecurityError, OSError) as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from exc


def security_option(command):
    """``--command-config FILE`` (Kafka's tools' name): the TLS and SASL settings of a client config, for
    a secured listener (security/client.py); the command receives them as ``security``."""
    return click.option("--command-config", "security", type=click.Path(exists=True, dir_okay=False),
                        default=None, callback=_load_security,
                        help="Client properties for a secured listener (security.protocol, sasl.*, ssl.*).")(command)


class KafkaWire:
    """One blocking connection, one request at a time: enough for admin tools."""

    def __init__(self, bootstrap: str, timeout: float = 30.0, client_id: str = CLIENT_ID,
                 security: ClientSecurity | None = None) -> None:
        host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
        if security is None:
            self.sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
        else:
            self.sock = security.connect(host.strip("[]"), int(port), timeout)
        self.correlation_id = 0
        self.client_id = client_id
        if security is not None:
            try:
                security.authenticate(self.call)
            except BaseException:
                self.sock.close()
                raise

    def call(self, api_key: int, api_version: int, request):
        self.send(api_key, api_version, request)
        return self.receive(api_key, api_version)

    def send(self, api_key: int, api_version: int, request) -> None:
        """Write a request without waiting for its answer (for tests that hold it in flight);
        :meth:`receive` reads the answers in the order the requests were sent."""
        self.correlation_id += 1
        header = codec.RequestHeader(api_key, api_version, self.correlation_id, self.client_id)
        self.sock.sendall(codec.encode_request(header, request))

    def receive(self, api_key: int, api_version: int):
        size = struct.unpack(">i", self._read(4))[0]
        return codec.decode_response(api_key, api_version, self._read(size))

    def _read(self, n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk
        return bytes(data)

    def close(self) -> None:
        self.sock.close()


class Brokers:
    """Connections to the brokers of the cluster behind ``bootstrap`` (comma-separated), made lazily."""

    def __init__(self, bootstrap: str, timeout: float = 30.0, security: ClientSecurity | None = None) -> None:
        self.timeout = timeout
        self.security = security  # TLS and SASL for every connection (security/client.py)
        self._bootstrap = self._connect_any([b.strip() for b in bootstrap.split(",") if b.strip()])
        self._wires: dict[int, KafkaWire] = {}
        self._metadata = None

    def _connect_any(self, addresses: list[str]) -> KafkaWire:
        errors = []
        for address in addresses:
            try:
                return KafkaWire(address, self.timeout, security=self.security)
            except ClientSecurityError as exc:
                raise click.ClickException(f"{address}: {exc}") from exc
            except OSError as exc:
                errors.append(f"{address}: {exc}")
        raise click.ClickException(f"cannot reach any broker ({'; '.join(errors) or 'no address given'})")

    def call(self, api_key: int, api_version: int, request):
        """To whichever broker answered first (requests any broker serves)."""
        try:
            return self._bootstrap.call(api_key, api_version, request)
        except ConnectionError as exc:
            hint = "" if self.security is not None else (
                " (a TLS or SASL listener? give the client settings with --command-config)")
            raise click.ClickException(f"{exc}{hint}") from exc

    def metadata(self, topics: list[str] | None = None, refresh: bool = False):
        if topics is not None or refresh or self._metadata is None:
            request = messages.MetadataRequest(
                topics=None if topics is None else [messages.MetadataRequest.MetadataRequestTopic(name=t)
                                                    for t in topics], allow_auto_topic_creation=False)
            response = self.call(METADATA, 4, request)
            if topics is None:
                self._metadata = response
            return response
        return self._metadata

    def node_ids(self) -> list[int]:
        return sorted(b.node_id for b in self.metadata().brokers)

    def node(self, node_id: int) -> KafkaWire:
        wire = self._wires.get(node_id)
        if wire is None:
            broker = next((b for b in self.metadata().brokers if b.node_id == node_id), None)
            if broker is None:
                broker = next((b for b in self.metadata(refresh=True).brokers if b.node_id == node_id), None)
            if broker is None:
                raise click.ClickException(f"broker {node_id} is not in the cluster's metadata")
            wire = self._wires[node_id] = KafkaWire(f"{broker.host}:{broker.port}", self.timeout,
                                                    security=self.security)
        return wire

    def leader(self, topic: str, partition: int) -> KafkaWire:
        for entry in self.metadata([topic]).topics:
            if entry.name != topic:
                continue
            if entry.error_code:
                raise click.ClickException(f"topic {topic}: {ErrorCode(entry.error_code).name}")
            for p in entry.partitions:
                if p.partition_index == partition:
                    if p.leader_id < 0:
                        raise click.ClickException(f"{topic}-{partition} has no leader right now")
                    return self.node(p.leader_id)
        raise click.ClickException(f"{topic}-{partition} does not exist")

    def coordinator(self, key: str, key_type: int) -> KafkaWire:
        response = self.call(FIND_COORDINATOR, 3, messages.FindCoordinatorRequest(key=key, key_type=key_type))
        if response.error_code:
            raise click.ClickException(f"FindCoordinator {key!r}: {ErrorCode(response.error_code).name}")
        return self.node(response.node_id)

    def each(self):
        """(node id, connection) for every broker: listings that each broker answers for its share."""
        for node_id in self.node_ids():
            yield node_id, self.node(node_id)

    def close(self) -> None:
        self._bootstrap.close()
        for wire in self._wires.values():
            wire.close()
        self._wires.clear()

    def __enter__(self) -> Brokers:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
