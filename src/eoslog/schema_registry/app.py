"""The REST API (Confluent Schema Registry v1) as a Starlette app over a :class:`SchemaRegistry`.

Every route runs its work in Starlette's thread pool: reads take the store's lock, writes wait for
Kafka. A write that reaches an instance that is not the writer is forwarded to the writer's URL
(``forward.py``), once: a forwarded request is never forwarded again, so two instances that disagree
about the writer answer 50003 instead of passing a request back and forth. The writer answers with the
offset of its last record (``OFFSET_HEADER``), and the forwarding instance waits until its own reader
applied it, so what a client wrote through any instance it can read back from the same one.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from eoslog.schema_registry import decisions, errors, queries
from eoslog.schema_registry.errors import RegistryError
from eoslog.schema_registry.registry import SchemaRegistry

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
OFFSET_HEADER = "X-Eoslog-Schemas-Offset"
FORWARDED_HEADER = "X-Eoslog-Forwarded"
FORWARD_WAIT_S = 10.0
# A subject may hold '/' (Protobuf references are registered under their file names, "shop/money.proto"),
# sent as %2F. The server decodes the path before routing, so an encoded slash is kept as this character
# until the route matched, and ``subject()`` turns it back.
_SLASH = "\x00"


class _EncodedSlashes:
    """ASGI middleware: the path routed on is the raw path decoded except for %2F."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        raw = scope.get("raw_path")
        if scope["type"] == "http" and raw and b"%2f" in raw.lower():
            from urllib.parse import unquote

            parts = re.split(r"%2[fF]", raw.decode("latin-1").partition("?")[0])
            scope = {**scope, "path": _SLASH.join(unquote(part) for part in parts)}
        await self.app(scope, receive, send)


class RegistryJSON(JSONResponse):
    media_type = CONTENT_TYPE

    def render(self, content) -> bytes:
        return json.dumps(content, separators=(",", ":"), ensure_ascii=False).encode()


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "false").lower() == "true"


def _error(exc: RegistryError) -> Response:
    return RegistryJSON(exc.body(), status_code=exc.status)


async def _body(request: Request) -> object:
    raw = await request.body()
    if not raw:
        return {}
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise RegistryError(400, f"Unrecognized request body: {exc}") from None


