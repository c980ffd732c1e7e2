"""The wire codec's public API: request frames in, response frames out (and the reverse, for tools).

A *frame* here is what follows the 4-byte size prefix on the socket for decoding, and the complete
bytes including the size prefix for encoding. Decoders and encoders are built on first use per
(api_key, api_version) -- generated from the spec by ``codegen``, or hand-specialised where
``specialised`` has one -- and cached.

Request header (Kafka's v1 and v2): int16 api_key, int16 api_version, int32 correlation_id, nullable
int16-length client_id (never compact), and in v2 (flexible API versions) a tagged-field section. The
response header is the int32 correlation_id, plus an empty tagged-field section in flexible versions
except for ApiVersions (see ``schema``).
"""

from __future__ import annotations

import functools
import struct
from typing import NamedTuple

from eoslog.protocol import codegen, messages, schema, specialised, wire
from eoslog.protocol.errors import ErrorCode, InvalidRequest, UnknownApiKey, UnsupportedVersion
from eoslog.protocol.messages import Struct
from eoslog.protocol.wire import Malformed

_HEADER_START = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length
_CORRELATION_ID = struct.Struct(">i")
_FIXED_HEADER = 10
_DECODE_ERRORS = (Malformed, struct.error, IndexError, UnicodeDecodeError, OverflowError)


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


class _Decoder(NamedTuple):
    decode: object  # (buf, pos, end) -> (message, pos)
    flexible: bool  # header v2 (tagged fields after client_id) / response header v1
    name: str


class _Encoder(NamedTuple):
    encode: object  # (message, out, parts) -> None
    cls: type
    header_tail: bytes  # b"\x00" where the header has an (empty) tagged-field section


_request_decoders: dict[tuple[int, int], _Decoder] = {}
_response_encoders: dict[tuple[int, int], _Encoder] = {}
_request_encoders: dict[tuple[int, int], _Encoder] = {}
_response_decoders: dict[tuple[int, int], _Decoder] = {}


def _spec_for(kind: str, api_key: int) -> schema.MessageSpec | None:
    return schema.request_spec(api_key) if kind == "request" else schema.response_spec(api_key)


def generated_decoder(kind: str, api_key: int, api_version: int):
    """The generated (never hand-specialised) decoder, for tests and benchmarks."""
    spec = _spec_for(kind, api_key)
    return codegen.build_decoder(spec, api_version, messages.message_class(spec.name))[0]


def generated_encoder(kind: str, api_key: int, api_version: int):
    spec = _spec_for(kind, api_key)
    return codegen.build_encoder(spec, api_version, messages.message_class(spec.name))[0]


def _build_decoder(kind: str, api_key: int, api_version: int) -> _Decoder | None:
    """None when the key is unknown or the version outside the spec's range."""
    spec = _spec_for(kind, api_key)
    if spec is None or api_version not in spec.valid_versions:
        return None
    fast = specialised.DECODERS.get((kind, api_key, api_version))
    decode = fast or codegen.build_decoder(spec, api_version, messages.message_class(spec.name))[0]
    if kind == "request":
        flexible = schema.request_header_version(api_key, api_version) == 2
    else:
        flexible = schema.response_header_version(api_key, api_version) == 1
    return _Decoder(decode, flexible, f"{spec.name} v{api_version}")


def _build_encoder(kind: str, api_key: int, api_version: int) -> _Encoder:
    spec = _spec_for(kind, api_key)
    if spec is None:
        raise ValueError(f"no {kind} spec for api key {api_key}")
    if api_version not in spec.valid_versions:
        raise ValueError(f"{spec.name} has no version {api_version} (valid: {spec.valid_versions})")
    cls = messages.message_class(spec.name)
    fast = specialised.ENCODERS.get((kind, api_key, api_version))
    encode = fast or codegen.build_encoder(spec, api_version, cls)[0]
    if kind == "request":
        tail = b"\x00" if schema.request_header_version(api_key, api_version) == 2 else b""
    else:
        tail = b"\x00" if schema.response_header_version(api_key, api_version) == 1 else b""
    return _Encoder(encode, cls, tail)


