"""The whole-batch scan of keys' and values' wire-format prefixes (schema_registry/wire_scan.py) against the
strict record decoder (records/batch.py): whatever the scan vouches for, the decoder reads the same, and
the batches clients send (no headers, small deltas) are always vouched for. The broker's use of it, with
real clients, is test_broker_validation.py."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eoslog.records.batch import Record, parse_records
from eoslog.records.builder import SimpleRecord, build_batch
from eoslog.records.errors import CorruptRecordError
from eoslog.records.header import HEADER_SIZE
from eoslog.schema_registry.wire_scan import _scan_runs, scan, scan_general


def records_section(batch: bytes) -> bytes:
    return batch[HEADER_SIZE:]


def wire(schema_id: int, size: int) -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + b"p" * max(0, size - 5)


def agrees(prefixes, parts: list[bytes | None]) -> None:
    """The scan's answer for one part (keys or values) is what the records hold."""
    ids, null, wire_format = prefixes.ids, prefixes.null, prefixes.wire
    if prefixes.distinct is not None:
        assert set(prefixes.distinct) == {int.from_bytes(d[1:5], "big") for d in parts
                                          if d is not None and len(d) >= 5 and d[0] == 0}
    for index, data in enumerate(parts):
        is_null = null if isinstance(null, bool) else bool(null[index])
        assert is_null == (data is None), index
        if data is None:
            continue
        in_wire = len(data) >= 5 and data[0] == 0
        assert (wire_format if isinstance(wire_format, bool) else bool(wire_format[index])) == in_wire, index
        if in_wire:
            assert int(ids[index]) == int.from_bytes(data[1:5], "big"), index


def check_against_decoder(body: bytes, count: int) -> bool:
    """True when the scan vouched for the batch; then the decoder must read it, and agree. The general
    scan alone (which the scan falls back on when the batch is not a few long runs) is held to the same."""
    general = scan_general(body, count)
    prefixes = scan(body, count)
    for answer in (general, prefixes):
        if answer is not None:
            records = parse_records(body, count)  # raises if a scan vouched for a batch the decoder refuses
            agrees(answer.values, [r.value for r in records])
            agrees(answer.keys, [r.key for r in records])
            for part, held in ((answer.values, [r.value for r in records]), (answer.keys, [r.key for r in records])):
                placed(body, part, held)
    return prefixes is not None


def placed(body: bytes, prefixes, parts: list[bytes | None]) -> None:
    """Where the general scan says each part's bytes are (payload validation reads them there)."""
    if prefixes.places is None:
        return
    starts, lengths = prefixes.places
    for index, data in enumerate(parts):
        if data is not None:
            assert body[starts[index]:starts[index] + lengths[index]] == data, index


parts = st.one_of(
    st.none(),
    st.binary(max_size=12),
    st.builds(wire, st.integers(0, 2**32 - 1), st.sampled_from([5, 6, 63, 64, 200, 9000])),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(parts, parts), min_size=1, max_size=120),
       st.sampled_from([0, 1, 63, 64, 1000, 10**6]))
def test_a_clients_batch_is_vouched_for_and_read_as_the_decoder_reads_it(pairs, spread):
    base = 1_700_000_000_000
    batch = build_batch([SimpleRecord(key, value, (), base + (index * spread) % 500_000)
                         for index, (key, value) in enumerate(pairs)], base_timestamp=base)
    assert check_against_decoder(records_section(batch), len(pairs))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(parts, st.integers(-(2**40), 2**40), st.booleans(), st.integers(1, 3)), min_size=1,
                max_size=40))
def test_whatever_the_scan_vouches_for_the_decoder_reads_alike(items):
    """Headers, huge timestamp deltas and gaps in the offset deltas: the scan may decline (then the
    broker decodes the batch), but never vouches for something the decoder reads otherwise."""
    records, offset_delta = [], 0
    for value, timestamp_delta, with_header, gap in items:
        records.append(Record(offset_delta, timestamp_delta, None, value, (("h", b"v"),) if with_header else ()))
        offset_delta += gap
    check_against_decoder(records_section(build_batch(records, base_timestamp=0)), len(records))


@settings(max_examples=300, deadline=None)
@given(st.lists(parts, min_size=1, max_size=30), st.data())
def test_damaged_records_are_never_vouched_for_against_the_decoder(values, data):
    body = bytearray(records_section(build_batch([SimpleRecord(None, v) for v in values])))
    for _ in range(data.draw(st.integers(1, 3))):
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    count = len(values) + data.draw(st.sampled_from([0, 0, 0, -1, 1]))
    try:
        check_against_decoder(bytes(body), count)
    except CorruptRecordError as error:
        pytest.fail(f"the scan vouched for records the decoder refuses: {error}")


def test_runs_of_equal_size_and_sizes_that_change_read_alike():
    """Equal sizes take the strided test, changing ones the Python walk; a batch mixing both, and the
    size change at the 64th record (its offset delta takes a second byte), read right."""
    values = [wire(7, 100)] * 300 + [wire(8, 50 + (i * 37) % 400) for i in range(200)] + [wire(9, 1000)] * 100
    body = records_section(build_batch([SimpleRecord(None, v) for v in values]))
    prefixes = scan(body, len(values))
    assert prefixes is not None
    agrees(prefixes.values, values)
    assert set(prefixes.values.ids.tolist()) == {7, 8, 9}


