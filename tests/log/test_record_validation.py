"""log/record_validation.py: Kafka's LogValidator rules as a pure core, and the RecordCheck hook that
extensions refuse records with (KIP-467 record errors)."""

from __future__ import annotations

import pytest

from eoslog.log.config import LogConfig, TimestampType
from eoslog.log.errors import InvalidRecordError
from eoslog.log.record_validation import (
    RecordError,
    RecordValidationError,
    check_client_batch,
    validate_records,
)
from eoslog.protocol.error_mapping import error_code_for
from eoslog.protocol.errors import ErrorCode
from eoslog.records.builder import SimpleRecord, build_batch
from eoslog.records.compression import CompressionType
from eoslog.records.errors import CorruptRecordError
from eoslog.records.header import read_header

NOW = 1_700_000_000_000
COMPACTED = LogConfig(cleanup_policy=frozenset({"compact"}))


def batch(records, **kw) -> tuple[memoryview, object]:
    data = build_batch([SimpleRecord(k, v, ()) for k, v in records], base_timestamp=kw.pop("ts", NOW), **kw)
    return memoryview(data), read_header(data, 0)


DEFAULTS = LogConfig()


def refusal(view, header, config=DEFAULTS, **kw) -> RecordValidationError:
    with pytest.raises(RecordValidationError) as raised:
        validate_records(view, header, config, topic_partition="t-0", now_ms=NOW, **kw)
    return raised.value


@pytest.mark.parametrize("compression", [CompressionType.NONE, CompressionType.ZSTD])
def test_keyless_records_on_a_compacted_topic(compression):
    view, header = batch([(b"k", b"a"), (None, b"b"), (b"k", b"c"), (None, None)], compression=compression)
    error = refusal(view, header, COMPACTED)
    reason = "Compacted topic cannot accept message without key in topic partition t-0"
    assert error.record_errors == (RecordError(1, reason), RecordError(3, reason))
    assert error_code_for(error) is ErrorCode.INVALID_RECORD
    assert str(error).startswith("One or more records have been rejected due to 2 record errors in total")
    validate_records(view, header, LogConfig(), topic_partition="t-0", now_ms=NOW)  # delete policy: fine


def test_the_message_quotes_three_record_errors_at_most():
    view, header = batch([(None, b"%d" % i) for i in range(5)])
    error = refusal(view, header, COMPACTED)
    assert len(error.record_errors) == 5 and str(error).count("RecordError(") == 3


def test_timestamp_bounds():
    config = LogConfig(message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=1000)
    validate_records(*batch([(b"k", b"v")], ts=NOW - 1000), config, topic_partition="t-0", now_ms=NOW)
    error = refusal(*batch([(b"k", b"v")], ts=NOW + 1001), config)
    assert error_code_for(error) is ErrorCode.INVALID_TIMESTAMP
    assert error.record_errors == (RecordError(0, f"Timestamp {NOW + 1001} of message with offset 0 is out of "
                                                  f"range. The timestamp should be within [{NOW - 1000}, {NOW + 1000}]"),)
    # Kafka 4.x defaults: anything in the past, at most an hour ahead
    validate_records(*batch([(b"k", b"v")], ts=0), LogConfig(), topic_partition="t-0", now_ms=NOW)
    refusal(*batch([(b"k", b"v")], ts=NOW + 3_600_001))
    # LogAppendTime topics ignore the bounds
    late = LogConfig(message_timestamp_type=TimestampType.LOG_APPEND_TIME, message_timestamp_after_max_ms=0)
    validate_records(*batch([(b"k", b"v")], ts=NOW + 10**9), late, topic_partition="t-0", now_ms=NOW)


def test_nothing_is_decoded_when_no_rule_needs_the_records():
    data = bytearray(build_batch([SimpleRecord(b"k", b"v", ())], base_timestamp=NOW))
    # Break the record's length varint but keep the batch's CRC right: only a decode can notice.
    from eoslog.records.checksum import crc32c

    data[61] = 0x7F
    data[17:21] = crc32c(bytes(data[21:])).to_bytes(4, "big")
    view, header = memoryview(bytes(data)), read_header(bytes(data), 0)
    validate_records(view, header, LogConfig(), topic_partition="t-0", now_ms=NOW)
    with pytest.raises(CorruptRecordError):
        validate_records(view, header, COMPACTED, topic_partition="t-0", now_ms=NOW)


def test_an_extension_check_refuses_records_with_record_errors():
    seen = []

    def no_empty_values(header, record, index):
        seen.append(index)
        return None if record.value else "empty values are not allowed here"

    view, header = batch([(b"k", b"a"), (b"k", b""), (b"k", b"c")])
    error = refusal(view, header, checks=(no_empty_values,))
    assert error.record_errors == (RecordError(1, "empty values are not allowed here"),)
    assert seen == [0, 1, 2] and error_code_for(error) is ErrorCode.INVALID_RECORD


@pytest.mark.parametrize(("kw", "words"), [
    ({"base_offset": 3}, "should be 0, but it is 3"),
    ({"producer_id": 9, "producer_epoch": 0, "base_sequence": -1}, "Invalid sequence number -1"),
])
def test_batch_rules(kw, words):
    _, header = batch([(b"k", b"v")], **kw)
    with pytest.raises(InvalidRecordError, match=words):
        check_client_batch(header, "t-0")
    check_client_batch(batch([(b"k", b"v")])[1], "t-0")
