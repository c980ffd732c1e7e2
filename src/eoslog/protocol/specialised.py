"""Hand-specialised codecs for the two hot paths: Produce request decode and Fetch response encode.

They follow the layouts the specs give (ProduceRequest.json, FetchResponse.json) and must produce
exactly what the generated codec does -- the same objects on decode, the same bytes on encode;
tests/protocol/test_specialised.py proves it for every version registered here. What they do
differently: they read or write neighbouring fixed-width values across field boundaries in one struct
call (e.g. a partition index together with its records length), inline the one-byte cases of varints
and tagged sections, and skip branches for fields that never occur in these versions.

Produce request, versions 3-12 (v13 replaces the topic name with a topic id):
    transactional_id: nullable string, acks: int16, timeout_ms: int32,
    topic_data: [name: string, partition_data: [index: int32, records: nullable records]]
    (v9+: compact strings/arrays/records and an empty tagged-field section after each struct)

Fetch response, versions 4-18 (17 and 18 change only the request):
    throttle_time_ms: int32, [v7+ error_code: int16, session_id: int32],
    responses: [topic: string (v13+ topic_id: uuid),
                partitions: [partition_index: int32, error_code: int16, high_watermark: int64,
                             last_stable_offset: int64, [v5+ log_start_offset: int64],
                             aborted_transactions: nullable [producer_id: int64, first_offset: int64],
                             [v11+ preferred_read_replica: int32], records: nullable records]]
    (v12+: compact forms and tagged sections; the tagged fields -- diverging_epoch, current_leader,
    snapshot_id, v16+ node_endpoints -- are written when not default, as by the generated codec)
"""

from __future__ import annotations

import struct

from eoslog.protocol import messages
from eoslog.protocol.schema import ZERO_UUID
from eoslog.protocol.wire import (
    INLINE_RECORDS_MAX,
    UVARINT_BYTES,
    bad_null,
    read_uvarint,
    skip_tagged_fields,
    too_many,
    truncated,
    uvarint,
    write_records,
)

_new = object.__new__
_h = struct.Struct(">h").unpack_from
_i = struct.Struct(">i").unpack_from
_hii = struct.Struct(">hii").unpack_from
_ii = struct.Struct(">ii").unpack_from
_hi = struct.Struct(">hi").unpack_from


# ---- Produce request decode -----------------------------------------------------------------------


_REQUEST = messages.ProduceRequest
_TOPIC = _REQUEST.TopicProduceData
_PARTITION = _REQUEST.PartitionProduceData


def decode_produce_classic(buf: memoryview, pos: int, end: int):
    """ProduceRequest v3-v8 body (int16/int32 lengths, no tagged fields)."""
    (n,) = _h(buf, pos)
    pos += 2
    if n < 0:
        transactional_id = None
    else:
        e = pos + n
        if e > end:
            raise truncated("ProduceRequest.TransactionalId", pos, n, end)
        transactional_id = str(buf[pos:e], "utf-8")
        pos = e
    acks, timeout_ms, topic_count = _hii(buf, pos)
    pos += 10
    if topic_count < 0:
        raise bad_null("ProduceRequest.TopicData", pos)
    if topic_count > end - pos:
        raise too_many("ProduceRequest.TopicData", topic_count, pos, end)
    topics = []
    for _ in range(topic_count):
        (n,) = _h(buf, pos)
        pos += 2
        if n < 0:
            raise bad_null("ProduceRequest.TopicData.Name", pos)
        e = pos + n
        if e > end:
            raise truncated("ProduceRequest.TopicData.Name", pos, n, end)
        name = str(buf[pos:e], "utf-8")
        (count,) = _i(buf, e)
        pos = e + 4
        if count < 0:
            raise bad_null("ProduceRequest.TopicData.PartitionData", pos)
        if count > end - pos:
            raise too_many("ProduceRequest.TopicData.PartitionData", count, pos, end)
        partitions = []
        for _ in range(count):
            index, n = _ii(buf, pos)  # the partition index and its records length, in one read
            pos += 8
            partition = _new(_PARTITION)
            partition.index = index
            if n < 0:
                partition.records = None
            else:
                e = pos + n
                if e > end:
                    raise truncated("ProduceRequest.TopicData.PartitionData.Records", pos, n, end)
                partition.records = buf[pos:e]
                pos = e
            partitions.append(partition)
        topic = _new(_TOPIC)
        topic.name = name
        topic.topic_id = ZERO_UUID
        topic.partition_data = partitions
        topics.append(topic)
    request = _new(_REQUEST)
    request.transactional_id = transactional_id
    request.acks = acks
    request.timeout_ms = timeout_ms
    request.topic_data = topics
    return request, pos


