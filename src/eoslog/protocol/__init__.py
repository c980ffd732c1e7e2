"""The Kafka wire codec (no I/O): specs -> generated decoders/encoders, hot paths by hand, error codes.

Entry points (see docs/architecture.md for the contract):

- ``decode_request(frame) -> (RequestHeader, request)``, ``encode_response(header, response) -> pieces``
- ``encode_request(header, request) -> bytes``, ``decode_response(api_key, api_version, frame)``
- ``encode_api_versions_fallback(correlation_id, supported) -> bytes``
- ``messages.<SpecName>`` classes (nested structs as attributes: ``messages.FetchResponse.PartitionData``)
- ``RecordsList`` for records made of buffers and ``FileRegion``s; ``errors`` for codes and exceptions
"""

from eoslog.protocol import errors, messages
from eoslog.protocol.codec import (
    RequestHeader,
    decode_data,
    decode_request,
    decode_response,
    decode_response_frame,
    encode_api_versions_fallback,
    encode_data,
    encode_request,
    encode_response,
)
from eoslog.protocol.errors import ErrorCode, InvalidRequest, KafkaError, UnknownApiKey, UnsupportedVersion
from eoslog.protocol.wire import Malformed, RecordsList

__all__ = [
    "ErrorCode", "InvalidRequest", "KafkaError", "Malformed", "RecordsList", "RequestHeader", "UnknownApiKey",
    "UnsupportedVersion", "decode_data", "decode_request", "decode_response", "decode_response_frame",
    "encode_api_versions_fallback", "encode_data", "encode_request", "encode_response", "errors", "messages",
]