def _read_header(buf: memoryview, end: int) -> tuple[RequestHeader, int]:
    """The v1 part of a request header; returns it and the position after client_id."""
    if end < _FIXED_HEADER:
        raise InvalidRequest(f"request frame of {end} bytes is shorter than the {_FIXED_HEADER}-byte header")
    api_key, api_version, correlation_id, n = _HEADER_START.unpack_from(buf, 0)
    pos = _FIXED_HEADER
    client_id = None
    if n >= 0:
        pos += n
        if pos > end:
            raise InvalidRequest(f"request header: client_id length {n} runs past the end of the frame ({end})")
        try:
            client_id = str(buf[_FIXED_HEADER:pos], "utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidRequest(f"request header: client_id is not UTF-8 ({exc})") from None
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def decode_request(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, Struct]:
    """Decode a request frame (the bytes after the size prefix) into its header and message object.

    Raises ``UnknownApiKey`` for an api key no spec defines, ``UnsupportedVersion`` (carrying the decoded
    header) for a version outside the spec's range, and ``InvalidRequest`` for anything malformed
    (trailing bytes after a complete body are not: see below). Records fields are ``memoryview`` slices
    of ``frame``.
    """
    buf = frame if type(frame) is memoryview else memoryview(frame)
    end = buf.nbytes
    header, pos = _read_header(buf, end)
    key = (header.api_key, header.api_version)
    decoder = _request_decoders.get(key)
    if decoder is None:
        decoder = _build_decoder("request", header.api_key, header.api_version)
        if decoder is None:
            if schema.request_spec(header.api_key) is None:
                raise UnknownApiKey(header.api_key, header.api_version, header.correlation_id)
            raise UnsupportedVersion(header.api_key, header.api_version, header)
        _request_decoders[key] = decoder
    try:
        if decoder.flexible:
            pos = wire.skip_tagged_fields(buf, pos, end)
        request, pos = decoder.decode(buf, pos, end)
    except _DECODE_ERRORS as exc:
        raise InvalidRequest(f"malformed {decoder.name} request (correlation id "
                             f"{header.correlation_id}): {exc}") from None
    # Trailing bytes are ignored, as Kafka's own broker does: librdkafka 2.16 sends Metadata v12 with
    # IncludeClusterAuthorizedOperations and an empty tagged field after the body (3 extra bytes).
    return header, request


def encode_response(header: RequestHeader, response: Struct) -> list:
    """The complete response frame, size prefix included, as a list of pieces to write in order.

    Pieces are bytearrays, the records buffers (``bytes``/``memoryview``) of at least
    ``wire.INLINE_RECORDS_MAX`` bytes, and ``FileRegion``s from ``RecordsList`` records fields.
    """
    key = (header.api_key, header.api_version)
    encoder = _response_encoders.get(key)
    if encoder is None:
        encoder = _response_encoders[key] = _build_encoder("response", header.api_key, header.api_version)
    if type(response) is not encoder.cls:
        raise TypeError(f"api key {header.api_key} needs a {encoder.cls.__name__}, "
                        f"not {type(response).__name__}")
    out = bytearray(4)  # the size, filled in by finish_frame
    out += _CORRELATION_ID.pack(header.correlation_id)
    out += encoder.header_tail
    parts: list = []
    try:
        encoder.encode(response, out, parts)
    except (struct.error, TypeError, AttributeError, ValueError) as exc:
        raise ValueError(f"cannot encode {encoder.cls.__name__} v{header.api_version}: {exc!r}") from exc
    return wire.finish_frame(out, parts)


def encode_request(header: RequestHeader, request: Struct) -> bytes:
    """The complete request frame, size prefix included (for our tools and tests)."""
    key = (header.api_key, header.api_version)
    encoder = _request_encoders.get(key)
    if encoder is None:
        encoder = _request_encoders[key] = _build_encoder("request", header.api_key, header.api_version)
    if type(request) is not encoder.cls:
        raise TypeError(f"api key {header.api_key} needs a {encoder.cls.__name__}, not {type(request).__name__}")
    out = bytearray(4)
    out += struct.pack(">hhi", header.api_key, header.api_version, header.correlation_id)
    if header.client_id is None:
        out += b"\xff\xff"
    else:
        client_id = header.client_id.encode()
        out += struct.pack(">h", len(client_id)) + client_id
    out += encoder.header_tail
    parts: list = []
    try:
        encoder.encode(request, out, parts)
    except (struct.error, TypeError, AttributeError, ValueError) as exc:
        raise ValueError(f"cannot encode {encoder.cls.__name__} v{header.api_version}: {exc!r}") from exc
    pieces = wire.finish_frame(out, parts)
    if any(isinstance(p, wire.FileRegion) for p in pieces):
        raise TypeError("encode_request cannot include a FileRegion; pass bytes")
    return b"".join(pieces)


def decode_response_frame(api_key: int, api_version: int, frame: bytes | memoryview) -> tuple[int, Struct]:
    """Decode a response frame (after the size prefix); returns (correlation_id, response).

    Raises ``wire.Malformed`` (a ValueError) for malformed bytes, ValueError for an unknown key/version.
    """
    key = (api_key, api_version)
    decoder = _response_decoders.get(key)
    if decoder is None:
        decoder = _build_decoder("response", api_key, api_version)
        if decoder is None:
            raise ValueError(f"no response spec for api key {api_key} version {api_version}")
        _response_decoders[key] = decoder
    buf = frame if type(frame) is memoryview else memoryview(frame)
    end = buf.nbytes
    try:
        (correlation_id,) = _CORRELATION_ID.unpack_from(buf, 0)
        pos = 4
        if decoder.flexible:
            pos = wire.skip_tagged_fields(buf, pos, end)
        response, pos = decoder.decode(buf, pos, end)
    except _DECODE_ERRORS as exc:
        raise Malformed(f"malformed {decoder.name} response: {exc}") from None
    if pos != end:
        raise Malformed(f"{end - pos} trailing bytes after {decoder.name} response")
    return correlation_id, response


def decode_response(api_key: int, api_version: int, frame: bytes | memoryview) -> Struct:
    """Decode a response frame (after the size prefix) into its message object."""
    return decode_response_frame(api_key, api_version, frame)[1]


def encode_api_versions_fallback(correlation_id: int, supported: dict[int, tuple[int, int]]) -> bytes:
    """Kafka's answer to an ApiVersions request whose version the broker does not support.

    A complete frame in the v0 layout whatever version was asked (header v0: correlation_id; body:
    int16 error_code = UNSUPPORTED_VERSION, then int32 count of (int16 api_key, int16 min_version,
    int16 max_version)). Clients read it with v0 parsing and retry with a version from the range.
    """
    body = bytearray(struct.pack(">iihi", 0, correlation_id, ErrorCode.UNSUPPORTED_VERSION, len(supported)))
    for api_key in sorted(supported):
        low, high = supported[api_key]
        body += struct.pack(">hhh", api_key, low, high)
    struct.pack_into(">i", body, 0, len(body) - 4)
    return bytes(body)


@functools.cache
def _data_codec(name: str, version: int):
    spec = schema.load_spec(name)
    if spec.kind != "data" or version not in spec.valid_versions:
        raise ValueError(f"{name} is not a data spec with version {version}")
    cls = messages.message_class(name)
    return codegen.build_decoder(spec, version, cls)[0], codegen.build_encoder(spec, version, cls)[0]


def decode_data(name: str, version: int, data: bytes | memoryview) -> Struct:
    """Decode a spec of type ``data`` (e.g. ``ConsumerProtocolSubscription``) from the whole of ``data``."""
    decode = _data_codec(name, version)[0]
    buf = data if type(data) is memoryview else memoryview(data)
    try:
        obj, pos = decode(buf, 0, buf.nbytes)
    except _DECODE_ERRORS as exc:
        raise Malformed(f"malformed {name} v{version}: {exc}") from None
    if pos != buf.nbytes:
        raise Malformed(f"{buf.nbytes - pos} trailing bytes after {name} v{version}")
    return obj


def encode_data(obj: Struct, version: int) -> bytes:
    """Encode an object of a ``data`` spec (the version prefix, if the format has one, is the caller's)."""
    out = bytearray()
    _data_codec(type(obj).SPEC.name, version)[1](obj, out, [])
    return bytes(out)
