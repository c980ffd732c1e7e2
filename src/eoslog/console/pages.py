"""What every route group of the console shares: app.py builds one :class:`Pages` per app and each
``*_routes.py`` module takes it.

- :meth:`Pages.call` runs a blocking view (views.py) in the session's worker thread. A request the
  broker refuses for authorization becomes a note page (``PageNotAuthorized``, authorization.py); any
  other refusal, or a broker out of reach, becomes an error page (502) naming the broker's answer.
- :meth:`Pages.attempt` runs a write action: a refusal (by the broker, or by the checks of the command it
  reuses) is the action's result, for the page it came from to show; a broker out of reach is still an
  error page.
- :meth:`Pages.writes_allowed` guards every write endpoint (403 unless the console runs with
  ``--allow-writes``, or when the browser says the form comes from a page of another site).
- The request helpers parse query parameters and forms into values or a 400 naming the problem.
"""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import parse_qs, quote, urlsplit

import click
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.templating import Jinja2Templates

from eoslog.console import views
from eoslog.console.authorization import PageNotAuthorized, refusal


class Pages:
    def __init__(self, session: views.Session, templates: Jinja2Templates, allow_writes: bool,
                 hanging_after_ms: int) -> None:
        self.session = session
        self.templates = templates
        self.allow_writes = allow_writes
        self.hanging_after_ms = hanging_after_ms  # when an open transaction counts as hanging

    async def call(self, function, *args):
        session = self.session
        try:
            return await run_in_threadpool(session.run, function, *args)
        except click.ClickException as exc:
            if (error := refusal(exc)) is not None:
                raise PageNotAuthorized(exc.format_message(), error) from exc
            raise HTTPException(502, exc.format_message()) from exc
        except (OSError, ConnectionError) as exc:
            raise HTTPException(502, f"the cluster at {session.bootstrap} did not answer: {exc}") from exc

    async def attempt(self, function, *args) -> tuple[object, str | None]:
        """A write action: (its result, None), or (None, the refusal) when the broker or the command's
        own checks refuse it; a broker out of reach is still an error page."""
        session = self.session
        try:
            return await run_in_threadpool(session.run, function, *args), None
        except click.ClickException as exc:
            return None, exc.format_message()
        except (OSError, ConnectionError) as exc:
            raise HTTPException(502, f"the cluster at {session.bootstrap} did not answer: {exc}") from exc

    def render(self, request: Request, name: str, **context):
        return self.templates.TemplateResponse(request, name, context)

    @staticmethod
    def outcome(request: Request) -> dict[str, str | None]:
        """The notice or refusal a write action redirected with."""
        return {"notice": request.query_params.get("notice"), "write_refusal": request.query_params.get("error")}

    def writes_allowed(self, request: Request) -> None:
        if not self.allow_writes:
            raise HTTPException(403, "this console is read-only; start it with --allow-writes to abort "
                                     "transactions, reset offsets or delete records")
        # A page of another site can make the browser POST a form here (no preflight for forms): the
        # browser then names that site in Origin. Only the console's own pages may write; a client
        # without a browser sends no Origin and is let through (it could send anything anyway).
        origin = request.headers.get("origin")
        if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
            raise HTTPException(403, f"a write action from a page of {origin} is refused: only the console's "
                                     "own pages may write")


async def form(request: Request) -> dict[str, str]:
    # url-encoded forms only: no multipart parser needed for three short fields
    body = (await request.body()).decode("utf-8", "replace")
    return {k: v[0] for k, v in parse_qs(body).items()}


def query_int(request: Request, name: str, default: int | None = None, low: int | None = None,
              high: int | None = None) -> int | None:
    raw = request.query_params.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise HTTPException(400, f"{name} must be an integer, got {raw!r}") from None
    if low is not None and value < low or high is not None and value > high:
        bounds = f"at least {low}" if high is None else f"at most {high}" if low is None else f"within [{low}, {high}]"
        raise HTTPException(400, f"{name} must be {bounds}, got {value}")
    return value


def timestamp_ms(raw: str) -> int:
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
