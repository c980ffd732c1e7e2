"""ShareFetch's share sessions (KIP-932): which partitions a member fetches, and the request epochs.

A share session is keyed by (group id, member id) and remembers the partitions the member fetches, so
that a request names only what changed. Kafka's rules (SharePartitionManager.newContext and
acknowledgeSessionUpdate, ShareSessionCache, ShareSession, ShareRequestMetadata), as of Kafka 4.2:

ShareFetch, by ShareSessionEpoch:
- 0 opens a session. A request that also acknowledges is INVALID_REQUEST. An existing session of the same
  key is replaced (its records stay with the member: the same member goes on). The new session holds the
  request's partitions (ForgottenTopicsData is ignored) and expects epoch 1 next. With
  ``group.share.max.share.sessions`` sessions already open, the answer is SHARE_SESSION_LIMIT_REACHED
  (retriable). Sessions are never evicted to make room (Kafka dropped time-based eviction, KAFKA-19159):
  a session holds record locks, so it ends only as below.
- -1 closes the session: SHARE_SESSION_NOT_FOUND if there is none; otherwise the request's
  acknowledgements are applied, nothing is fetched, and the member's acquired records in the session's
  partitions go back (``SessionUpdate.release``).
- any other epoch: SHARE_SESSION_NOT_FOUND without a session, INVALID_SHARE_SESSION_EPOCH unless it equals
  the session's expected epoch. The request's partitions are added, then its forgotten ones removed; the
  session's partitions are what the request fetches; the expected epoch moves on (after 2^31 - 1 comes 1).

ShareAcknowledge, by ShareSessionEpoch: 0 is INVALID_SHARE_SESSION_EPOCH (it cannot open a session);
SHARE_SESSION_NOT_FOUND without a session; -1 closes it as above; otherwise the epoch must be the
expected one, which then moves on. The partition set does not change.

A session belongs to the connection that opened it: when that connection closes, the session goes and
its member's records go back (:meth:`ShareSessions.connection_closed`). A session that was replaced or
closed first is not removed again by its old connection closing (KAFKA-19950).

The cache is plain in-memory state with no I/O: nothing here is persisted, so the methods change it
directly and return what the handler needs. The caller serializes calls (one event loop).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from eoslog.share.errors import ShareError

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """ShareRequestMetadata.nextEpoch: +1, wrapping to 1 (0 and -1 keep their meanings)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _MAX_EPOCH else epoch + 1


class ShareSessionKey(NamedTuple):
    group_id: str
    member_id: str


@dataclass(eq=False)
class ShareSession:
    key: ShareSessionKey
    connection_id: str
    epoch: int  # the epoch the next request must carry
    # The partitions fetched, in the order they were added; any hashable name, e.g. (topic id, partition).
    partitions: dict[Hashable, None] = field(default_factory=dict)


@dataclass(frozen=True)
class SessionUpdate:
    """What a ShareFetch or ShareAcknowledge may do after the session check."""

    error: ShareError = ShareError.NONE  # on error nothing was changed and nothing is to be done
    fetch: tuple[Hashable, ...] = ()  # the partitions this ShareFetch reads
    final: bool = False  # epoch -1: acknowledge, fetch nothing, then release
    # The closed session's partitions: after the acknowledgements, release_member(member) in each of them.
    release: tuple[Hashable, ...] = ()


class ShareSessions:
    """The broker's share session cache (Kafka's ShareSessionCache)."""

    def __init__(self, max_sessions: int = 2000) -> None:  # group.share.max.share.sessions
        if max_sessions < 1:
            raise ValueError("group.share.max.share.sessions must be at least 1")
        self.max_sessions = max_sessions
        self._sessions: dict[ShareSessionKey, ShareSession] = {}
        # connection id -> the session it opened, or None once that session was replaced or closed.
        self._connections: dict[str, ShareSessionKey | None] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get(ShareSessionKey(group_id, member_id))

    def members(self, group_id: str) -> int:
        """Sessions open for ``group_id`` (Kafka tells the group coordinator when this reaches 0)."""
        return sum(1 for key in self._sessions if key.group_id == group_id)

    def share_fetch(self, group_id: str, member_id: str, epoch: int, partitions: Iterable[Hashable],
                    forgotten: Iterable[Hashable] = (), *, acknowledges: bool, connection_id: str
                    ) -> SessionUpdate:
        """The session check of a ShareFetch: ``partitions`` are its Topics' partitions, ``forgotten`` its
        ForgottenTopicsData, ``acknowledges`` whether it carries AcknowledgementBatches."""
        key = ShareSessionKey(group_id, member_id)
        if epoch == FINAL_EPOCH:
            return self._close(key)
        if epoch == INITIAL_EPOCH:
            if acknowledges:
                return SessionUpdate(error=ShareError.INVALID_REQUEST)
            self._remove(key)
            if len(self._sessions) >= self.max_sessions:
                return SessionUpdate(error=ShareError.SHARE_SESSION_LIMIT_REACHED)
            session = ShareSession(key, connection_id, next_epoch(INITIAL_EPOCH), dict.fromkeys(partitions))
            self._sessions[key] = session
            self._connections[connection_id] = key
            return SessionUpdate(fetch=tuple(session.partitions))
        session, error = self._expected(key, epoch)
        if session is None:
            return SessionUpdate(error=error)
        for partition in partitions:
            session.partitions.setdefault(partition)
        for partition in forgotten:
            session.partitions.pop(partition, None)
        session.epoch = next_epoch(session.epoch)
        return SessionUpdate(fetch=tuple(session.partitions))

    def share_acknowledge(self, group_id: str, member_id: str, epoch: int) -> SessionUpdate:
        """The session check of a ShareAcknowledge."""
        key = ShareSessionKey(group_id, member_id)
        if epoch == INITIAL_EPOCH:
            return SessionUpdate(error=ShareError.INVALID_SHARE_SESSION_EPOCH)
        if epoch == FINAL_EPOCH:
            return self._close(key)
        session, error = self._expected(key, epoch)
        if session is None:
            return SessionUpdate(error=error)
        session.epoch = next_epoch(session.epoch)
        return SessionUpdate()

    def connection_closed(self, connection_id: str) -> ShareSession | None:
        """The client's connection went away: its session, if still open, is removed and returned (the
        caller releases the member's records in its partitions)."""
        key = self._connections.pop(connection_id, None)
        if key is None:
            return None
        return self._remove(key)

    def _expected(self, key: ShareSessionKey, epoch: int) -> tuple[ShareSession | None, ShareError]:
        session = self._sessions.get(key)
        if session is None:
            return None, ShareError.SHARE_SESSION_NOT_FOUND
        if session.epoch != epoch:
            return None, ShareError.INVALID_SHARE_SESSION_EPOCH
        return session, ShareError.NONE

    def _close(self, key: ShareSessionKey) -> SessionUpdate:
        session = self._remove(key)
        if session is None:
            return SessionUpdate(error=ShareError.SHARE_SESSION_NOT_FOUND)
        return SessionUpdate(final=True, release=tuple(session.partitions))

    def _remove(self, key: ShareSessionKey) -> ShareSession | None:
        session = self._sessions.pop(key, None)
        if session is not None and self._connections.get(session.connection_id) == key:
            self._connections[session.connection_id] = None  # its connection closing later removes nothing
        return session
