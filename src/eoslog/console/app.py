"""The console's Starlette application: server-rendered pages, htmx fragments they poll, and the POST
endpoints of the write actions (403 unless the console runs with ``--allow-writes``).

Handlers are async only to hand the blocking admin requests (views.py) to a worker thread; a request the
broker refuses, or a broker out of reach, becomes an error page naming the broker's answer.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import parse_qs, urlencode

import click
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from eoslog.console import actions, transaction_group_routes, views
from eoslog.console.authorization import NotAuthorized, PageNotAuthorized, refusal
from eoslog.console.history import Series, sparkline
from eoslog.console.records_view import text

HERE = Path(__file__).parent
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
REFRESH_S = 2  # how often the live fragments poll


def _datetime(ms: int | None) -> str:
    if ms is None or ms < 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _duration(ms: int | None) -> str:
    if ms is None:
        return "-"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes} min {seconds} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def _int(request: Request, name: str, default: int | None = None, low: int | None = None,
         high: int | None = None) -> int | None:
    raw = request.query_params.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise HTTPException(400, f"{name} must be an integer, got {raw!r}") from None
    if low is not None and value < low or high is not None and value > high:
        raise HTTPException(400, f"{name} must be within [{low}, {high}], got {value}")
    return value


def _timestamp_ms(raw: str) -> int:
    """Milliseconds since the epoch, or an ISO date-time (UTC unless it says otherwise)."""
    raw = raw.strip()
    if raw.lstrip("-").isdigit():
        return int(raw)
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise HTTPException(400, f"timestamp must be milliseconds or an ISO date-time, got {raw!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def create_app(session: views.Session, allow_writes: bool = False, hanging_after_ms: int = 900_000) -> Starlette:
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    templates.env.filters.update(datetime=_datetime, duration=_duration, text=text)
    templates.env.globals.update(allow_writes=allow_writes, refresh_s=REFRESH_S, bootstrap=session.bootstrap)
    templates.env.tests["not_authorized"] = lambda value: isinstance(value, NotAuthorized)
    principal = session.security.username if session.security is not None else None

    async def call(function, *args):
        try:
            return await run_in_threadpool(session.run, function, *args)
        except click.ClickException as exc:
            if (error := refusal(exc)) is not None:
                raise PageNotAuthorized(exc.format_message(), error) from exc
            raise HTTPException(502, exc.format_message()) from exc
        except (OSError, ConnectionError) as exc:
            raise HTTPException(502, f"the cluster at {session.bootstrap} did not answer: {exc}") from exc

    def render(request: Request, name: str, **context):
        return templates.TemplateResponse(request, name, context)

    # Charts the console draws from what it sampled since it started (history.py)
    written = Series()
    lag_history: dict[str, Series] = {}

    async def overview(request: Request):
        return render(request, "overview.html", page="overview", view=await call(views.overview))

    async def throughput(request: Request):
        """The overview's throughput sparkline: records/s between this console's samples."""
        written.add(time.monotonic(), await call(views.records_written))
        rates = written.rates()
        return render(request, "_throughput.html", rate=rates[-1] if rates else None,
                      points=sparkline(rates), samples=len(rates))

    def lag_chart(group) -> str:
        series = lag_history.setdefault(group.group_id, Series())
        series.add(time.monotonic(), sum(p.lag for p in group.partitions if p.lag is not None))
        return sparkline(series.values())

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
        limit = _int(request, "limit", DEFAULT_PAGE_SIZE, 1, MAX_PAGE_SIZE)
        seek = request.query_params.get("timestamp", "").strip()
        if seek:
            offset = await call(views.offset_for_timestamp, name, partition, _timestamp_ms(seek))
        else:
            offset = _int(request, "offset", 0)
        view = await call(views.browse, name, partition, offset, limit, read_committed)
        isolation = "read_committed" if read_committed else "read_uncommitted"

        def link(**changes) -> str:
            query = {"offset": view.from_offset, "limit": limit, "isolation": isolation} | changes
            return f"/topics/{name}/partitions/{partition}/records?{urlencode(query)}"

        return render(request, "records.html", page="topics", view=view, limit=limit, isolation=isolation,
                      link=link, previous_offset=max(view.from_offset - limit, view.log_start_offset))

    async def producers(request: Request):
        name, partition = request.path_params["name"], request.path_params["partition"]
        return render(request, "producers.html", page="topics", topic=name, partition=partition,
                      rows=await call(views.producers, name, partition))

    async def groups(request: Request):
        return render(request, "groups.html", page="groups", rows=await call(views.groups))

    async def group(request: Request):
        view = await call(views.group, request.path_params["group_id"])
        return render(request, "group.html", page="groups", group=view, lag_points=lag_chart(view))

    async def group_partitions(request: Request):
        """The lag table and chart alone: the group page polls them."""
        view = await call(views.group, request.path_params["group_id"])
        return render(request, "_group_partitions.html", group=view, lag_points=lag_chart(view))

    async def transactions(request: Request):
        return render(request, "transactions.html", page="transactions",
                      view=await call(views.transactions, hanging_after_ms),
                      notice=request.query_params.get("notice"))

    async def _form(request: Request) -> dict[str, str]:
        # url-encoded forms only: no multipart parser needed for three short fields
        body = (await request.body()).decode("utf-8", "replace")
        return {k: v[0] for k, v in parse_qs(body).items()}

    def _writes_allowed() -> None:
        if not allow_writes:
            raise HTTPException(403, "this console is read-only; start it with --allow-writes to abort "
                                     "transactions")

    async def abort(request: Request):
        _writes_allowed()
        transactional_id = (await _form(request)).get("transactional_id", "")
        if not transactional_id:
            raise HTTPException(400, "transactional_id is required")
        await call(actions.abort_transaction, transactional_id)
        notice = f"aborting the open transaction of {transactional_id} (producer fenced)"
        return RedirectResponse(f"/transactions?{urlencode({'notice': notice})}", status_code=303)

    async def abort_partition(request: Request):
        _writes_allowed()
        form = await _form(request)
        try:
            topic, partition, start = form["topic"], int(form["partition"]), int(form["start_offset"])
        except (KeyError, ValueError):
            raise HTTPException(400, "topic, partition and start_offset are required") from None
        await call(actions.abort_partition_transaction, topic, partition, start)
        notice = f"wrote an ABORT marker to {topic}-{partition} for the transaction starting at {start}"
        return RedirectResponse(f"/transactions?{urlencode({'notice': notice})}", status_code=303)

    async def http_error(request: Request, exc: HTTPException):
        if request.headers.get("hx-request"):
            return PlainTextResponse(exc.detail, status_code=exc.status_code)
        return templates.TemplateResponse(request, "error.html", {"page": None, "status": exc.status_code,
                                                                  "detail": exc.detail},
                                          status_code=exc.status_code)

    async def not_authorized(request: Request, exc: PageNotAuthorized):
        """A note, not an error page: the principal may not see what this page shows (authorization.py)."""
        if request.headers.get("hx-request"):
            return PlainTextResponse(f"not authorized: {exc.detail}")
        return templates.TemplateResponse(request, "not_authorized.html", {"page": None, "detail": exc.detail,
                                                                           "error": exc.error,
                                                                           "principal": principal})

    routes = [
        Route("/", overview),
        Route("/overview/throughput", throughput),
        Route("/topics", topics),
        Route("/topics/{name}", topic),
        Route("/topics/{name}/partitions/{partition:int}/records", browse),
        Route("/topics/{name}/partitions/{partition:int}/producers", producers),
        Route("/groups", groups),
        Route("/groups/{group_id}", group),
        Route("/groups/{group_id}/partitions", group_partitions),
        Route("/transactions", transactions),
        Route("/transactions/abort", abort, methods=["POST"]),
        Route("/transactions/abort-partition", abort_partition, methods=["POST"]),
        *transaction_group_routes.routes(call, render, hanging_after_ms),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error,
                                                       PageNotAuthorized: not_authorized})
    app.state.session = session
    return app
