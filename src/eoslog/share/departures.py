"""When a departed member's records may go back (docs/share-groups.md "A leave behind the last
acknowledgement"): the member's share requests running on this broker and its open share session.

librdkafka's ShareConsumer.close() sends its last acknowledgements in a final ShareAcknowledge (epoch -1)
and its leaving ShareGroupHeartbeat right after, on another connection. The group coordinator then tells
the share-partition manager the member left; a release taking a share partition's lock before that
acknowledgement would make the acknowledged records Available again (the acknowledgement then fails and
another member receives them). Kafka releases a member's records when its share session closes, after
that request's acknowledgements; so here a leave waits while the member has a ShareFetch or
ShareAcknowledge running (counted from before its session check, before any await) or a share session
open: the session's close or its connection's drop gives back what is left in any case. A member keeping
its session in use after leaving is waited for at most a bound (its group's record lock duration, by which
the locks of what it held at the leave have run out; the manager then leaves the rest to the locks).

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

    def quiet(self, group_id: str, member_id: str) -> bool:
        return (group_id, member_id) not in self._requests and not self._session_open(group_id, member_id)

    def waiting(self, group_id: str, member_id: str) -> bool:
        """Whether a leave of the member waits here (tests and diagnostics)."""
        return bool(self._waiters.get((group_id, member_id)))

    def changed(self, group_id: str, member_id: str) -> None:
        """A request ended or a session went away (its connection dropped): leaves waiting on a member now
        quiet go on."""
        if self.quiet(group_id, member_id):
            for waiter in self._waiters.pop((group_id, member_id), ()):
                if not waiter.done():
                    waiter.set_result(None)

    async def until_quiet(self, group_id: str, member_id: str, timeout_s: float) -> bool:
        """Waits until the member has no request running and no session open here, at most ``timeout_s``;
        whether it became quiet."""
        if self.quiet(group_id, member_id):
            return True
        member = (group_id, member_id)
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(member, set()).add(waiter)
        try:
            await asyncio.wait_for(waiter, timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            waiters = self._waiters.get(member)
            if waiters is not None:
                waiters.discard(waiter)
                if not waiters:
                    del self._waiters[member]
