"""Which requests real clients send to an in-process broker: api key, version, the fields they set, the bytes.

``with RequestRecorder() as recorder: ...`` wraps the request decoder the dispatcher calls
(``eoslog.protocol.codec.decode_request``), so it sees every request an ``EmbeddedBroker`` or
``EmbeddedCluster`` member in this process decodes, exactly as it arrived, and nothing else changes.
Used by tests/interop/test_client_capture.py and ``python -m eoslog.testing.client_capture`` (the
tables in docs/clients.md).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass
from typing import Self

from eoslog.protocol import codec
from eoslog.protocol.messages import Struct


@dataclass(frozen=True, slots=True)
class Recorded:
    client_id: str | None
    api_key: int
    api_version: int
    request: Struct
    frame: bytes  # the request as it arrived, after the size prefix


def set_fields(obj: Struct, prefix: str = "") -> set[str]:
    """Dotted paths of the fields ``obj`` holds with a value other than the spec's default (in any
    element of an array): what a client chose to send beyond the defaults."""
    out: set[str] = set()
    default = type(obj)()
    for name in obj.FIELDS:
        value = getattr(obj, name)
        path = prefix + name
        if isinstance(value, Struct):
            out |= set_fields(value, path + ".")
        elif isinstance(value, list) and value and isinstance(value[0], Struct):
            for item in value:
                out |= set_fields(item, path + ".")
        elif isinstance(value, memoryview):
            if value.nbytes:
                out.add(path)
        elif value != getattr(default, name):
            out.add(path)
    return out


class RequestRecorder:
    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._original = None
        self._decode = codec.decode_request

    def __enter__(self) -> Self:
        self._original = original = codec.decode_request

        def recording(frame):
            header, request = original(frame)
            with self._lock:
                self.requests.append(Recorded(header.client_id, header.api_key, header.api_version, request,
                                              bytes(frame)))
            return header, request

        codec.decode_request = recording
        return self

    def __exit__(self, *exc_info) -> None:
        codec.decode_request = self._original

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()

    def versions(self, client_id_prefix: str = "") -> dict[int, set[int]]:
        """api key -> the versions sent by clients whose client id starts with ``client_id_prefix``."""
        out: dict[int, set[int]] = defaultdict(set)
        for r in self._matching(client_id_prefix):
            out[r.api_key].add(r.api_version)
        return dict(out)

    def fields(self, client_id_prefix: str = "") -> dict[tuple[int, int], set[str]]:
        """(api key, version) -> every field set to a non-default value in at least one such request."""
        out: dict[tuple[int, int], set[str]] = defaultdict(set)
        for r in self._matching(client_id_prefix):
            # Decoded again from the bytes: a handler may have filled in fields (Fetch v13+ topic names).
            _, request = self._decode(r.frame)
            out[(r.api_key, r.api_version)] |= set_fields(request)
        return dict(out)

    def first(self, api_key: int, client_id_prefix: str = "") -> Recorded | None:
        return next((r for r in self._matching(client_id_prefix) if r.api_key == api_key), None)

    def _matching(self, prefix: str) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if (r.client_id or "").startswith(prefix)]


def api_name(api_key: int) -> str:
    """``Fetch`` for 1: the request spec's name without ``Request``."""
    from eoslog.protocol import schema

    spec = schema.request_spec(api_key)
    return spec.name.removesuffix("Request") if spec is not None else str(api_key)

