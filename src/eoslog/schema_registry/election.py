"""One writer among the registry's instances, elected through a Kafka group as Confluent's registry and
Karapace elect theirs: every instance joins the group ``schema-registry`` with protocol type ``sr`` and its
identity as metadata; the group's leader (chosen by the group coordinator) assigns the writer, and every
member learns it from SyncGroup. A member that stops heartbeating leaves the group after its session
timeout, and the next rebalance assigns another writer.

The metadata and assignment are the JSON both registries use (``identity`` and ``assignment``), so an
eoslog registry could share a group with them. The election only says who should write: that no two
write is the transactional id's fencing (store.py), so a writer cut off from the group that still thinks
it leads cannot append anything once its successor started.

The choice is sticky (the current writer stays while it is a member and eligible), otherwise the
eligible member with the lowest URL, as Karapace's default.

Threading: one daemon thread owns the group connection; ``on_change`` is called from it with the new
:class:`Assignment` (or None while no writer is known), never concurrently.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from eoslog.client.connection import BrokerConnection, bootstrap_servers
from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.schema_registry.kafka_access import KafkaAccess

log = logging.getLogger(__name__)

PROTOCOL_TYPE = "sr"
PROTOCOL_NAME = "v0"
DEFAULT_GROUP = "schema-registry"
FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 10, 11, 12, 13, 14
NO_ERROR = 0


@dataclass(frozen=True)
class Identity:
    host: str
    port: int
    scheme: str = "http"
    eligible: bool = True

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def to_json(self) -> dict:
        return {"version": 1, "host": self.host, "port": self.port, "scheme": self.scheme,
                "master_eligibility": self.eligible}

    @classmethod
    def from_json(cls, value: dict) -> Identity:
        return cls(str(value["host"]), int(value["port"]), str(value.get("scheme", "http")),
                   bool(value.get("master_eligibility", True)))


@dataclass(frozen=True)
class Assignment:
    generation: int
    writer_member: str | None
    writer: Identity | None
    me: bool


def choose_writer(members: dict[str, Identity], current: str | None) -> str | None:
    """The member to write, from the group leader's view: pure, so it is tested on its own."""
    if current in members and members[current].eligible:
        return current
    eligible = [(identity.url, member) for member, identity in members.items() if identity.eligible]
    return min(eligible)[1] if eligible else None


def assignment_bytes(members: dict[str, Identity], writer: str | None) -> bytes:
    value: dict = {"error": NO_ERROR, "master": writer}
    if writer is not None:
        value["master_identity"] = members[writer].to_json()
    return json.dumps(value, separators=(",", ":")).encode()


