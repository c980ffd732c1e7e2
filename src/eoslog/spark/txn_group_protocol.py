"""Wire codec of the transaction-group APIs (eoslog's private extension). No I/O.

The byte layouts are documented once, in docs/spark.md ("Broker extension: transaction groups"). All are
version 0, non-flexible: Kafka's STRING (int16 length + UTF-8), NULLABLE_STRING (length -1 = null),
ARRAY (int32 count), INT16/32/64 big-endian, BOOL one byte. Request bodies here exclude the request
header; response bodies exclude the int32 correlation id.

The ``encode_*_response`` functions exist for tests and for the broker side; ``decode_*_request``
likewise. Each request/response pair round-trips.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

COMMIT_TRANSACTION_GROUP = 0x7E00  # 32256
DESCRIBE_TRANSACTION_GROUPS = 0x7E01  # 32257
ABORT_TRANSACTIONS_BY_PREFIX = 0x7E02  # 32258
VERSION = 0
MIN_ABORT_PREFIX = 8

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class Malformed(ValueError):
    """Bytes that do not follow the documented layout."""


@dataclass(frozen=True)
class TxnMember:
    """One Ongoing Kafka transaction to commit as part of a group."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


@dataclass(frozen=True)
class CommitRequest:
    group_name: str
    sequence: int
    abort_prefix: str | None
    members: tuple[TxnMember, ...]


@dataclass(frozen=True)
class CommitResponse:
    error_code: int
    already_committed: bool
    last_committed_sequence: int
    member_errors: tuple[tuple[str, int], ...] = ()
    aborted_by_prefix: int = 0
    throttle_time_ms: int = 0


@dataclass(frozen=True)
class GroupDescription:
    group_name: str
    error_code: int
    last_committed_sequence: int
    last_commit_timestamp_ms: int


@dataclass(frozen=True)
class AbortResponse:
    error_code: int
    aborted: tuple[str, ...] = field(default_factory=tuple)
    throttle_time_ms: int = 0


# ---- primitives -----------------------------------------------------------------------------------------

def _string(out: bytearray, value: str | None) -> None:
    if value is None:
        out += _I16.pack(-1)
        return
    data = value.encode("utf-8")
    if len(data) > 0x7FFF:
        raise ValueError(f"string of {len(data)} bytes is too long for an int16 length")
    out += _I16.pack(len(data)) + data


class _Reader:
    def __init__(self, data: bytes | memoryview) -> None:
        self.buf = memoryview(data)
        self.pos = 0

    def _take(self, n: int) -> memoryview:
        if self.pos + n > self.buf.nbytes:
            raise Malformed(f"needs {n} bytes at {self.pos}, only {self.buf.nbytes - self.pos} left")
        view = self.buf[self.pos:self.pos + n]
        self.pos += n
        return view

    def i16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def i64(self) -> int:
        return _I64.unpack(self._take(8))[0]

    def bool(self) -> bool:
        return self._take(1)[0] != 0

    def string(self, nullable: bool = False) -> str | None:
        n = self.i16()
        if n < 0:
            if not nullable:
                raise Malformed(f"null string at {self.pos - 2} where none is allowed")
            return None
        return str(self._take(n), "utf-8")

    def count(self) -> int:
        n = self.i32()
        if n < 0 or n > self.buf.nbytes - self.pos:
            raise Malformed(f"array count {n} at {self.pos - 4} is impossible")
        return n

    def finish(self) -> None:
        if self.pos != self.buf.nbytes:
            raise Malformed(f"{self.buf.nbytes - self.pos} trailing bytes")


# ---- CommitTransactionGroup -----------------------------------------------------------------------------

def encode_commit_request(request: CommitRequest) -> bytes:
    out = bytearray()
    _string(out, request.group_name)
    out += _I64.pack(request.sequence)
    _string(out, request.abort_prefix)
    out += _I32.pack(len(request.members))
    for m in request.members:
        _string(out, m.transactional_id)
        out += _I64.pack(m.producer_id) + _I16.pack(m.producer_epoch)
    return bytes(out)


def decode_commit_request(data: bytes | memoryview) -> CommitRequest:
    r = _Reader(data)
    group, sequence, prefix = r.string(), r.i64(), r.string(nullable=True)
    members = tuple(TxnMember(r.string(), r.i64(), r.i16()) for _ in range(r.count()))
    r.finish()
    return CommitRequest(group, sequence, prefix, members)


def encode_commit_response(response: CommitResponse) -> bytes:
    out = bytearray(_I32.pack(response.throttle_time_ms))
    out += _I16.pack(response.error_code) + bytes((1 if response.already_committed else 0,))
    out += _I64.pack(response.last_committed_sequence)
    out += _I32.pack(len(response.member_errors))
    for transactional_id, code in response.member_errors:
        _string(out, transactional_id)
        out += _I16.pack(code)
    out += _I32.pack(response.aborted_by_prefix)
    return bytes(out)


def decode_commit_response(data: bytes | memoryview) -> CommitResponse:
    r = _Reader(data)
    throttle, code, already, last = r.i32(), r.i16(), r.bool(), r.i64()
    members = tuple((r.string(), r.i16()) for _ in range(r.count()))
    aborted = r.i32()
    r.finish()
    return CommitResponse(code, already, last, members, aborted, throttle)


# ---- DescribeTransactionGroups --------------------------------------------------------------------------

def encode_describe_request(group_names: list[str]) -> bytes:
    out = bytearray(_I32.pack(len(group_names)))
    for name in group_names:
        _string(out, name)
    return bytes(out)


def decode_describe_request(data: bytes | memoryview) -> list[str]:
    r = _Reader(data)
    names = [r.string() for _ in range(r.count())]
    r.finish()
    return names


def encode_describe_response(groups: list[GroupDescription], throttle_time_ms: int = 0) -> bytes:
    out = bytearray(_I32.pack(throttle_time_ms) + _I32.pack(len(groups)))
    for g in groups:
        _string(out, g.group_name)
        out += _I16.pack(g.error_code) + _I64.pack(g.last_committed_sequence)
        out += _I64.pack(g.last_commit_timestamp_ms)
    return bytes(out)


def decode_describe_response(data: bytes | memoryview) -> list[GroupDescription]:
    r = _Reader(data)
    r.i32()
    groups = [GroupDescription(r.string(), r.i16(), r.i64(), r.i64()) for _ in range(r.count())]
    r.finish()
    return groups


# ---- AbortTransactionsByPrefix --------------------------------------------------------------------------

def encode_abort_request(prefix: str) -> bytes:
    out = bytearray()
    _string(out, prefix)
    return bytes(out)


def decode_abort_request(data: bytes | memoryview) -> str:
    r = _Reader(data)
    prefix = r.string()
    r.finish()
    return prefix


def encode_abort_response(response: AbortResponse) -> bytes:
    out = bytearray(_I32.pack(response.throttle_time_ms) + _I16.pack(response.error_code))
    out += _I32.pack(len(response.aborted))
    for transactional_id in response.aborted:
        _string(out, transactional_id)
    return bytes(out)


def decode_abort_response(data: bytes | memoryview) -> AbortResponse:
    r = _Reader(data)
    throttle, code = r.i32(), r.i16()
    aborted = tuple(r.string() for _ in range(r.count()))
    r.finish()
    return AbortResponse(code, aborted, throttle)
