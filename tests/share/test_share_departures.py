"""share/departures.py: a leave's release waits behind the member's running share requests and its open
share session, at most a bound (docs/share-groups.md "A leave behind the last acknowledgement")."""

from __future__ import annotations

import asyncio

from eoslog.share.departures import MemberActivity


def _activity(open_sessions: set) -> MemberActivity:
    return MemberActivity(lambda group_id, member_id: (group_id, member_id) in open_sessions)


def test_a_quiet_member_is_released_at_once():
    async def main():
        activity = _activity(set())
        assert await activity.until_quiet("g", "m", timeout_s=0)
    asyncio.run(main())


def test_a_leave_waits_for_the_request_running_and_only_for_that_member():
    async def main():
        activity = _activity(set())
        with activity.request("g", "other"):
            assert activity.quiet("g", "m")
        with activity.request("g", "m"):
            waiting = asyncio.create_task(activity.until_quiet("g", "m", timeout_s=30))
            await asyncio.sleep(0)
            assert activity.waiting("g", "m") and not waiting.done()
            with activity.request("g", "m"):  # a second request of the same member
                pass
            await asyncio.sleep(0)
            assert not waiting.done()  # the first is still running
        assert await asyncio.wait_for(waiting, 5) is True
        assert not activity.waiting("g", "m")
    asyncio.run(main())


def test_a_leave_waits_for_the_open_session_to_go():
    async def main():
        sessions = {("g", "m")}
        activity = _activity(sessions)
        waiting = asyncio.create_task(activity.until_quiet("g", "m", timeout_s=30))
        await asyncio.sleep(0)
        activity.changed("g", "m")  # told, but the session is still open
        await asyncio.sleep(0)
        assert not waiting.done()
        sessions.clear()  # its connection dropped
        activity.changed("g", "m")
        assert await asyncio.wait_for(waiting, 5) is True
    asyncio.run(main())


def test_a_session_kept_open_after_the_leave_is_waited_for_at_most_the_bound():
    async def main():
        activity = _activity({("g", "m")})
        assert await activity.until_quiet("g", "m", timeout_s=0.05) is False
        assert not activity.waiting("g", "m")
    asyncio.run(main())


def test_without_the_session_only_the_running_requests_are_waited_for():
    async def main():
        activity = _activity({("g", "m")})
        assert await activity.until_quiet("g", "m", timeout_s=0, session=False)
        with activity.request("g", "m"):
            waiting = asyncio.create_task(activity.until_quiet("g", "m", timeout_s=30, session=False))
            await asyncio.sleep(0)
            assert not waiting.done()
        assert await asyncio.wait_for(waiting, 5) is True
    asyncio.run(main())