def create_app(registry: SchemaRegistry, *, middleware=None, metrics=None, authorizer=None) -> Starlette:
    """``authorizer``: an ``authorization.SubjectAuthorizer``, or None to let every caller do everything.
    Each route names what it needs (``need``: the request to an operation and a subject, None for the
    global config and mode), checked before any work; lists show only what the caller may read."""
    from eoslog.schema_registry.authorization import CONFIGURE, DELETE, READ, REGISTER
    from eoslog.schema_registry.forward import forward
    from eoslog.schema_registry.security import PRINCIPAL_SCOPE_KEY

    def principal(request: Request) -> str:
        return request.scope.get(PRINCIPAL_SCOPE_KEY, "User:ANONYMOUS")

    def host(request: Request) -> str:
        return request.client.host if request.client else "*"

    async def check(request: Request, need: Callable | None) -> None:
        if authorizer is not None and need is not None:
            operation, subject_name = need(request)
            await run_in_threadpool(authorizer.require, principal(request), host(request), operation, subject_name)

    def visible(request: Request, subject_name: str) -> bool:
        """For filtering under the store's lock: decided on the ACLs already read, never fetching."""
        return authorizer is None or authorizer.may(principal(request), host(request), READ, subject_name,
                                                    refresh=False)

    def id_visible(request: Request, state, schema_id: int) -> int:
        if authorizer is not None and schema_id in state.contents and not any(
                visible(request, r.subject) for r in state.uses_of(schema_id, True)):
            raise RegistryError(errors.FORBIDDEN, f"{principal(request)} may read no subject that uses schema "
                                f"{schema_id}")
        return schema_id

    def read(query: Callable, need: Callable | None = None) -> Callable:
        async def endpoint(request: Request) -> Response:
            try:
                await check(request, need)
                if authorizer is not None:
                    await run_in_threadpool(authorizer.fresh)
                answer = await run_in_threadpool(registry.read, lambda state, catalog: query(request, state, catalog))
            except RegistryError as exc:
                return _error(exc)
            if isinstance(answer, Response):
                return answer
            return RegistryJSON(answer)
        return endpoint

    def write(decide: Callable, need: Callable | None = None, prepare: Callable | None = None) -> Callable:
        async def endpoint(request: Request) -> Response:
            try:
                await check(request, need)
                body = await _body(request) if request.method in ("POST", "PUT") else None
                if not registry.is_writer:
                    if request.headers.get(FORWARDED_HEADER):
                        raise RegistryError(errors.REQUEST_FORWARDING_FAILED, "the request was forwarded here and "
                                            "this instance is not the writer either")
                    url = registry.writer_url()
                    if url is None:
                        raise RegistryError(errors.UNKNOWN_LEADER, "no writer is elected yet; retry")
                    return await run_in_threadpool(forward, registry, url, request, await request.body())
                if prepare is None:
                    answer, offset = await run_in_threadpool(
                        registry.write, lambda state, catalog: decide(request, body, state, catalog))
                else:
                    answer, offset = await run_in_threadpool(
                        registry.write, lambda state, catalog, prepared: decide(request, body, state, catalog,
                                                                              prepared),
                        lambda: prepare(request, body))
            except RegistryError as exc:
                return _error(exc)
            headers = {OFFSET_HEADER: str(offset)} if offset is not None else {}
            return RegistryJSON(answer, headers=headers)
        return endpoint

    def subject(request: Request) -> str:
        return request.path_params["subject"].replace(_SLASH, "/")

    def on_subject(operation) -> Callable:
        return lambda r: (operation, subject(r))

    def on_cluster(operation) -> Callable:
        return lambda r: (operation, None)

    reads, registers, deletes, configures = (on_subject(READ), on_subject(REGISTER), on_subject(DELETE),
                                             on_subject(CONFIGURE))

    def with_body(query: Callable, need: Callable) -> Callable:
        return _read_with_body(registry, query, lambda r: check(r, need))

    def q(request: Request, name: str, default: str = "") -> str:
        return request.query_params.get(name, default)

    routes = [
        Route("/", read(lambda r, s, c: {}), methods=["GET"]),
        Route("/schemas/types", read(lambda r, s, c: queries.schema_types()), methods=["GET"]),
        Route("/contexts", read(lambda r, s, c: ["."]), methods=["GET"]),
        # eoslog's own: which instance writes, as this one knows it (Karapace answers /master_available)
        Route("/eoslog/writer", _writer_endpoint(registry), methods=["GET"]),
        Route("/metrics", _metrics_endpoint(metrics), methods=["GET"]),
        Route("/schemas", read(lambda r, s, c: [x for x in queries.all_schemas(
            s, c, q(r, "subjectPrefix"), _flag(r, "deleted"), _flag(r, "latestOnly")) if visible(r, x["subject"])]),
            methods=["GET"]),
        Route("/schemas/ids/{id:int}", read(lambda r, s, c: queries.schema_by_id(
            s, c, id_visible(r, s, r.path_params["id"]), r.query_params.get("format"))), methods=["GET"]),
        Route("/schemas/ids/{id:int}/schema", read(lambda r, s, c: Response(
            queries.schema_by_id(s, c, id_visible(r, s, r.path_params["id"]), r.query_params.get("format"))[
                "schema"], media_type=CONTENT_TYPE)), methods=["GET"]),
        Route("/schemas/ids/{id:int}/subjects", read(lambda r, s, c: [x for x in queries.subjects_of_id(
            s, r.path_params["id"], _flag(r, "deleted")) if visible(r, x)]), methods=["GET"]),
        Route("/schemas/ids/{id:int}/versions", read(lambda r, s, c: [x for x in queries.versions_of_id(
            s, r.path_params["id"], _flag(r, "deleted")) if visible(r, x["subject"])]), methods=["GET"]),
        Route("/subjects", read(lambda r, s, c: [x for x in queries.subjects(
            s, q(r, "subjectPrefix"), _flag(r, "deleted")) if visible(r, x)]), methods=["GET"]),
        Route("/subjects/{subject}/versions", read(lambda r, s, c: queries.versions(
            s, subject(r), _flag(r, "deleted")), reads), methods=["GET"]),
        Route("/subjects/{subject}/versions", write(lambda r, body, s, c, prepared: decisions.register(
            s, c, subject(r), prepared[0], _flag(r, "normalize"), parsed=prepared[1]), registers,
            prepare=lambda r, body: registry.parse_request(body)), methods=["POST"]),
        Route("/subjects/{subject}/versions/{version}", read(lambda r, s, c: queries.schema_json(
            queries.version(s, subject(r), r.path_params["version"], _flag(r, "deleted")), c,
            r.query_params.get("format")), reads), methods=["GET"]),
        Route("/subjects/{subject}/versions/{version}/schema", read(lambda r, s, c: Response(
            queries.formatted(queries.version(s, subject(r), r.path_params["version"], _flag(r, "deleted")), c,
                              r.query_params.get("format")), media_type=CONTENT_TYPE), reads), methods=["GET"]),
        Route("/subjects/{subject}/versions/{version}/referencedby", read(lambda r, s, c: s.referenced_by(
            subject(r), queries.version(s, subject(r), r.path_params["version"], True).version), reads),
            methods=["GET"]),
        Route("/subjects/{subject}/versions/{version}", write(lambda r, body, s, c: decisions.delete_version(
            s, subject(r), r.path_params["version"], _flag(r, "permanent")), deletes), methods=["DELETE"]),
        Route("/subjects/{subject}", write(lambda r, body, s, c: decisions.delete_subject(
            s, subject(r), _flag(r, "permanent")), deletes), methods=["DELETE"]),
        Route("/compatibility/subjects/{subject}/versions", with_body(lambda r, body, s, c: (
            queries.check_compatibility(s, c, subject(r), None, body, _flag(r, "normalize"), _flag(r, "verbose"))),
            reads), methods=["POST"]),
        Route("/compatibility/subjects/{subject}/versions/{version}", with_body(
            lambda r, body, s, c: queries.check_compatibility(
                s, c, subject(r), r.path_params["version"], body, _flag(r, "normalize"), _flag(r, "verbose")),
            reads), methods=["POST"]),
        Route("/config", read(lambda r, s, c: queries.config(s, None, True)), methods=["GET"]),
        Route("/config", write(lambda r, body, s, c: decisions.set_config(s, None, body), on_cluster(CONFIGURE)),
              methods=["PUT"]),
        Route("/config", write(lambda r, body, s, c: decisions.delete_config(s, None), on_cluster(CONFIGURE)),
              methods=["DELETE"]),
        Route("/config/{subject}", read(lambda r, s, c: queries.config(s, subject(r), _flag(r, "defaultToGlobal")),
                                        reads), methods=["GET"]),
        Route("/config/{subject}", write(lambda r, body, s, c: decisions.set_config(s, subject(r), body), configures),
              methods=["PUT"]),
        Route("/config/{subject}", write(lambda r, body, s, c: decisions.delete_config(s, subject(r)), configures),
              methods=["DELETE"]),
        Route("/mode", read(lambda r, s, c: queries.mode(s, None, True)), methods=["GET"]),
        Route("/mode", write(lambda r, body, s, c: decisions.set_mode(s, None, body, _flag(r, "force")),
                             on_cluster(CONFIGURE)), methods=["PUT"]),
        Route("/mode/{subject}", read(lambda r, s, c: queries.mode(s, subject(r), _flag(r, "defaultToGlobal")),
                                      reads), methods=["GET"]),
        Route("/mode/{subject}", write(lambda r, body, s, c: decisions.set_mode(s, subject(r), body,
                                                                                _flag(r, "force")), configures),
              methods=["PUT"]),
        Route("/mode/{subject}", write(lambda r, body, s, c: decisions.delete_mode(s, subject(r)), configures),
              methods=["DELETE"]),
    ]
    # POST /subjects/{subject} (lookup) is a read with a body; registered last so /subjects/{s}/versions wins
    routes.append(Route("/subjects/{subject}", with_body(lambda r, body, s, c: queries.lookup(
        s, c, subject(r), body, _flag(r, "normalize"), _flag(r, "deleted")), reads), methods=["POST"]))

    async def not_found(request: Request, exc) -> Response:
        status = getattr(exc, "status_code", 404)
        return RegistryJSON({"error_code": status, "message": f"HTTP {status} {getattr(exc, 'detail', '')}".strip()},
                            status_code=status)

    async def failed(request: Request, exc: Exception) -> Response:
        log.exception("schema registry: %s %s", request.method, request.url.path, exc_info=exc)
        return RegistryJSON({"error_code": 50001, "message": f"Error in the backend data store: {exc}"},
                            status_code=500)

    from starlette.middleware import Middleware

    from eoslog.schema_registry.metrics import MetricsMiddleware

    innermost = [Middleware(MetricsMiddleware, metrics=metrics, routes=routes)] if metrics is not None else []
    return Starlette(routes=routes, middleware=[Middleware(_EncodedSlashes), *(middleware or []), *innermost],
                     exception_handlers={404: not_found, 405: not_found, Exception: failed})


