"""The routes of the share group pages (KIP-932, docs/share-groups.md): the listing, and a share group with
its members and, per share partition, the start offset and the lag, as `eoslog share-groups list` and
`describe` show them (tools/share_groups_cli.py: ListGroups of type "share" on every broker,
ShareGroupDescribe and DescribeShareGroupOffsets v1 from the group's coordinator). Read-only.

A group id may hold any character: links carry it as one percent-encoded path segment, read from the path
as the browser sent it (as group_routes.py does for consumer groups).
"""

from __future__ import annotations

from urllib.parse import quote, unquote

import click
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.routing import Route

from eoslog.tools.share_groups_cli import describe_share_group, list_share_groups


def share_groups(brokers) -> list[tuple[str, str]]:
    return list_share_groups(brokers)


def share_group(brokers, group_id: str):
    try:
        return describe_share_group(brokers, group_id)
    except click.ClickException as exc:
        if exc.format_message().startswith(f"share group {group_id} not found"):
            raise HTTPException(404, f"no share group {group_id}") from exc
        raise


def routes(pages) -> list[Route]:
    call, render = pages.call, pages.render

    async def listing(request: Request):
        return render(request, "share_groups.html", page="share-groups", rows=await call(share_groups))

    async def group_route(request: Request):
        raw = request.scope.get("raw_path")
        path = raw.decode("ascii", "replace") if raw else quote(request.url.path)
        encoded = path[len("/share-groups/"):]
        if not encoded or "/" in encoded:
            raise HTTPException(404, f"no page {path}")
        try:
            group_id = unquote(encoded, errors="strict")
        except UnicodeDecodeError:
            raise HTTPException(400, f"the group id in {path} is not UTF-8") from None
        view = await call(share_group, group_id)
        lags = [p.lag for p in view.partitions]
        total = sum(lags) if lags and all(lag >= 0 for lag in lags) else None
        return render(request, "share_group.html", page="share-groups", group=view, total_lag=total)

    return [Route("/share-groups", listing), Route("/share-groups/{rest:path}", group_route)]
