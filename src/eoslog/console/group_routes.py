"""The routes of the consumer group pages: the listing, a group with its lag charts, the lag table it
polls, and the reset-offsets write action.

A group id may hold any character (``/``, ``?``, ``#``, ``%``, spaces, any unicode): links carry it as one
percent-encoded path segment (``pages.segment``), and the group's routes read it from the path as the
browser sent it, before ``%2F`` could turn into a separator (``group_route`` below).
"""

from __future__ import annotations

import time
from urllib.parse import quote, unquote, urlencode

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse
from starlette.routing import Route

from eoslog.console import actions, views
from eoslog.console.history import LagHistory, level_line
from eoslog.console.pages import Pages, form, segment, timestamp_ms
from eoslog.tools.common import plural
from eoslog.tools.reset_offsets import Target

RESET_TARGETS = ("earliest", "latest", "timestamp", "offset", "shift")
# A reset's notice names this many partitions: it travels in the redirect's URL, which HTTP servers cap
# (uvicorn's h11 at 16 KiB of request line and headers), and the page's table shows the rest anyway.
NOTICE_PARTITIONS = 20


def reset_target(to: str, value: str) -> Target:
    """The reset form's choice as reset_offsets' Target (tools/reset_offsets.py)."""
    if to in ("earliest", "latest"):
        return Target(to)
    if to == "timestamp":
        if not value.strip():
            raise HTTPException(400, "a timestamp (milliseconds or ISO UTC) is required")
        return Target("datetime", timestamp_ms(value))
    if to in ("offset", "shift"):
        try:
            return Target(to, int(value.strip()))
        except ValueError:
            raise HTTPException(400, f"{to} must be an integer, got {value!r}") from None
    raise HTTPException(400, f"reset to one of {', '.join(RESET_TARGETS)}, not {to!r}")


def routes(pages: Pages) -> list[Route]:
    call, render = pages.call, pages.render
    # Lag per partition, as this app sampled it since it started (history.py)
    lag_history = LagHistory()

    def lag_charts(group) -> dict:
        """The group's charts after sampling it now: the total's points, and each partition's."""
        sampled = lag_history.add(group.group_id, time.monotonic(),
                                  {(p.topic, p.partition): p.lag for p in group.partitions})
        return {"lag_points": level_line(sampled.total.values()),
                "partition_points": {tp: level_line(sampled.values(tp), width=120, height=20, pad=1, decimals=0)
                                     for tp in sampled.partitions}}

    async def groups(request: Request):
        return render(request, "groups.html", page="groups", rows=await call(views.groups))

    async def group(request: Request, group_id: str):
        view = await call(views.group, group_id)
        return render(request, "group.html", page="groups", group=view, reset_targets=RESET_TARGETS,
                      topics=sorted({p.topic for p in view.partitions}), **lag_charts(view),
                      **pages.outcome(request))

    async def group_partitions(request: Request, group_id: str):
        """The lag table and charts alone: the group page polls them."""
        view = await call(views.group, group_id)
        return render(request, "_group_partitions.html", group=view, **lag_charts(view))

    async def reset_offsets(request: Request, group_id: str):
        pages.writes_allowed(request)
        fields = await form(request)
        target = reset_target(fields.get("to", ""), fields.get("value", ""))
        topic = fields.get("topic") or None
        resets, refused = await pages.attempt(actions.reset_offsets, group_id, target, topic)
        back = f"/groups/{segment(group_id)}"
        if refused is not None:
            return RedirectResponse(f"{back}?{urlencode({'error': refused})}", status_code=303)
        moved = ", ".join(f"{r.topic}-{r.partition} {'-' if r.current_offset is None else r.current_offset}"
                          f" → {r.new_offset}" for r in resets[:NOTICE_PARTITIONS])
        more = f" and {len(resets) - NOTICE_PARTITIONS} more" if len(resets) > NOTICE_PARTITIONS else ""
        notice = f"committed new offsets for {plural(len(resets), 'partition')}: {moved}{more}"
        return RedirectResponse(f"{back}?{urlencode({'notice': notice})}", status_code=303)

    # What may follow a group id in its URL, by method: the page, its polled fragment, its write action.
    group_resources = {("", "GET"): group, ("partitions", "GET"): group_partitions,
                       ("reset-offsets", "POST"): reset_offsets}

    async def group_route(request: Request):
        """/groups/ID[/RESOURCE]: ID is read from the path as sent (``raw_path``), where a ``/`` inside it
        is still ``%2F``; Starlette's own path parameters are decoded first and would split it."""
        raw = request.scope.get("raw_path")
        path = raw.decode("ascii", "replace") if raw else quote(request.url.path)
        encoded, _, resource = path[len("/groups/"):].partition("/")
        handler = group_resources.get((resource, request.method))
        if handler is None:
            raise HTTPException(405 if any(r == resource for r, _ in group_resources) else 404,
                                f"no {request.method} {path}")
        try:
            group_id = unquote(encoded, errors="strict")
        except UnicodeDecodeError:
            raise HTTPException(400, f"the group id in {path} is not UTF-8") from None
        return await handler(request, group_id)

    return [Route("/groups", groups), Route("/groups/{rest:path}", group_route, methods=["GET", "POST"])]