def decode_produce_flexible(buf: memoryview, pos: int, end: int):
    """ProduceRequest v9-v12 body (compact lengths, tagged-field sections skipped)."""
    n = buf[pos]
    if n < 128:
        pos += 1
    else:
        n, pos = read_uvarint(buf, pos)
    if n == 0:
        transactional_id = None
    else:
        n -= 1
        e = pos + n
        if e > end:
            raise truncated("ProduceRequest.TransactionalId", pos, n, end)
        transactional_id = str(buf[pos:e], "utf-8")
        pos = e
    acks, timeout_ms = _hi(buf, pos)
    pos += 6
    topic_count = buf[pos]
    if topic_count < 128:
        pos += 1
    else:
        topic_count, pos = read_uvarint(buf, pos)
    topic_count -= 1
    if topic_count < 0:
        raise bad_null("ProduceRequest.TopicData", pos)
    if topic_count > end - pos:
        raise too_many("ProduceRequest.TopicData", topic_count, pos, end)
    topics = []
    for _ in range(topic_count):
        n = buf[pos]
        if n < 128:
            pos += 1
        else:
            n, pos = read_uvarint(buf, pos)
        n -= 1
        if n < 0:
            raise bad_null("ProduceRequest.TopicData.Name", pos)
        e = pos + n
        if e > end:
            raise truncated("ProduceRequest.TopicData.Name", pos, n, end)
        name = str(buf[pos:e], "utf-8")
        pos = e
        count = buf[pos]
        if count < 128:
            pos += 1
        else:
            count, pos = read_uvarint(buf, pos)
        count -= 1
        if count < 0:
            raise bad_null("ProduceRequest.TopicData.PartitionData", pos)
        if count > end - pos:
            raise too_many("ProduceRequest.TopicData.PartitionData", count, pos, end)
        partitions = []
        for _ in range(count):
            (index,) = _i(buf, pos)
            pos += 4
            n = buf[pos]
            if n < 128:
                pos += 1
            elif buf[pos + 1] < 128:  # two-byte length: records of 127 B .. 16 KiB
                n = (n & 0x7F) | (buf[pos + 1] << 7)
                pos += 2
            else:
                n, pos = read_uvarint(buf, pos)
            partition = _new(_PARTITION)
            partition.index = index
            if n == 0:
                partition.records = None
            else:
                n -= 1
                e = pos + n
                if e > end:
                    raise truncated("ProduceRequest.TopicData.PartitionData.Records", pos, n, end)
                partition.records = buf[pos:e]
                pos = e
            if buf[pos] == 0:  # the usual empty tagged-field section
                pos += 1
            else:
                pos = skip_tagged_fields(buf, pos, end)
            partitions.append(partition)
        if buf[pos] == 0:
            pos += 1
        else:
            pos = skip_tagged_fields(buf, pos, end)
        topic = _new(_TOPIC)
        topic.name = name
        topic.topic_id = ZERO_UUID
        topic.partition_data = partitions
        topics.append(topic)
    pos = skip_tagged_fields(buf, pos, end)
    request = _new(_REQUEST)
    request.transactional_id = transactional_id
    request.acks = acks
    request.timeout_ms = timeout_ms
    request.topic_data = topics
    return request, pos


# ---- Fetch response encode ------------------------------------------------------------------------


def _compact_length(n: int) -> bytes:
    return UVARINT_BYTES[n] if n < 128 else uvarint(n)


