"""Client side of the transaction-group APIs (docs/spark.md, "Broker extension: transaction groups").

A small blocking client: one connection to the coordinator (client/connection.py). Every request, the
three private APIs included, is encoded by the codec generated from the specs (``eoslog.protocol.codec``; the private APIs' specs are
``eoslog/protocol/extensions/*.json``), the same one the broker decodes them with.

Retriable answers (CONCURRENT_TRANSACTIONS, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE) and lost connections are retried until a deadline. Retrying a commit is safe:
a commit that did happen answers "already committed" the second time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from eoslog.client.connection import BrokerConnection, bootstrap_servers
from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.security.client import ClientSecurity

API_VERSIONS = 18
FIND_COORDINATOR = 10
FIND_COORDINATOR_VERSION = 1  # non-flexible: key, key_type
METADATA, METADATA_VERSION = 3, 4
TRANSACTION_STATE = "__transaction_state"
COORDINATOR_TYPE_TRANSACTION = 1
CLIENT_ID = "eoslog-spark-sink"
# eoslog's private APIs (docs/spark.md, "Broker extension: transaction groups"), all at version 0
COMMIT_TRANSACTION_GROUP, DESCRIBE_TRANSACTION_GROUPS, ABORT_TRANSACTIONS_BY_PREFIX = 0x7E00, 0x7E01, 0x7E02
VERSION = 0
# A prefix this short could name transactions other than one query's: the broker refuses it too.
MIN_ABORT_PREFIX = 8

_RETRIABLE = frozenset({
    ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
})


@dataclass(frozen=True)
class TxnMember:
    """One Ongoing Kafka transaction to commit as part of a group."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


class TxnGroupError(RuntimeError):
    """The broker refused a transaction-group request with a non-retriable error."""

    def __init__(self, what: str, code: int, response: object = None) -> None:
        name = ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)
        super().__init__(f"{what}: {name}")
        self.code = code
        self.response = response


class Unsupported(TxnGroupError):
    """The broker does not advertise the transaction-group APIs."""


