"""Wire bytes of the transaction version 2 requests (KIP-890 part 2): EndTxn v5 and Produce v12.

No client available here sends these versions (tests/transactions/test_transaction_v2.py says which
versions each sends), so the frames are written out by hand from Kafka's specs, field by field, and the
codec must read them as Kafka means them and write them back byte for byte.
"""

from __future__ import annotations

from eoslog.protocol import RequestHeader, codec, messages
from eoslog.records.builder import SimpleRecord, build_batch

END_TXN_V5_REQUEST = bytes.fromhex(
    "0000001b"  # size
    "001a" "0005" "00000007" "0001" "63" "00"  # EndTxn v5, correlation 7, client id "c", header tags
    "03" "7478"  # transactional_id "tx" (compact string)
    "000000000000002a"  # producer_id 42
    "0003"  # producer_epoch 3
    "01"  # committed
    "00")  # tagged fields

END_TXN_V5_RESPONSE = bytes.fromhex(
    "00000016"  # size
    "00000007" "00"  # correlation id, response header v1 tags
    "00000000" "0000"  # throttle_time_ms, error_code
    "000000000000002a" "0004"  # the producer id and the bumped epoch to continue with
    "00")


def _batch() -> bytes:
    return build_batch([SimpleRecord(b"k", b"v")], producer_id=42, producer_epoch=4, base_sequence=0,
                       is_transactional=True, base_timestamp=1_700_000_000_000)


def _produce_v12_request(batch: bytes) -> bytes:
    body = bytes.fromhex(
        "0000" "000c" "00000008" "0001" "63" "00"  # Produce v12, correlation 8, client id "c", header tags
        "03" "7478"  # transactional_id "tx"
        "ffff" "00007530"  # acks -1, timeout_ms 30000
        "02" "0274"  # 1 topic: "t"
        "02" "00000000")  # 1 partition: index 0
    body += bytes([len(batch) + 1]) + batch  # records (compact bytes; the batch is < 127 bytes)
    body += bytes.fromhex("00" "00" "00")  # tags of the partition, the topic, the request
    return len(body).to_bytes(4, "big") + body


def test_end_txn_v5_request_bytes():
    header, request = codec.decode_request(END_TXN_V5_REQUEST[4:])
    assert header == RequestHeader(26, 5, 7, "c")
    assert (request.transactional_id, request.producer_id, request.producer_epoch, request.committed) == (
        "tx", 42, 3, True)
    assert codec.encode_request(header, request) == END_TXN_V5_REQUEST


def test_end_txn_v5_response_carries_the_new_identity():
    response = messages.EndTxnResponse(throttle_time_ms=0, error_code=0, producer_id=42, producer_epoch=4)
    frame = b"".join(bytes(p) for p in codec.encode_response(RequestHeader(26, 5, 7, "c"), response))
    assert frame == END_TXN_V5_RESPONSE
    # v3 has neither field: the same answer is 10 bytes (int64 + int16) shorter.
    v3 = b"".join(bytes(p) for p in codec.encode_response(RequestHeader(26, 3, 7, "c"), response))
    assert len(v3) == len(END_TXN_V5_RESPONSE) - 10


def test_produce_v12_request_bytes():
    batch = _batch()
    assert len(batch) < 127
    frame = _produce_v12_request(batch)
    header, request = codec.decode_request(frame[4:])
    assert header == RequestHeader(0, 12, 8, "c")
    assert (request.transactional_id, request.acks, request.timeout_ms) == ("tx", -1, 30_000)
    (topic,) = request.topic_data
    (partition,) = topic.partition_data
    assert (topic.name, partition.index, bytes(partition.records)) == ("t", 0, batch)
    assert codec.encode_request(header, request) == frame
