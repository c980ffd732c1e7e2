"""The routes of the transactions page (check-back transactions included: views.transactions gathers
them) and its two write actions: aborting a transactional id's open transaction, and writing an ABORT
marker for a hanging one."""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse
from starlette.routing import Route

from eoslog.console import actions, views
from eoslog.console.pages import Pages, form


def routes(pages: Pages) -> list[Route]:
    async def transactions(request: Request):
        return pages.render(request, "transactions.html", page="transactions",
                            view=await pages.call(views.transactions, pages.hanging_after_ms),
                            **pages.outcome(request))

    async def abort(request: Request):
        pages.writes_allowed(request)
        transactional_id = (await form(request)).get("transactional_id", "")
        if not transactional_id:
            raise HTTPException(400, "transactional_id is required")
        _, refused = await pages.attempt(actions.abort_transaction, transactional_id)
        if refused is not None:
            return RedirectResponse(f"/transactions?{urlencode({'error': refused})}", status_code=303)
        notice = f"aborting the open transaction of {transactional_id} (producer fenced)"
        return RedirectResponse(f"/transactions?{urlencode({'notice': notice})}", status_code=303)

    async def abort_partition(request: Request):
        pages.writes_allowed(request)
        fields = await form(request)
        try:
            topic, partition, start = fields["topic"], int(fields["partition"]), int(fields["start_offset"])
        except (KeyError, ValueError):
            raise HTTPException(400, "topic, partition and start_offset are required") from None
        await pages.call(actions.abort_partition_transaction, topic, partition, start)
        notice = f"wrote an ABORT marker to {topic}-{partition} for the transaction starting at {start}"
        return RedirectResponse(f"/transactions?{urlencode({'notice': notice})}", status_code=303)

    return [
        Route("/transactions", transactions),
        Route("/transactions/abort", abort, methods=["POST"]),
        Route("/transactions/abort-partition", abort_partition, methods=["POST"]),
    ]
