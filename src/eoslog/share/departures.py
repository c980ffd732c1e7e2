"""When a departed member's records may go back (docs/share-groups.md "A leave behind the last
acknowledgement"): the member's share requests running on this broker and its open share session.

librdkafka's ShareConsumer.close() sends its last acknowledgements in a final ShareAcknowledge (epoch -1)
and its leaving ShareGroupHeartbeat right after, on another connection. The group coordinator then tells
the share-partition manager the member left; a release taking a share partition's lock before that
acknowledgement would make the acknowledged records Available again (the acknowledgement then fails and
another member receives them). Kafka releases a member's records when its share session closes, after
that request's acknowledgements; so here a leave waits while the member has a ShareFetch or
ShareAcknowledge running (counted from before its session check, before any await) or a share session
open: the session's close or its connection's drop gives back what is left in any case. The session is
waited for only a short grace (the client sent its final request before the leave, on another
connection, so it arrives within the skew between the two): a member that leaves and keeps its session
open still gets its records released then. A request running is always waited for (bounded by the
record lock duration, past which its locks have run out anyway).

Only the broker's event loop uses it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator

Member = tuple[str, str]  # (group id, member id)


class MemberActivity:
    def __init__(self, session_open: Callable[[str, str], bool]) -> None:
        """``session_open(group_id, member_id)``: whether the member has a share session here."""
        self._session_open = session_open
        self._requests: dict[Member, int] = {}
        self._waiters: dict[Member, set[asyncio.Future]] = {}

    @contextlib.contextmanager
    def request(self, group_id: str, member_id: str) -> Iterator[None]:
        """Around one ShareFetch or ShareAcknowledge, entered before its session check."""
        member = (group_id, member_id)
        self._requests[member] = self._requests.get(member, 0) + 1
        try:
            yield
        finally:
            self._requests[member] -= 1
            if not self._requests[member]:
                del self._requests[member]
            self.changed(group_id, member_id)

    def quiet(self, group_id: str, member_id: str, session: bool = True) -> bool:
        """No request of the member running here (nor, with ``session``, a share session open)."""
        return (group_id, member_id) not in self._requests and not (session and self._session_open(group_id, member_id))

    def waiting(self, group_id: str, member_id: str) -> bool:
        """Whether a leave of the member waits here (tests and diagnostics)."""
        return bool(self._waiters.get((group_id, member_id)))

    def changed(self, group_id: str, member_id: str) -> None:
        """A request ended or a session went away (its connection dropped): leaves waiting on a member now
        quiet go on."""
        if self.quiet(group_id, member_id, session=False):
            for waiter in self._waiters.pop((group_id, member_id), ()):
                if not waiter.done():
                    waiter.set_result(None)

    async def until_quiet(self, group_id: str, member_id: str, timeout_s: float, session: bool = True) -> bool:
        """Waits until the member has no request running (and, with ``session``, no session open) here, at
        most ``timeout_s``; whether it became so."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        member = (group_id, member_id)
        while not self.quiet(group_id, member_id, session):
            waiter = loop.create_future()  # woken when a request ends or a session goes
            self._waiters.setdefault(member, set()).add(waiter)
            try:
                await asyncio.wait_for(waiter, max(deadline - loop.time(), 0))
            except TimeoutError:
                return False
            finally:
                waiters = self._waiters.get(member)
                if waiters is not None:
                    waiters.discard(waiter)
                    if not waiters:
                        del self._waiters[member]
        return True
