"""The console's Starlette application: server-rendered pages, htmx fragments they poll, and the POST
endpoints of the write actions (403 unless the console runs with ``--allow-writes``).

Handlers are async only to hand the blocking admin requests (views.py) to a worker thread; a request the
broker refuses, or a broker out of reach, becomes an error page naming the broker's answer. A write
action the broker (or the command it reuses) refuses is not an error of the page: the page it came from
shows the refusal, as it shows a success.

A group id may hold any character (``/``, ``?``, ``#``, ``%``, spaces, any unicode): links carry it as one
percent-encoded path segment (the ``segment`` filter), and the group's routes read it from the path as
the browser sent it, before ``%2F`` could turn into a separator (``_group_route``).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

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
from eoslog.console.history import LagHistory, Series, sparkline
from eoslog.console.records_view import text
from eoslog.tools.reset_offsets import Target

HERE = Path(__file__).parent
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
REFRESH_S = 2  # how often the live fragments poll
# A reset's notice names this many partitions: it travels in the redirect's URL, which HTTP servers cap
# (uvicorn's h11 at 16 KiB of request line and headers), and the page's table shows the rest anyway.
NOTICE_PARTITIONS = 20


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


def _until(ms: int | None) -> str:
    """How long until ``ms`` (ms since the epoch): "in 1.2 s", "due" once passed, "-" for none."""
    if ms is None or ms < 0:
        return "-"
    left = ms - int(time.time() * 1000)
    return f"in {_duration(left)}" if left > 0 else "due"


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


def segment(value: str) -> str:
    """``value`` as one URL path segment: every reserved character percent-encoded, ``/`` included (which
    Jinja's ``urlencode`` keeps)."""
    return quote(value, safe="")


RESET_TARGETS = ("earliest", "latest", "timestamp", "offset", "shift")


def _reset_target(to: str, value: str) -> Target:
    """The reset form's choice as reset_offsets' Target (tools/reset_offsets.py)."""
    if to in ("earliest", "latest"):
        return Target(to)
    if to == "timestamp":
        if not value.strip():
            raise HTTPException(400, "a timestamp (milliseconds or ISO UTC) is required")
        return Target("datetime", _timestamp_ms(value))
    if to in ("offset", "shift"):
        try:
            return Target(to, int(value.strip()))
        except ValueError:
            raise HTTPException(400, f"{to} must be an integer, got {value!r}") from None
    raise HTTPException(400, f"reset to one of {', '.join(RESET_TARGETS)}, not {to!r}")


def create_app(session: views.Session, allow_writes: bool = False, hanging_after_ms: int = 900_000) -> Starlette:
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    templates.env.filters.update(datetime=_datetime, duration=_duration, until=_until, text=text, segment=segment)
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

    async def attempt(function, *args) -> tuple[object, str | None]:
        """A write action: (its result, None), or (None, the refusal) when the broker or the command's
        own checks refuse it; a broker out of reach is still an error page."""
        try:
            return await run_in_threadpool(session.run, function, *args), None
        except click.ClickException as exc:
            return None, exc.format_message()
        except (OSError, ConnectionError) as exc:
            raise HTTPException(502, f"the cluster at {session.bootstrap} did not answer: {exc}") from exc

    def render(request: Request, name: str, **context):
        return templates.TemplateResponse(request, name, context)

    def outcome(request: Request) -> dict[str, str | None]:
        """The notice or refusal a write action redirected with."""
        return {"notice": request.query_params.get("notice"), "write_refusal": request.query_params.get("error")}

    # Charts the console draws from what it sampled since it started (history.py)
    written = Series()
    lag_history = LagHistory()

    async def overview(request: Request):
        return render(request, "overview.html", page="overview", view=await call(views.overview))

    async def throughput(request: Request):
        """The overview's throughput sparkline: records/s between this console's samples."""
        written.add(time.monotonic(), await call(views.records_written))
        rates = written.rates()
        return render(request, "_throughput.html", rate=rates[-1] if rates else None,
                      points=sparkline(rates), samples=len(rates))

    def lag_charts(group) -> dict:
        """The group's charts after sampling it now: the total's points, and each partition's."""
        sampled = lag_history.add(group.group_id, time.monotonic(),
                                  {(p.topic, p.partition): p.lag for p in group.partitions})
        return {"lag_points": sparkline(sampled.total.values()),
                "partition_points": {tp: sparkline(sampled.values(tp), width=120, height=20, pad=1, decimals=0)
                                     for tp in sampled.partitions}}

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
                      link=link, previous_offset=max(view.from_offset - limit, view.log_start_offset),
                      **outcome(request))

    async def producers(request: Request):
        name, partition = request.path_params["name"], request.path_params["partition"]
        return render(request, "producers.html", page="topics", topic=name, partition=partition,
                      rows=await call(views.producers, name, partition))

    async def groups(request: Request):
        return render(request, "groups.html", page="groups", rows=await call(views.groups))

    async def group(request: Request, group_id: str):
        view = await call(views.group, group_id)
        return render(request, "group.html", page="groups", group=view, reset_targets=RESET_TARGETS,
                      topics=sorted({p.topic for p in view.partitions}), **lag_charts(view), **outcome(request))

    async def group_partitions(request: Request, group_id: str):
        """The lag table and charts alone: the group page polls them."""
        view = await call(views.group, group_id)
        return render(request, "_group_partitions.html", group=view, **lag_charts(view))

    async def reset_offsets(request: Request, group_id: str):
        _writes_allowed(request)
        form = await _form(request)
        target = _reset_target(form.get("to", ""), form.get("value", ""))
        topic = form.get("topic") or None
        resets, refused = await attempt(actions.reset_offsets, group_id, target, topic)
        back = f"/groups/{segment(group_id)}"
        if refused is not None:
            return RedirectResponse(f"{back}?{urlencode({'error': refused})}", status_code=303)
        moved = ", ".join(f"{r.topic}-{r.partition} {'-' if r.current_offset is None else r.current_offset}"
                          f" → {r.new_offset}" for r in resets[:NOTICE_PARTITIONS])
        more = f" and {len(resets) - NOTICE_PARTITIONS} more" if len(resets) > NOTICE_PARTITIONS else ""
        notice = f"committed new offsets for {len(resets)} partition(s): {moved}{more}"
        return RedirectResponse(f"{back}?{urlencode({'notice': notice})}", status_code=303)

    # What may follow a group id in its URL, by method: the page, its polled fragment, its write action.
    group_resources = {("", "GET"): group, ("partitions", "GET"): group_partitions,
                       ("reset-offsets", "POST"): reset_offsets}

    async def _group_route(request: Request):
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

    async def transactions(request: Request):
        return render(request, "transactions.html", page="transactions",
                      view=await call(views.transactions, hanging_after_ms), **outcome(request))

    async def _form(request: Request) -> dict[str, str]:
        # url-encoded forms only: no multipart parser needed for three short fields
        body = (await request.body()).decode("utf-8", "replace")
        return {k: v[0] for k, v in parse_qs(body).items()}

    def _writes_allowed(request: Request) -> None:
        if not allow_writes:
            raise HTTPException(403, "this console is read-only; start it with --allow-writes to abort "
                                     "transactions, reset offsets or delete records")
        # A page of another site can make the browser POST a form here (no preflight for forms): the
        # browser then names that site in Origin. Only the console's own pages may write; a client
        # without a browser sends no Origin and is let through (it could send anything anyway).
        origin = request.headers.get("origin")
        if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
            raise HTTPException(403, f"a write action from a page of {origin} is refused: only the console's "
                                     "own pages may write")

    async def abort(request: Request):
        _writes_allowed(request)
        transactional_id = (await _form(request)).get("transactional_id", "")
        if not transactional_id:
            raise HTTPException(400, "transactional_id is required")
        _, refused = await attempt(actions.abort_transaction, transactional_id)
        if refused is not None:
            return RedirectResponse(f"/transactions?{urlencode({'error': refused})}", status_code=303)
        notice = f"aborting the open transaction of {transactional_id} (producer fenced)"
        return RedirectResponse(f"/transactions?{urlencode({'notice': notice})}", status_code=303)

    async def abort_partition(request: Request):
        _writes_allowed(request)
        form = await _form(request)
        try:
            topic, partition, start = form["topic"], int(form["partition"]), int(form["start_offset"])
        except (KeyError, ValueError):
            raise HTTPException(400, "topic, partition and start_offset are required") from None
        await call(actions.abort_partition_transaction, topic, partition, start)
        notice = f"wrote an ABORT marker to {topic}-{partition} for the transaction starting at {start}"
        return RedirectResponse(f"/transactions?{urlencode({'notice': notice})}", status_code=303)

    async def delete_records(request: Request):
        _writes_allowed(request)
        name, partition = request.path_params["name"], request.path_params["partition"]
        try:
            before = int((await _form(request)).get("offset", "").strip())
        except ValueError:
            raise HTTPException(400, "offset must be an integer (-1: the high watermark)") from None
        log_start, refused = await attempt(actions.delete_records, name, partition, before)
        back = f"/topics/{segment(name)}/partitions/{partition}/records"
        if refused is not None:
            return RedirectResponse(f"{back}?{urlencode({'error': refused})}", status_code=303)
        notice = f"deleted the records before offset {log_start}: the log now starts there"
        return RedirectResponse(f"{back}?{urlencode({'offset': log_start, 'notice': notice})}", status_code=303)

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
        Route("/topics/{name}/partitions/{partition:int}/delete-records", delete_records, methods=["POST"]),
        Route("/groups", groups),
        Route("/groups/{rest:path}", _group_route, methods=["GET", "POST"]),
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