def _metrics_endpoint(metrics) -> Callable:
    async def endpoint(request: Request) -> Response:
        if metrics is None:
            return RegistryJSON({"error_code": 404, "message": "HTTP 404 this registry keeps no metrics"},
                                status_code=404)
        from eoslog.schema_registry.metrics import CONTENT_TYPE as METRICS_TYPE

        return Response(metrics.exposition(), media_type=METRICS_TYPE)
    return endpoint


def _writer_endpoint(registry: SchemaRegistry) -> Callable:
    async def endpoint(request: Request) -> Response:
        return RegistryJSON({"writer": registry.writer_url(), "instance": registry.identity.url,
                             "is_writer": registry.is_writer, "ready": registry.store.ready})
    return endpoint


def _read_with_body(registry: SchemaRegistry, query: Callable, check: Callable) -> Callable:
    """A lookup or a compatibility check: the schema in the body is parsed first, outside the store's lock
    (the query finds it in the catalog's candidates); a body that does not parse is reported by the query."""
    def parse_first(body: object) -> None:
        try:
            registry.require_ready()
            registry.parse_request(body)
        except RegistryError:
            pass

    async def endpoint(request: Request) -> Response:
        try:
            await check(request)
            body = await _body(request)
            await run_in_threadpool(parse_first, body)
            answer = await run_in_threadpool(registry.read, lambda state, catalog: query(request, body, state, catalog))
        except RegistryError as exc:
            return _error(exc)
        return RegistryJSON(answer)
    return endpoint