class WriterElection:
    def __init__(self, access: KafkaAccess, identity: Identity, on_change: Callable[[Assignment | None], None],
                 group: str = DEFAULT_GROUP, session_timeout_ms: int = 10_000, heartbeat_interval_ms: int = 1_000,
                 rebalance_timeout_ms: int = 30_000) -> None:
        self.access = access
        self.identity = identity
        self.on_change = on_change
        self.group = group
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.member_id = ""
        self.generation = -1
        self.assignment: Assignment | None = None
        self._last_writer: str | None = None
        self._conn: BrokerConnection | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="schema-registry-election", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(15)
        conn = self._conn
        if conn is not None and self.member_id:
            try:
                member = messages.LeaveGroupRequest.MemberIdentity(member_id=self.member_id)
                conn.request(LEAVE_GROUP, 3, messages.LeaveGroupRequest(group_id=self.group, members=[member]))
            except OSError:
                pass
        self._close()

    # ---- the membership loop ----------------------------------------------------------------------------

    def _run(self) -> None:
        backoff = 0.1
        while not self._stop.is_set():
            try:
                self._join_and_sync()
                backoff = 0.1
                self._heartbeat_until_rebalance()
            except (OSError, _Rejoin) as exc:
                if isinstance(exc, OSError):
                    log.info("schema registry group %s: %s; reconnecting", self.group, exc)
                    self._close()
                    self._set(None)
                    self._stop.wait(backoff)
                    backoff = min(backoff * 2, 2.0)
            except Exception:
                log.exception("schema registry group %s", self.group)
                self._close()
                self._set(None)
                self._stop.wait(1.0)

    def _connection(self) -> BrokerConnection:
        if self._conn is not None:
            return self._conn
        security = self.access.security()
        timeout = (self.rebalance_timeout_ms + 5_000) / 1000
        last: OSError | None = None
        for host, port in bootstrap_servers(self.access.bootstrap):
            try:
                conn = BrokerConnection(host, port, client_id="eoslog-schema-registry", timeout_s=timeout,
                                        security=security)
            except OSError as exc:
                last = exc
                continue
            try:
                found = conn.request(FIND_COORDINATOR, 1, messages.FindCoordinatorRequest(key=self.group, key_type=0))
                if found.error_code != NO_ERROR:
                    raise OSError(f"FindCoordinator: {ErrorCode(found.error_code).name}")
                if (found.host, found.port) != conn.address:
                    conn.close()
                    conn = BrokerConnection(found.host, found.port, client_id="eoslog-schema-registry",
                                            timeout_s=timeout, security=security)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
            return conn
        raise last or OSError("no bootstrap server")

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _join_and_sync(self) -> None:
        conn = self._connection()
        metadata = json.dumps(self.identity.to_json(), separators=(",", ":")).encode()
        protocol = messages.JoinGroupRequest.JoinGroupRequestProtocol(name=PROTOCOL_NAME, metadata=metadata)
        while True:
            joined = conn.request(JOIN_GROUP, 5, messages.JoinGroupRequest(
                group_id=self.group, session_timeout_ms=self.session_timeout_ms,
                rebalance_timeout_ms=self.rebalance_timeout_ms, member_id=self.member_id, group_instance_id=None,
                protocol_type=PROTOCOL_TYPE, protocols=[protocol]))
            if joined.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                self.member_id = joined.member_id
                continue
            if joined.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
                continue
            self._check(joined.error_code, "JoinGroup")
            break
        self.member_id, self.generation = joined.member_id, joined.generation_id
        assignments = []
        if joined.leader == self.member_id:
            members = {}
            for member in joined.members:
                try:
                    members[member.member_id] = Identity.from_json(json.loads(bytes(member.metadata)))
                except (ValueError, KeyError, TypeError):
                    log.warning("group %s: member %s sent metadata that is not a registry's", self.group,
                                member.member_id)
            writer = choose_writer(members, self._last_writer)
            value = assignment_bytes(members, writer)
            assignments = [messages.SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=value)
                           for m in members]
        synced = conn.request(SYNC_GROUP, 3, messages.SyncGroupRequest(
            group_id=self.group, generation_id=self.generation, member_id=self.member_id, group_instance_id=None,
            assignments=assignments))
        self._check(synced.error_code, "SyncGroup")
        value = json.loads(bytes(synced.assignment) or b"{}")
        writer = value.get("master")
        identity = Identity.from_json(value["master_identity"]) if value.get("master_identity") else None
        self._set(Assignment(self.generation, writer, identity, writer == self.member_id))

    def _heartbeat_until_rebalance(self) -> None:
        conn = self._connection()
        while not self._stop.wait(self.heartbeat_interval_ms / 1000):
            answer = conn.request(HEARTBEAT, 3, messages.HeartbeatRequest(
                group_id=self.group, generation_id=self.generation, member_id=self.member_id, group_instance_id=None))
            self._check(answer.error_code, "Heartbeat")

    def _check(self, code: int, what: str) -> None:
        if code == NO_ERROR:
            return
        if code in (ErrorCode.REBALANCE_IN_PROGRESS,):
            raise _Rejoin()
        if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION, ErrorCode.FENCED_INSTANCE_ID):
            self.member_id = "" if code == ErrorCode.UNKNOWN_MEMBER_ID else self.member_id
            self._set(None)
            raise _Rejoin()
        raise OSError(f"{what}: {ErrorCode(code).name}")

    def _set(self, assignment: Assignment | None) -> None:
        if assignment == self.assignment:
            return
        if assignment is not None or self.assignment is not None:
            log.info("schema registry group %s: %s", self.group,
                     "no writer known" if assignment is None else
                     f"generation {assignment.generation}, writer {assignment.writer.url if assignment.writer else None}"
                     f"{' (this instance)' if assignment.me else ''}")
        if assignment is not None:
            self._last_writer = assignment.writer_member  # for a sticky choice if this member leads next
        self.assignment = assignment
        self.on_change(assignment)


class _Rejoin(Exception):
    """The group is rebalancing, or this member's generation is gone: join again."""
