"""The routes of the overview page and its polled throughput chart."""

from __future__ import annotations

import asyncio
import time

from starlette.requests import Request
from starlette.routing import Route

from eoslog.console import views
from eoslog.console.history import Series, sparkline
from eoslog.console.pages import Pages

FIRST_INTERVAL_S = 0.5  # between the first two samples; the page polls every REFRESH_S after that


def routes(pages: Pages) -> list[Route]:
    # Records written, as this app sampled them since it started (history.py)
    written = Series()

    async def overview(request: Request):
        return pages.render(request, "overview.html", page="overview", view=await pages.call(views.overview))

    async def throughput(request: Request):
        """The overview's throughput sparkline: records/s between this console's samples. The first request
        takes two samples FIRST_INTERVAL_S apart, so the page shows a rate and a (flat) line at once rather
        than "measuring…" and an empty chart until the next poll."""
        first = not written.samples
        written.add(time.monotonic(), await pages.call(views.records_written))
        if first:
            await asyncio.sleep(FIRST_INTERVAL_S)
            written.add(time.monotonic(), await pages.call(views.records_written))
        rates = written.rates()
        return pages.render(request, "_throughput.html", rate=rates[-1] if rates else None,
                            points=sparkline(rates * 2 if len(rates) == 1 else rates), samples=len(rates))

    return [Route("/", overview), Route("/overview/throughput", throughput)]