def fetch_encoder(version: int):
    """The FetchResponse body encoder for ``version`` (4-18): ``encode(response, out, parts)``."""
    if not 4 <= version <= 18:
        raise ValueError(f"no specialised FetchResponse encoder for version {version}")
    return _fetch_flexible(version) if version >= 12 else _fetch_classic(version)


def _fetch_classic(version: int):
    """v4-v11. A partition with no aborted transactions and small inline records -- nearly all of
    them -- is written with one pack: its fixed fields, the null aborted-transactions count (-1), the
    preferred read replica (v11) and the records length."""
    top = struct.Struct(">ihii" if version >= 7 else ">ii").pack
    with_log_start = version >= 5
    with_replica = version >= 11
    fixed = struct.Struct(">ihqq" + ("q" if with_log_start else "")).pack
    fast = struct.Struct(">ihqq" + ("q" if with_log_start else "") + "i" + ("i" if with_replica else "") + "i").pack
    pack_h = struct.Struct(">h").pack
    pack_i = struct.Struct(">i").pack
    pack_qq = struct.Struct(">qq").pack

    def encode(o, out: bytearray, parts: list) -> None:
        topics = o.responses
        if version >= 7:
            out += top(o.throttle_time_ms, o.error_code, o.session_id, len(topics))
        else:
            out += top(o.throttle_time_ms, len(topics))
        for topic in topics:
            name = topic.topic.encode()
            partitions = topic.partitions
            out += pack_h(len(name))
            out += name
            out += pack_i(len(partitions))
            for p in partitions:
                records = p.records
                kind = type(records)
                if p.aborted_transactions is None and (kind is bytes or kind is memoryview) \
                        and len(records) < INLINE_RECORDS_MAX:
                    if with_replica:
                        out += fast(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                                    p.log_start_offset, -1, p.preferred_read_replica, len(records))
                    elif with_log_start:
                        out += fast(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                                    p.log_start_offset, -1, len(records))
                    else:
                        out += fast(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                                    -1, len(records))
                    out += records
                    continue
                if with_log_start:
                    out += fixed(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                                 p.log_start_offset)
                else:
                    out += fixed(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset)
                aborted = p.aborted_transactions
                if aborted is None:
                    out += b"\xff\xff\xff\xff"
                else:
                    out += pack_i(len(aborted))
                    for txn in aborted:
                        out += pack_qq(txn.producer_id, txn.first_offset)
                if with_replica:
                    out += pack_i(p.preferred_read_replica)
                write_records(out, parts, records, False)

    return encode


# The defaults of PartitionData's tagged fields. A partition holding these very objects (the Fetch handler
# shares them: api/fetch.py) skips the comparisons and gets the one-byte empty section.
_FR = messages.FetchResponse
NO_DIVERGING_EPOCH = _FR.EpochEndOffset()
NO_CURRENT_LEADER = _FR.LeaderIdAndEpoch()
NO_SNAPSHOT_ID = _FR.SnapshotId()
_pack_iq = struct.Struct(">iq").pack
_pack_ii = struct.Struct(">ii").pack
_pack_qi = struct.Struct(">qi").pack
_pack_i = struct.Struct(">i").pack


def _partition_tags(p) -> bytes:
    """PartitionData's tagged section: diverging_epoch (0), current_leader (1), snapshot_id (2), each
    written when not its default (-1s), compared field by field (cheaper than Struct.__eq__)."""
    found = []
    d, c, s = p.diverging_epoch, p.current_leader, p.snapshot_id
    if d.epoch != -1 or d.end_offset != -1:
        found.append((0, _pack_iq(d.epoch, d.end_offset)))
    if c.leader_id != -1 or c.leader_epoch != -1:
        found.append((1, _pack_ii(c.leader_id, c.leader_epoch)))
    if s.end_offset != -1 or s.epoch != -1:
        found.append((2, _pack_qi(s.end_offset, s.epoch)))
    return _tag_section(found, b"\x00") if found else b"\x00"


