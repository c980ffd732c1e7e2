"""The routes of the transaction groups pages (transaction_groups.py gathers what they show), kept apart
from the other pages' so that they can grow without touching them."""

from __future__ import annotations

from starlette.requests import Request
from starlette.routing import Route

from eoslog.console import transaction_groups
from eoslog.console.pages import Pages


def routes(pages: Pages) -> list[Route]:
    call, render, hanging_after_ms = pages.call, pages.render, pages.hanging_after_ms

    async def listing(request: Request):
        return render(request, "transaction_groups.html", page="transaction-groups",
                      view=await call(transaction_groups.transaction_groups, hanging_after_ms),
                      hanging_after_ms=hanging_after_ms, stuck_commit_ms=transaction_groups.STUCK_COMMIT_MS)

    async def detail(request: Request):
        name = request.path_params["group_name"]
        return render(request, "transaction_group.html", page="transaction-groups", group_name=name,
                      view=await call(transaction_groups.transaction_group, name, hanging_after_ms),
                      hanging_after_ms=hanging_after_ms)

    return [Route("/transaction-groups", listing), Route("/transaction-groups/{group_name:path}", detail)]