class TxnGroupClient:
    """Talks to the transaction coordinator of a group. Not thread-safe; cheap to create."""

    def __init__(self, bootstrap: str, timeout_s: float = 60.0, security: ClientSecurity | None = None) -> None:
        self.bootstrap = bootstrap
        self.timeout_s = timeout_s
        self.security = security  # the job's kafka.security.protocol / sasl.* / ssl.* (security/client.py)
        self._conn: BrokerConnection | None = None
        self._versions: dict[int, tuple[int, int]] | None = None

    # ---- connection management ---------------------------------------------------------------------

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _connect(self, host: str, port: int) -> BrokerConnection:
        """A connection to one broker with this client's id, timeout and security."""
        return BrokerConnection(host, port, client_id=CLIENT_ID, timeout_s=min(self.timeout_s, 30.0),
                                security=self.security)

    def _bootstrap_connection(self) -> BrokerConnection:
        last: Exception | None = None
        for host, port in bootstrap_servers(self.bootstrap):
            try:
                return self._connect(host, port)
            except OSError as exc:
                last = exc
        raise ConnectionError(f"cannot reach any of {self.bootstrap}: {last}")

    def _ask_any(self, api_key: int, version: int, request, wanted=None):
        """The answer of the first bootstrap server that gives one (one ``wanted`` accepts, when given;
        else the last answer). A server that refuses the connection or drops it mid-answer (a broker
        being killed or restarted) is passed over, as Kafka's clients pass over a bootstrap server they
        cannot use: one broker's fault is not the cluster's."""
        last: Exception | None = None
        answer = None
        for host, port in bootstrap_servers(self.bootstrap):
            try:
                conn = self._connect(host, port)
            except OSError as exc:
                last = exc
                continue
            try:
                answer = conn.request(api_key, version, request)
                if wanted is None or wanted(answer):
                    return answer
            except OSError as exc:  # ConnectionLost included
                last = exc
            finally:
                conn.close()
        if answer is not None:
            return answer
        raise ConnectionError(f"no server of {self.bootstrap} answered: {last}")

    def _api_versions(self) -> dict[int, tuple[int, int]]:
        if self._versions is None:
            response = self._ask_any(API_VERSIONS, 0, messages.ApiVersionsRequest())
            self._versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        return self._versions

    def _coordinator(self, key: str) -> BrokerConnection:
        if self._conn is not None:
            return self._conn
        self._api_versions()
        found = self._ask_any(FIND_COORDINATOR, FIND_COORDINATOR_VERSION, messages.FindCoordinatorRequest(
            key=key, key_type=COORDINATOR_TYPE_TRANSACTION))
        if found.error_code != 0:
            raise Retry(found.error_code)
        self._conn = self._connect(found.host, found.port)
        return self._conn

    def supported(self) -> bool:
        """Whether the broker advertises all three transaction-group APIs at version 0."""
        versions = self._api_versions()
        return all(versions.get(key, (1, 0))[0] <= VERSION <= versions.get(key, (1, 0))[1]
                   for key in (COMMIT_TRANSACTION_GROUP, DESCRIBE_TRANSACTION_GROUPS, ABORT_TRANSACTIONS_BY_PREFIX))

    def _call(self, key: str, api_key: int, request, error_of):
        """Send, decode, retry retriable errors and lost connections until the deadline."""
        deadline = time.monotonic() + self.timeout_s
        delay = 0.01
        while True:
            try:
                conn = self._coordinator(key)
                response = conn.request(api_key, VERSION, request)
                code = error_of(response)
                if code in _RETRIABLE:
                    if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                        self.close()
                    raise Retry(code)
                return response
            except (Retry, OSError, ConnectionError) as exc:
                self.close()
                if time.monotonic() + delay > deadline:
                    raise TimeoutError(f"transaction-group request 0x{api_key:X} did not succeed within "
                                       f"{self.timeout_s} s: {exc!r}") from exc
                time.sleep(delay)
                delay = min(delay * 2, 0.5)

    # ---- the three APIs ------------------------------------------------------------------------------

    def commit(self, group_name: str, sequence: int, members: list[TxnMember] | tuple[TxnMember, ...],
               abort_prefix: str | None = None) -> messages.CommitTransactionGroupResponse:
        """CommitTransactionGroup; raises TxnGroupError unless it committed or was already committed."""
        if not self.supported():
            raise Unsupported("CommitTransactionGroup", ErrorCode.UNSUPPORTED_VERSION)
        Member = messages.CommitTransactionGroupRequest.GroupMember
        request = messages.CommitTransactionGroupRequest(
            group_name=group_name, sequence=sequence, abort_prefix=abort_prefix,
            transactions=[Member(transactional_id=m.transactional_id, producer_id=m.producer_id,
                                 producer_epoch=m.producer_epoch) for m in members])
        response = self._call(group_name, COMMIT_TRANSACTION_GROUP, request, lambda r: r.error_code)
        if response.error_code != 0:
            raise TxnGroupError(f"committing sequence {sequence} of {group_name}", response.error_code, response)
        return response

    def last_committed(self, group_name: str) -> int:
        """The group's last committed sequence, -1 when the broker does not know the group."""
        if not self.supported():
            raise Unsupported("DescribeTransactionGroups", ErrorCode.UNSUPPORTED_VERSION)
        request = messages.DescribeTransactionGroupsRequest(group_names=[group_name])
        groups = self._call(group_name, DESCRIBE_TRANSACTION_GROUPS, request,
                            lambda r: r.groups[0].error_code if r.groups else ErrorCode.UNKNOWN_SERVER_ERROR).groups
        if groups[0].error_code != 0:
            raise TxnGroupError(f"describing {group_name}", groups[0].error_code)
        return groups[0].last_committed_sequence

    def transaction_state_partitions(self, group_name: str) -> int | None:
        """How many partitions ``__transaction_state`` has (None when no broker says): what the sink
        needs to give its members transactional ids coordinated with their group. Metadata, from the
        first bootstrap server that names the partitions: the count is the same everywhere and never
        changes, so it must not wait for one broker (the coordinator of ``group_name`` may be the one
        just killed; one whose view of the cluster lags may not name the topic yet). Only while the topic
        does not exist yet, a FindCoordinator for ``group_name`` creates it (on first use, as Kafka's
        brokers do); retried until it has partitions (on a cluster its creation takes a moment) or the
        client's timeout passes."""
        deadline = time.monotonic() + self.timeout_s
        delay = 0.05
        while True:
            try:
                count = _state_partitions(self._ask_any(METADATA, METADATA_VERSION, messages.MetadataRequest(
                    topics=[messages.MetadataRequest.MetadataRequestTopic(name=TRANSACTION_STATE)],
                    allow_auto_topic_creation=False), wanted=lambda r: _state_partitions(r) is not None))
                if count is not None:
                    return count
                self._coordinator(group_name)
            except (Retry, OSError, ConnectionError):
                self.close()
            if time.monotonic() + delay > deadline:
                return None
            time.sleep(delay)
            delay = min(delay * 2, 0.5)

    def abort_by_prefix(self, prefix: str, coordinator_key: str | None = None) -> tuple[str, ...]:
        """AbortTransactionsByPrefix at the coordinator of ``coordinator_key`` (the group whose members
        the prefix names: they are coordinated with it), or of ``prefix`` itself."""
        if len(prefix) < MIN_ABORT_PREFIX:
            raise ValueError(f"refusing to abort by the short prefix {prefix!r}")
        if not self.supported():
            raise Unsupported("AbortTransactionsByPrefix", ErrorCode.UNSUPPORTED_VERSION)
        response = self._call(coordinator_key or prefix, ABORT_TRANSACTIONS_BY_PREFIX,
                              messages.AbortTransactionsByPrefixRequest(prefix=prefix), lambda r: r.error_code)
        if response.error_code != 0:
            raise TxnGroupError(f"aborting transactions under {prefix!r}", response.error_code)
        return tuple(response.aborted)


def _state_partitions(response: messages.MetadataResponse) -> int | None:
    for topic in response.topics:
        if topic.name == TRANSACTION_STATE and topic.error_code == 0 and topic.partitions:
            return len(topic.partitions)
    return None


class Retry(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code))
        self.code = code


def broker_supports_txn_groups(bootstrap: str, security: ClientSecurity | None = None) -> bool:
    """True when the broker at ``bootstrap`` advertises CommitTransactionGroup and its siblings."""
    try:
        with TxnGroupClient(bootstrap, timeout_s=10, security=security) as client:
            return client.supported()
    except (OSError, ConnectionError):
        return False
