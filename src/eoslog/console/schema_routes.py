"""The routes of the schema pages (issue 39, docs/console.md "Schemas"): the subjects of the schema
registry, a subject with its versions and the schema of one, and the diff between two versions.

    /schemas                                   subjects
    /schemas/SUBJECT?version=N                 versions; the schema of N (default: the latest)
    /schemas/SUBJECT/diff?from=A&to=B          B against A (default: the latest against the one before)

A subject may hold any character (Protobuf imports are registered under their file names,
``shop/money.proto``): links carry it as one percent-encoded path segment, read from the path as the
browser sent it, as share_group_routes.py does for group ids. The data comes from the registry's REST API
(schema_views.py says why); the diff is schema_diff.py's. Read-only.
"""

from __future__ import annotations

from urllib.parse import quote, unquote

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.routing import Route

from eoslog.console.pages import Pages, query_int
from eoslog.console.schema_diff import field_changes, line_diff, pretty
from eoslog.console.schema_views import SchemaRegistryAccess, subject_rows, subject_view


def _subject_and_page(request: Request) -> tuple[str, str]:
    """(the subject, "" or "diff") from the raw path /schemas/ENCODED[/diff]."""
    raw = request.scope.get("raw_path")
    path = (raw.decode("ascii", "replace") if raw else quote(request.url.path)).partition("?")[0]
    encoded, _, page = path[len("/schemas/"):].partition("/")
    if not encoded or page not in ("", "diff"):
        raise HTTPException(404, f"no page {path}")
    try:
        return unquote(encoded, errors="strict"), page
    except UnicodeDecodeError:
        raise HTTPException(400, f"the subject in {path} is not UTF-8") from None


def routes(pages: Pages, registry: SchemaRegistryAccess | None) -> list[Route]:
    render = pages.render

    async def call(function, *args):
        return await run_in_threadpool(function, registry, *args)

    def unconfigured(request: Request):
        return render(request, "schemas.html", page="schemas", registry_url=None, rows=[])

    async def listing(request: Request):
        if registry is None or registry.url is None:
            return unconfigured(request)
        return render(request, "schemas.html", page="schemas", registry_url=registry.url,
                      rows=await call(subject_rows))

    async def subject_route(request: Request):
        if registry is None or registry.url is None:
            return unconfigured(request)
        subject, kind = _subject_and_page(request)
        if kind == "diff":
            # the numbers are checked before the registry is asked: a typo is a 400 whether or not the subject exists
            old_number, new_number = query_int(request, "from", None, 1), query_int(request, "to", None, 1)
        else:
            shown_number = query_int(request, "version", None, 1)
        view = await call(subject_view, subject)
        latest = view.latest
        if kind != "diff":
            shown = latest if shown_number is None else view.version(shown_number)
            return render(request, "schema_subject.html", page="schemas", registry_url=registry.url, view=view,
                          shown=shown, text=pretty(shown.schema_type, shown.schema), **_choices(view))
        new = latest if new_number is None else view.version(new_number)
        if old_number is None:
            before = [v for v in view.versions if v.version < new.version]
            old = before[-1] if before else new
        else:
            old = view.version(old_number)
        old_text, new_text = pretty(old.schema_type, old.schema), pretty(new.schema_type, new.schema)
        changes = field_changes(new.schema_type, old.schema, new.schema) if old.schema_type == new.schema_type \
            else None
        return render(request, "schema_diff.html", page="schemas", registry_url=registry.url, view=view, old=old,
                      new=new, lines=line_diff(old_text, new_text), changes=changes,
                      default_from=old.version, default_to=new.version)  # the form shows what is compared

    return [Route("/schemas", listing), Route("/schemas/{rest:path}", subject_route)]


def _choices(view) -> dict:
    """The defaults of the subject page's "compare" form: the latest against the one before."""
    latest = view.latest
    before = [v for v in view.versions if v.version < latest.version]
    return {"default_from": (before[-1] if before else latest).version, "default_to": latest.version}