def test_a_clients_batch_is_read_as_a_few_runs_of_alike_records():
    """librdkafka's batches: one layout until the offset delta takes a second byte at the 64th record,
    another after; and keys of one length that differ (which cut the runs only when keys are asked for)."""
    values = [wire(7, 1000)] * 150 + [wire(8, 1000)] * 100 + [None] * 20
    keys = [f"{i:04d}-key".encode() for i in range(len(values))]
    body = records_section(build_batch([SimpleRecord(k, v) for k, v in zip(keys, values, strict=True)]))
    runs = _scan_runs(body, len(values), False)
    assert runs is not None and runs.keys is None
    agrees(runs.values, values)
    assert _scan_runs(body, len(values), True) is None  # every key its own prefix: no run
    agrees(scan(body, len(values)).keys, keys)  # the general scan reads them
    same = records_section(build_batch([SimpleRecord(None, wire(7, 100))] * 500))
    one_run = _scan_runs(same, 500, True)
    assert one_run.values.wire is True and one_run.values.null is False and one_run.keys.null is True
    assert set(one_run.values.ids.tolist()) == {7} and len(one_run.values.ids) == 500
    varied = [wire(7, 50 + (i * 37) % 400) for i in range(100)]  # sizes that change: the general scan's
    body = records_section(build_batch([SimpleRecord(None, v) for v in varied]))
    assert _scan_runs(body, 100, False) is None
    agrees(scan(body, 100).values, varied)


@pytest.mark.parametrize("count", [0, 2, 4])
def test_a_wrong_record_count_is_not_vouched_for(count):
    body = records_section(build_batch([SimpleRecord(None, wire(7, 20))] * 3))
    assert scan(body, count) is None


def test_a_record_with_headers_is_left_to_the_decoder():
    body = records_section(build_batch([SimpleRecord(None, wire(7, 20), (("trace", b"1"),))]))
    assert scan(body, 1) is None


def test_a_header_count_without_headers_is_not_vouched_for():
    """The header count is each record's last byte when it has no headers: anything but 0 there is a
    count the record has no room for, which the decoder refuses."""
    body = bytearray(records_section(build_batch([SimpleRecord(None, wire(7, 20))] * 20)))
    body[-1] = 2
    assert scan(bytes(body), 20) is None and scan_general(bytes(body), 20) is None
    with pytest.raises(CorruptRecordError):
        parse_records(bytes(body), 20)


# --- the schema id check's whole-batch answer (validation.py), through the log's record validation -----

TOPIC_NAME = "io.confluent.kafka.serializers.subject.TopicNameStrategy"
RECORD_NAME = "io.confluent.kafka.serializers.subject.RecordNameStrategy"


@pytest.fixture
def check():
    import json

    from eoslog.schema_registry.record_format import Key, KeyType
    from eoslog.schema_registry.state import RegistryState
    from eoslog.schema_registry.validation import RegistryView, TopicValidation, record_check

    state = RegistryState()
    schema = json.dumps({"type": "record", "name": "Payment", "namespace": "shop", "fields": []})
    for subject, version, schema_id in (("orders-value", 1, 7), ("orders-value", 2, 8), ("other-value", 1, 9),
                                        ("shop.Payment", 1, 7)):
        state.apply(Key(KeyType.SCHEMA, subject, version), {"subject": subject, "version": version, "id": schema_id,
                                                             "schema": schema, "deleted": False})
    view = RegistryView(state, lambda: True)
    return lambda strategy=TOPIC_NAME, key=None: record_check(TopicValidation("orders", strategy, key), view)


def validate(batch: bytes, checks) -> None:
    from eoslog.log.config import LogConfig
    from eoslog.log.record_validation import validate_records
    from eoslog.records.header import read_header

    validate_records(memoryview(batch), read_header(batch, 0), LogConfig(), topic_partition="orders-0",
                     now_ms=int(time.time() * 1000), checks=checks)


def test_a_batch_of_registered_ids_passes_without_a_record_decoded(check, monkeypatch):
    from eoslog.log import record_validation

    def no_decode(*_args, **_kwargs):
        raise AssertionError("the batch was decoded record by record")

    monkeypatch.setattr(record_validation, "parse_records", no_decode)
    values = [wire(7, 100)] * 100 + [wire(8, 30), None] * 50  # both versions' ids, and tombstones
    for compression in (0, 1, 4):  # none, gzip, zstd: decompressed once, then scanned
        validate(build_batch([SimpleRecord(None, v) for v in values], compression=compression), (check(),))
    validate(build_batch([SimpleRecord(None, wire(7, 40))] * 10), (check(RECORD_NAME),))


@pytest.mark.parametrize("bad, reason", [
    (wire(99, 40), ("Schema id 99 of the record's value is not valid for topic orders: it is not registered "
                    "under subject orders-value (TopicNameStrategy)")),
    (wire(9, 40), "it is not registered under subject orders-value"),
    (b"\x01" + wire(7, 40)[1:], "not in the schema registry's wire format"),
    (b"\x00\x00", "not in the schema registry's wire format"),
])
def test_a_bad_record_among_good_ones_is_named_as_before(check, bad, reason):
    from eoslog.log.record_validation import RecordValidationError

    values = [wire(7, 100)] * 70 + [bad] + [wire(8, 100)] * 5
    batch = build_batch([SimpleRecord(None, v) for v in values])
    with pytest.raises(RecordValidationError) as refused:
        validate(batch, (check(),))
    (error,) = refused.value.record_errors
    assert error.batch_index == 70 and reason in error.message


def test_key_validation_reads_the_keys(check):
    from eoslog.log.record_validation import RecordValidationError

    validate(build_batch([SimpleRecord(None, b"any value")] * 20), (check(None, TOPIC_NAME),))  # null keys pass
    with pytest.raises(RecordValidationError, match="subject orders-key"):  # no schema under orders-key
        validate(build_batch([SimpleRecord(wire(7, 10), b"v")] * 20), (check(None, TOPIC_NAME),))
