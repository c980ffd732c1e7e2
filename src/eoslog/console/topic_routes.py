"""The routes of the topic pages: the listing, a topic, a partition's records (browsed by offset or
timestamp) and producers, and the delete-records write action."""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse
from starlette.routing import Route

from eoslog.console import actions, views
from eoslog.console.pages import Pages, form, query_int, segment, timestamp_ms

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500


def routes(pages: Pages) -> list[Route]:
    call, render = pages.call, pages.render

    async def topics(request: Request):
        rows = await call(views.topic_rows)
        internal = request.query_params.get("internal") == "1"
        return render(request, "topics.html", page="topics", internal=internal,
                      rows=[r for r in rows if internal or not r.internal])

    async def topic(request: Request):
        view, configs = await call(views.topic_detail, request.path_params["name"])
        return render(request, "topic.html", page="topics", topic=view, configs=configs)

    async def browse(request: Request):
        name, partition = request.path_params["name"], request.path_params["partition"]
        read_committed = request.query_params.get("isolation", "read_uncommitted") == "read_committed"
        limit = query_int(request, "limit", DEFAULT_PAGE_SIZE, 1, MAX_PAGE_SIZE)
        seek = request.query_params.get("timestamp", "").strip()
        if seek:
            offset = await call(views.offset_for_timestamp, name, partition, timestamp_ms(seek))
        else:
            offset = query_int(request, "offset", 0)
        view = await call(views.browse, name, partition, offset, limit, read_committed)
        isolation = "read_committed" if read_committed else "read_uncommitted"

        def link(**changes) -> str:
            query = {"offset": view.from_offset, "limit": limit, "isolation": isolation} | changes
            return f"/topics/{name}/partitions/{partition}/records?{urlencode(query)}"

        return render(request, "records.html", page="topics", view=view, limit=limit, isolation=isolation,
                      link=link, previous_offset=max(view.from_offset - limit, view.log_start_offset),
                      **pages.outcome(request))

    async def producers(request: Request):
        name, partition = request.path_params["name"], request.path_params["partition"]
        return render(request, "producers.html", page="topics", topic=name, partition=partition,
                      rows=await call(views.producers, name, partition))

    async def delete_records(request: Request):
        pages.writes_allowed(request)
        name, partition = request.path_params["name"], request.path_params["partition"]
        try:
            before = int((await form(request)).get("offset", "").strip())
        except ValueError:
            raise HTTPException(400, "offset must be an integer (-1: the high watermark)") from None
        log_start, refused = await pages.attempt(actions.delete_records, name, partition, before)
        back = f"/topics/{segment(name)}/partitions/{partition}/records"
        if refused is not None:
            return RedirectResponse(f"{back}?{urlencode({'error': refused})}", status_code=303)
        notice = f"deleted the records before offset {log_start}: the log now starts there"
        return RedirectResponse(f"{back}?{urlencode({'offset': log_start, 'notice': notice})}", status_code=303)

    return [
        Route("/topics", topics),
        Route("/topics/{name}", topic),
        Route("/topics/{name}/partitions/{partition:int}/records", browse),
        Route("/topics/{name}/partitions/{partition:int}/producers", producers),
        Route("/topics/{name}/partitions/{partition:int}/delete-records", delete_records, methods=["POST"]),
    ]