def _tag_section(found: list[tuple[int, bytes]], suffix: bytes) -> bytes:
    """``found`` holds (tag, struct body without its own empty section, which ``suffix`` adds)."""
    out = bytearray(_compact_length(len(found)))
    for tag, body in found:
        out += _compact_length(tag)
        out += _compact_length(len(body) + len(suffix))
        out += body
        out += suffix
    return bytes(out)


def _node_endpoints_tags(endpoints) -> bytes:
    """The response's tagged section in v16+: node_endpoints (0) when there are any."""
    if not endpoints:
        return b"\x00"
    body = bytearray(_compact_length(len(endpoints) + 1))
    for e in endpoints:
        host = e.host.encode()
        body += _pack_i(e.node_id)
        body += _compact_length(len(host) + 1)
        body += host
        body += _pack_i(e.port)
        if e.rack is None:
            body += b"\x00"
        else:
            rack = e.rack.encode()
            body += _compact_length(len(rack) + 1)
            body += rack
        body += b"\x00"
    return _tag_section([(0, bytes(body))], b"")


def _fetch_flexible(version: int):
    """v12-v18: compact forms, an empty tagged section after every struct. The fast partition case
    packs the fixed fields, the null aborted-transactions byte (0), the preferred read replica ..."""
    with_topic_id = version >= 13
    with_node_endpoints = version >= 16
    top = struct.Struct(">ihi").pack
    fixed = struct.Struct(">ihqqq").pack
    # ... plus the records length as a one- or two-byte uvarint (records under 16 KiB), all in one pack.
    fast1 = struct.Struct(">ihqqqBiB").pack
    fast2 = struct.Struct(">ihqqqBiBB").pack
    pack_i = struct.Struct(">i").pack
    pack_qq = struct.Struct(">qq").pack

    def encode(o, out: bytearray, parts: list) -> None:
        out += top(o.throttle_time_ms, o.error_code, o.session_id)
        topics = o.responses
        out += _compact_length(len(topics) + 1)
        for topic in topics:
            if with_topic_id:
                out += topic.topic_id.bytes
            else:
                name = topic.topic.encode()
                out += _compact_length(len(name) + 1)
                out += name
            partitions = topic.partitions
            out += _compact_length(len(partitions) + 1)
            for p in partitions:
                records = p.records
                kind = type(records)
                if p.aborted_transactions is None and (kind is bytes or kind is memoryview) \
                        and len(records) < INLINE_RECORDS_MAX:
                    n = len(records) + 1  # <= INLINE_RECORDS_MAX + 1, so at most two varint bytes
                    if n < 128:
                        out += fast1(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                                     p.log_start_offset, 0, p.preferred_read_replica, n)
                    else:
                        out += fast2(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                                     p.log_start_offset, 0, p.preferred_read_replica, (n & 0x7F) | 0x80, n >> 7)
                    out += records
                    out += b"\x00" if p.current_leader is NO_CURRENT_LEADER and p.diverging_epoch is \
                        NO_DIVERGING_EPOCH and p.snapshot_id is NO_SNAPSHOT_ID else _partition_tags(p)
                    continue
                out += fixed(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                             p.log_start_offset)
                aborted = p.aborted_transactions
                if aborted is None:
                    out += b"\x00"
                else:
                    out += _compact_length(len(aborted) + 1)
                    for txn in aborted:
                        out += pack_qq(txn.producer_id, txn.first_offset)
                        out += b"\x00"
                out += pack_i(p.preferred_read_replica)
                write_records(out, parts, records, True)
                out += b"\x00" if p.current_leader is NO_CURRENT_LEADER and p.diverging_epoch is \
                    NO_DIVERGING_EPOCH and p.snapshot_id is NO_SNAPSHOT_ID else _partition_tags(p)
            out += b"\x00"
        out += _node_endpoints_tags(o.node_endpoints) if with_node_endpoints else b"\x00"

    return encode


DECODERS = {("request", 0, v): decode_produce_classic for v in range(3, 9)}
DECODERS.update({("request", 0, v): decode_produce_flexible for v in range(9, 13)})
ENCODERS = {("response", 1, v): fetch_encoder(v) for v in range(4, 19)}

