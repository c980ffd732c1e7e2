"""The console's Starlette application: server-rendered pages, htmx fragments they poll, and the POST
endpoints of the write actions (403 unless the console runs with ``--allow-writes``).

create_app builds the templates and the :class:`pages.Pages` every route group shares, and registers the
route groups, one module per area: overview_routes, topic_routes, group_routes, share_group_routes,
transaction_routes, transaction_group_routes, schema_routes (the schema registry's subjects, when the console
is given one). Handlers are async only to hand the blocking admin requests (views.py) to a
worker thread; a request the broker refuses, or a broker out of reach, becomes an error page naming the
broker's answer. A write action the broker (or the command it reuses) refuses is not an error of the
page: the page it came from shows the refusal, as it shows a success (pages.py).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from eoslog.console import (
    group_routes,
    overview_routes,
    schema_routes,
    share_group_routes,
    topic_routes,
    transaction_group_routes,
    transaction_routes,
    views,
)
from eoslog.console.authorization import NotAuthorized, PageNotAuthorized
from eoslog.console.pages import Pages, segment
from eoslog.console.records_view import text
from eoslog.console.schema_views import SchemaRegistryAccess
from eoslog.tools.common import plural

HERE = Path(__file__).parent
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


def _until(ms: int | None) -> str:
    """How long until ``ms`` (ms since the epoch): "in 1.2 s", "due" once passed, "-" for none."""
    if ms is None or ms < 0:
        return "-"
    left = ms - int(time.time() * 1000)
    return f"in {_duration(left)}" if left > 0 else "due"


def create_app(session: views.Session, allow_writes: bool = False, hanging_after_ms: int = 900_000,
               schema_registry: SchemaRegistryAccess | None = None) -> Starlette:
    """``schema_registry``: where the schema pages read; None, or one without a URL, and they say none is
    configured."""
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    templates.env.filters.update(datetime=_datetime, duration=_duration, until=_until, text=text, segment=segment,
                                 plural=plural)
    templates.env.globals.update(allow_writes=allow_writes, refresh_s=REFRESH_S, bootstrap=session.bootstrap)
    templates.env.tests["not_authorized"] = lambda value: isinstance(value, NotAuthorized)
    principal = session.security.username if session.security is not None else None
    pages = Pages(session, templates, allow_writes, hanging_after_ms)

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
                                                                           "refused_by": exc.refused_by,
                                                                           "principal": principal})

    routes = [
        *overview_routes.routes(pages),
        *topic_routes.routes(pages),
        *group_routes.routes(pages),
        *share_group_routes.routes(pages),
        *transaction_routes.routes(pages),
        *transaction_group_routes.routes(pages),
        *schema_routes.routes(pages, schema_registry),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error,
                                                       PageNotAuthorized: not_authorized})
    app.state.session = session
    return app
