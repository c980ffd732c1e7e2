"""A write that reached an instance other than the writer, sent on to the writer's URL as it came (method,
path, query, body, credentials), and the writer's answer given back as it is."""

from __future__ import annotations

import http.client
import ssl
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response

from eoslog.schema_registry import errors
from eoslog.schema_registry.errors import RegistryError

FORWARD_TIMEOUT_S = 60.0
_PASSED = ("content-type", "authorization", "accept")


def forward(registry, url: str, request: Request, body: bytes, ssl_context: ssl.SSLContext | None = None) -> Response:
    from eoslog.schema_registry.app import CONTENT_TYPE, FORWARD_WAIT_S, FORWARDED_HEADER, OFFSET_HEADER

    target = urlsplit(url)
    # as it came, still encoded: a subject may hold '/' or spaces
    raw = request.scope.get("raw_path")
    path = raw.decode("latin-1") if raw else request.url.path
    path += f"?{request.url.query}" if request.url.query else ""
    headers = {k: v for k, v in request.headers.items() if k.lower() in _PASSED}
    headers[FORWARDED_HEADER] = registry.identity.url
    if target.scheme == "https":
        conn = http.client.HTTPSConnection(target.hostname, target.port, timeout=FORWARD_TIMEOUT_S,
                                           context=ssl_context or registry.forward_ssl_context)
    else:
        conn = http.client.HTTPConnection(target.hostname, target.port, timeout=FORWARD_TIMEOUT_S)
    try:
        conn.request(request.method, path, body=body or None, headers=headers)
        answer = conn.getresponse()
        content = answer.read()
        offset = answer.getheader(OFFSET_HEADER)
    except OSError as exc:
        raise RegistryError(errors.REQUEST_FORWARDING_FAILED, f"Error while forwarding the request to the "
                            f"writer at {url}: {exc}") from None
    finally:
        conn.close()
    if offset is not None:
        try:
            registry.store.wait_for(int(offset), FORWARD_WAIT_S)
        except RegistryError:
            pass  # the write is done; reading it back here may lag, as it may on any follower
    headers = {OFFSET_HEADER: offset} if offset is not None else {}
    return Response(content, status_code=answer.status, media_type=answer.getheader("content-type") or CONTENT_TYPE,
                    headers=headers)
