"""The Kafka wire codec (no I/O): specs -> generated decoders/encoders, hot paths by hand, error codes.

Entry points (see docs/architecture.md for the contract):

- ``decode_request(frame) -> (RequestHeader, request)``, ``encode_response(header, response) -> pieces``
- ``encode_request(header, request) -> bytes``, ``decode_response(api_key, api_version, frame)``
- ``encode_api_versions_fallback(correlation_id, supported) -> bytes``
- ``messages.<SpecName>`` classes (nested structs as attributes: ``messages.FetchResponse.PartitionData``)
- ``RecordsList`` for records made of buffers and ``FileRegion``s; ``errors`` for codes and exceptions
"""

from __future__ import annotations

import importlib

# Where each name lives. They load on first use (PEP 562), not with the package: importing
# ``eoslog.protocol.errors`` -- which the log, the partitions and the coordinators do -- must not build the
# codec (the specs, the generated decoders, ~10 ms), so that `eoslog serve` opens its port first and loads
# the codec right after (server/broker.py warm-up), before its first request needs it.
_WHERE = {
    "errors": None, "messages": None,
    "RequestHeader": "codec", "decode_data": "codec", "decode_request": "codec", "decode_response": "codec",
    "decode_response_frame": "codec", "encode_api_versions_fallback": "codec", "encode_data": "codec",
    "encode_request": "codec", "encode_response": "codec",
    "ErrorCode": "errors", "InvalidRequest": "errors", "KafkaError": "errors", "UnknownApiKey": "errors",
    "UnsupportedVersion": "errors",
    "Malformed": "wire", "RecordsList": "wire",
}


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"{__name__}.{_WHERE[name] or name}")
    value = module if _WHERE[name] is None else getattr(module, name)
    globals()[name] = value
    return value


__all__ = [
    "ErrorCode", "InvalidRequest", "KafkaError", "Malformed", "RecordsList", "RequestHeader", "UnknownApiKey",
    "UnsupportedVersion", "decode_data", "decode_request", "decode_response", "decode_response_frame",
    "encode_api_versions_fallback", "encode_data", "encode_request", "encode_response", "errors", "messages",
]
