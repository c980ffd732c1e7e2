"""The admin tools' view of a cluster: one blocking connection per broker (client/connection.py), found
through Metadata, and each request sent where Kafka serves it: a partition's requests to its leader, a
transactional id's or a group's to its coordinator (FindCoordinator), cluster-wide listings to every
broker. A single node is the one-broker case of the same thing.
"""

from __future__ import annotations

import time
from typing import Self

import click

from eoslog.client.connection import BrokerConnection
from eoslog.protocol import messages
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


class BrokerNotInMetadata(click.ClickException):
    """A broker id the cluster's Metadata no longer lists: one that stopped after an earlier Metadata named
    it (a partition's leader, a coordinator). A tool asking per partition reports it per partition."""


class Brokers:
    """Connections to the brokers of the cluster behind ``bootstrap`` (comma-separated), made lazily."""

    def __init__(self, bootstrap: str, timeout: float = 30.0, security: ClientSecurity | None = None) -> None:
        self.timeout = timeout
        self.security = security  # TLS and SASL for every connection (security/client.py)
        self._bootstrap = self._connect_any([b.strip() for b in bootstrap.split(",") if b.strip()])
        self._wires: dict[int, BrokerConnection] = {}
        self._metadata = None

    def _connect_any(self, addresses: list[str]) -> BrokerConnection:
        errors = []
        for address in addresses:
            try:
                return BrokerConnection.from_bootstrap(address, client_id=CLIENT_ID, timeout_s=self.timeout,
                                                       security=self.security)
            except ClientSecurityError as exc:
                raise click.ClickException(f"{address}: {exc}") from exc
            except OSError as exc:
                errors.append(f"{address}: {exc}")
        raise click.ClickException(f"cannot reach any broker ({'; '.join(errors) or 'no address given'})")

    def call(self, api_key: int, api_version: int, request):
        """To whichever broker answered first (requests any broker serves)."""
        try:
            return self._bootstrap.request(api_key, api_version, request)
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

    def node(self, node_id: int) -> BrokerConnection:
        wire = self._wires.get(node_id)
        if wire is None:
            broker = next((b for b in self.metadata().brokers if b.node_id == node_id), None)
            if broker is None:
                broker = next((b for b in self.metadata(refresh=True).brokers if b.node_id == node_id), None)
            if broker is None:
                raise BrokerNotInMetadata(f"broker {node_id} is not in the cluster's metadata")
            wire = self._wires[node_id] = BrokerConnection(broker.host, broker.port, client_id=CLIENT_ID,
                                                           timeout_s=self.timeout, security=self.security)
        return wire

    def forget(self, node_id: int) -> None:
        """Close the connection to ``node_id`` (one that failed): the next :meth:`node` opens a new one, to
        the address the then-current metadata gives."""
        wire = self._wires.pop(node_id, None)
        if wire is not None:
            wire.close()
        self._metadata = None

    def leader(self, topic: str, partition: int) -> BrokerConnection:
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

    def coordinator(self, key: str, key_type: int) -> BrokerConnection:
        """A connection to the coordinator of ``key``. As Kafka's admin client does, FindCoordinator is asked
        again, every 100 ms until the tool's timeout, while its answer is retriable (no coordinator yet, a
        load in progress) or names a broker that cannot be reached or is no longer listed: the broker
        asked may not yet have heard that the coordinator stopped, and its next answer names the new one."""
        deadline = time.monotonic() + self.timeout
        while True:
            response = self.call(FIND_COORDINATOR, 3, messages.FindCoordinatorRequest(key=key, key_type=key_type))
            if response.error_code:
                failure = ErrorCode(response.error_code)
                if not failure.retriable:
                    raise click.ClickException(f"FindCoordinator {key!r}: {failure.name}")
                why = failure.name
            else:
                try:
                    return self.node(response.node_id)
                except (OSError, BrokerNotInMetadata) as exc:
                    self.forget(response.node_id)
                    why = f"coordinator {response.node_id}: {exc}"
            if time.monotonic() >= deadline:
                raise click.ClickException(f"FindCoordinator {key!r}: no reachable coordinator within "
                                           f"{self.timeout:g} s (last: {why})")
            time.sleep(0.1)

    def each(self):
        """(node id, connection) for every broker: listings that each broker answers for its share."""
        for node_id in self.node_ids():
            yield node_id, self.node(node_id)

    def close(self) -> None:
        self._bootstrap.close()
        for wire in self._wires.values():
            wire.close()
        self._wires.clear()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
