"""__transaction_state bytes, partition_for, load_state and recovery after a crash at every step."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from txn_harness import Harness

from eoslog.coordinator.transaction import decisions as d
from eoslog.coordinator.transaction.decisions import TxnError as E
from eoslog.coordinator.transaction.log_format import (
    TransactionLogFormatError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    java_string_hash,
    load_state,
    partition_for,
    recovery_actions,
)
from eoslog.coordinator.transaction.metadata import (
    TopicPartition,
    TransactionResult,
    TxnTransitMetadata,
)
from eoslog.coordinator.transaction.state import TransactionState as S

COMMIT, ABORT = TransactionResult.COMMIT, TransactionResult.ABORT


def naive_java_hash(s: str) -> int:
    """String.hashCode by its definition, with UTF-16 surrogate pairs computed by hand."""
    units = []
    for ch in s:
        cp = ord(ch)
        if cp > 0xFFFF:
            cp -= 0x10000
            units += [0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)]
        else:
            units.append(cp)
    h = sum(u * 31 ** (len(units) - 1 - i) for i, u in enumerate(units)) % 2**32
    return h - 2**32 if h >= 2**31 else h


# ---- hashing and partitioning -------------------------------------------------------------------------

@pytest.mark.parametrize("s,expected", [
    ("hello", 99162322), ("", 0), ("a", 97), ("Aa", 2112), ("BB", 2112),
    ("polygenelubricants", -2**31), ("my-transactional-id", -959806496), ("é", 233),
    ("\U0001F600", 1772899),  # one code point, two UTF-16 code units
])
def test_java_string_hash_known_values(s, expected):
    assert java_string_hash(s) == expected


@given(st.text(max_size=200))
def test_java_string_hash_matches_its_definition(s):
    h = java_string_hash(s)
    assert h == naive_java_hash(s) and -2**31 <= h < 2**31


def test_partition_for():
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("my-transactional-id", 50) == 959806496 % 50  # abs of a negative hash
    assert partition_for("polygenelubricants", 50) == 0  # Kafka's Utils.abs(MIN_VALUE) is 0, not 2**31
    assert partition_for("txn-1", 50) == 10
    assert partition_for("anything", 1) == 0
    with pytest.raises(ValueError):
        partition_for("x", 0)


# ---- byte layouts (the worked examples of docs/transactions.md) -------------------------------------------

PREPARE_COMMIT_EXAMPLE = TxnTransitMetadata(
    "txn-1", S.ONGOING, S.PREPARE_COMMIT, producer_id=1000, previous_producer_id=-1, next_producer_id=-1,
    producer_epoch=2, last_producer_epoch=-1, txn_timeout_ms=60000,
    topic_partitions=frozenset({TopicPartition("orders", 3), TopicPartition("orders", 0)}),
    txn_start_timestamp=1700000000000, txn_last_update_timestamp=1700000000123)


def test_key_bytes():
    assert encode_key("txn-1") == bytes.fromhex("0000 0005 74786e2d31")
    assert decode_key(bytes.fromhex("0000 0005 74786e2d31")) == "txn-1"


def test_value_bytes_worked_example():
    assert encode_value(PREPARE_COMMIT_EXAMPLE) == bytes.fromhex(
        "0000"                  # value version 0
        "00000000000003e8"      # producer_id 1000
        "0002"                  # producer_epoch 2
        "0000ea60"              # transaction_timeout_ms 60000
        "02"                    # transaction_status PrepareCommit
        "00000001"              # 1 topic
        "0006" "6f7264657273"   # "orders"
        "00000002" "00000000" "00000003"  # partitions [0, 3]
        "0000018bcfe5687b"      # last update 1700000000123
        "0000018bcfe56800")     # start 1700000000000


def test_empty_value_has_a_null_partition_array():
    empty = TxnTransitMetadata("txn-1", S.COMPLETE_COMMIT, S.EMPTY, 1000, -1, -1, 3, -1, 60000, frozenset(),
                               -1, 1700000000456)
    raw = encode_value(empty)
    assert raw == bytes.fromhex("0000 00000000000003e8 0003 0000ea60 00 ffffffff 0000018bcfe569c8 ffffffffffffffff")
    v = decode_value(raw)
    assert (v.state, v.topic_partitions, v.start_timestamp_ms) == (S.EMPTY, frozenset(), -1)


def test_dead_is_a_tombstone_and_empty_with_partitions_is_refused():
    dead = TxnTransitMetadata("x", S.EMPTY, S.DEAD, 1, -1, -1, 0, -1, 1, frozenset(), -1, 5)
    assert encode_value(dead) is None
    bad = TxnTransitMetadata("x", S.EMPTY, S.EMPTY, 1, -1, -1, 0, -1, 1, frozenset({TopicPartition("t", 0)}),
                             -1, 5)
    with pytest.raises(ValueError):
        encode_value(bad)


def test_decoding_ignores_partitions_of_an_empty_record():
    raw = bytearray(encode_value(PREPARE_COMMIT_EXAMPLE))
    raw[16] = S.EMPTY.id
    assert decode_value(bytes(raw)).topic_partitions == frozenset()


@pytest.mark.parametrize("mutate,message", [
    (lambda b: b[:-1], "truncated"),
    (lambda b: b + b"\x00", "trailing"),
    (lambda b: b"\x00\x02" + b[2:], "version"),  # 1 is the flexible value (transaction version 2)
    (lambda b: b[:16] + b"\x09" + b[17:], "state"),
    (lambda b: b[:17] + struct.pack(">i", -2) + b[21:], "array length"),
    (lambda b: b[:4], "truncated"),
])
def test_damaged_values_are_refused(mutate, message):
    with pytest.raises(TransactionLogFormatError, match=message):
        decode_value(mutate(encode_value(PREPARE_COMMIT_EXAMPLE)))


def test_damaged_keys_are_refused():
    for raw in (b"", b"\x00", b"\x00\x00\x00\x05abc", b"\x00\x00\x00\x01ab", b"\x00\x00\xff\xff",
                b"\x00\x00\x00\x02\xff\xfe", b"\x00\x01\x00\x01a"):
        with pytest.raises(TransactionLogFormatError):
            decode_key(raw)


STATES_WITH_VALUES = [s for s in S if s is not S.DEAD]
topic_partitions = st.frozensets(st.builds(TopicPartition, st.text(min_size=1, max_size=20),
                                           st.integers(0, 2**31 - 1)), max_size=12)
int64 = st.integers(-2**63, 2**63 - 1)


@st.composite
def transits(draw):
    state = draw(st.sampled_from(STATES_WITH_VALUES))
    return TxnTransitMetadata(
        transactional_id=draw(st.text(min_size=1, max_size=40)), from_state=state, state=state,
        producer_id=draw(int64), previous_producer_id=-1, next_producer_id=-1,
        producer_epoch=draw(st.integers(-2**15, 2**15 - 1)), last_producer_epoch=-1,
        txn_timeout_ms=draw(st.integers(-2**31, 2**31 - 1)),
        topic_partitions=frozenset() if state is S.EMPTY else draw(topic_partitions),
        txn_start_timestamp=draw(int64), txn_last_update_timestamp=draw(int64))


@given(transits())
def test_value_round_trip(t):
    v = decode_value(encode_value(t))
    assert (v.producer_id, v.producer_epoch, v.transaction_timeout_ms, v.state, v.topic_partitions,
            v.last_update_timestamp_ms, v.start_timestamp_ms) == (
        t.producer_id, t.producer_epoch, t.txn_timeout_ms, t.state, t.topic_partitions,
        t.txn_last_update_timestamp, t.txn_start_timestamp)


@given(st.text(max_size=300))
def test_key_round_trip(s):
    assert decode_key(encode_key(s)) == s


@given(transits(), st.integers(0, 200))
def test_truncated_values_never_decode_silently(t, cut):
    raw = encode_value(t)
    if cut < len(raw):
        with pytest.raises(TransactionLogFormatError):
            decode_value(raw[:cut])


# ---- load_state ------------------------------------------------------------------------------------

def test_load_state_latest_record_wins_and_tombstones_delete():
    a1 = PREPARE_COMMIT_EXAMPLE
    a2 = TxnTransitMetadata("txn-1", S.PREPARE_COMMIT, S.COMPLETE_COMMIT, 1000, -1, -1, 2, -1, 60000,
                            frozenset(), 1700000000000, 1700000000999)
    b = TxnTransitMetadata("txn-2", S.EMPTY, S.EMPTY, 7, -1, -1, 0, -1, 1000, frozenset(), -1, 5)
    records = [(encode_key("txn-1"), encode_value(a1)), (encode_key("txn-2"), encode_value(b)),
               (b"\x00\x07other-record-type", b"ignored"),  # an unknown key version is skipped
               (encode_key("txn-1"), encode_value(a2)), (encode_key("txn-2"), None)]
    states = load_state(records)
    assert set(states) == {"txn-1"}
    m = states["txn-1"]
    assert (m.state, m.producer_id, m.producer_epoch, m.topic_partitions) == (S.COMPLETE_COMMIT, 1000, 2, set())
    assert m.txn_last_update_timestamp == 1700000000999 and not m.pending_transition_in_progress
    assert (m.previous_producer_id, m.last_producer_epoch) == (-1, -1)  # not in the v0 record


def test_load_state_reads_a_prepare_epoch_fence_record_as_prepare_abort():
    fence = TxnTransitMetadata("f", S.ONGOING, S.PREPARE_EPOCH_FENCE, 3, -1, -1, 5, -1, 1000,
                               frozenset({TopicPartition("t", 0)}), 10, 20)
    states = load_state([(encode_key("f"), encode_value(fence))])
    assert states["f"].state is S.PREPARE_ABORT
    [action] = recovery_actions(states, 30)
    assert action.markers == d.WriteTxnMarkers("f", 3, 5, ABORT, frozenset({TopicPartition("t", 0)}))
    assert action.complete.state is S.COMPLETE_ABORT


# ---- crash at every step: reload from the log prefix and finish the job ---------------------------------

def crash_and_reload(harness, now_ms):
    """What survives a crash is the log; memory starts over from it."""
    states = load_state(harness.log)
    return states, recovery_actions(states, now_ms)


def assert_memory_matches_log(harness):
    reloaded = load_state(harness.log)
    assert set(reloaded) == set(harness.states)
    for tid, m in harness.states.items():
        r = reloaded[tid]
        assert (r.state, r.producer_id, r.producer_epoch, r.txn_timeout_ms, r.topic_partitions,
                r.txn_start_timestamp, r.txn_last_update_timestamp) == (
            m.state, m.producer_id, m.producer_epoch, m.txn_timeout_ms, m.topic_partitions,
            m.txn_start_timestamp, m.txn_last_update_timestamp)


@pytest.mark.parametrize("result", [COMMIT, ABORT])
def test_crash_at_each_step_of_a_transaction(harness, result):
    tid = "tx"
    steps = []  # (state after this step, log length)
    dec = harness.init(tid, timeout_ms=10_000)
    pid, epoch = dec.producer_id, dec.producer_epoch
    steps.append((S.EMPTY, len(harness.log)))
    harness.add(tid, pid, epoch, ("t", 0), ("u", 1))
    steps.append((S.ONGOING, len(harness.log)))
    end = harness.end(tid, pid, epoch, result)
    prepare = S.PREPARE_COMMIT if result is COMMIT else S.PREPARE_ABORT
    steps.append((prepare, len(harness.log)))
    harness.markers_done(tid, end.write_markers)
    complete = S.COMPLETE_COMMIT if result is COMMIT else S.COMPLETE_ABORT
    steps.append((complete, len(harness.log)))

    for state, length in steps:
        log_prefix = harness.log[:length]
        states = load_state(log_prefix)
        actions = recovery_actions(states, harness.now + 1)
        assert states[tid].state is state
        if state is prepare:
            # The decision is in the log: the markers must be (re)written and the Complete record logged.
            [action] = actions
            assert action.markers == d.WriteTxnMarkers(tid, pid, epoch, result,
                                                       frozenset({TopicPartition("t", 0), TopicPartition("u", 1)}))
            m = states[tid]
            assert m.pending_transit is action.complete and action.complete.state is complete
            # Meanwhile the client's retry is told to wait, and the other result is refused.
            assert d.end_txn(m, tid, pid, epoch, result, harness.now).error is E.CONCURRENT_TRANSACTIONS
            assert d.init_producer_id(m, tid, 10_000, harness.now, harness.config,
                                      harness.allocate).error is E.CONCURRENT_TRANSACTIONS
            m.complete_transition(action.complete)
            assert m.state is complete and m.topic_partitions == set()
            assert d.end_txn(m, tid, pid, epoch, result, harness.now).error is E.NONE
        else:
            assert actions == []
        if state is S.ONGOING:
            # Not decided yet: nothing to finish, but the timeout will abort it if the producer is gone.
            later = states[tid].txn_start_timestamp + 10_001
            assert d.expired_transactions(states, later) == [tid]
            abort = d.abort_timed_out_transaction(states[tid], later)
            assert abort.write_markers.result is ABORT and abort.write_markers.producer_epoch == epoch + 1


def test_crash_after_an_init_fence_finishes_the_abort_under_the_bumped_epoch(harness):
    dec = harness.init("tx")
    harness.add("tx", dec.producer_id, dec.producer_epoch)
    fence = harness.init("tx")  # new instance: PrepareAbort under epoch + 1 is logged
    assert fence.error is E.CONCURRENT_TRANSACTIONS
    states, [action] = crash_and_reload(harness, harness.now)
    assert action.markers == fence.write_markers
    assert action.markers.producer_epoch == dec.producer_epoch + 1
    # The zombie stays fenced after the restart.
    zombie = d.end_txn(states["tx"], "tx", dec.producer_id, dec.producer_epoch, COMMIT, harness.now)
    assert zombie.error is E.PRODUCER_FENCED


def test_recovery_of_several_ids_is_independent(harness):
    for tid, result in (("a", COMMIT), ("b", ABORT), ("c", None)):
        dec = harness.init(tid)
        harness.add(tid, dec.producer_id, 0, (tid, 0))
        if result is not None:
            harness.end(tid, dec.producer_id, 0, result)
    states, actions = crash_and_reload(harness, harness.now)
    assert [(a.markers.transactional_id, a.markers.result) for a in actions] == [("a", COMMIT), ("b", ABORT)]
    assert states["c"].state is S.ONGOING
    # recovery_actions prepares only once: a second call finds the transits pending.
    assert recovery_actions(states, harness.now) == []


# ---- memory never runs ahead of the log: random operation sequences -------------------------------------

# Repeats weight the draw toward the main path (init, add, end, markers) so every state is reached often.
OPS = st.lists(st.tuples(st.sampled_from(["init", "init", "init360", "add", "add", "add", "offsets", "commit",
                                          "commit", "abort", "markers", "markers", "markers", "timeout",
                                          "expire", "tick", "fail_next"]),
                         st.sampled_from(["a", "b"]), st.integers(0, 3)), max_size=60)


@settings(max_examples=150, deadline=None)
@given(OPS)
def test_reloaded_state_equals_memory_after_any_sequence(ops):
    h = Harness()
    markers = {}
    fail_next = False
    for op, tid, n in ops:
        m = h.states.get(tid)
        pid, epoch = (m.producer_id, m.producer_epoch) if m else (5, 0)
        kw = {"append_fails": fail_next}
        fail_next = False
        if op == "init":
            dec = h.init(tid, **kw)
        elif op == "init360":
            dec = h.init(tid, producer_id=pid, producer_epoch=max(epoch - (n % 2), 0), **kw)
        elif op == "add":
            dec = h.add(tid, pid, epoch, ("t", n), **kw)
        elif op == "offsets":
            dec = h.add_offsets(tid, pid, epoch, f"g{n}", **kw)
        elif op in ("commit", "abort"):
            dec = h.end(tid, pid, epoch, COMMIT if op == "commit" else ABORT, **kw)
        elif op == "markers":
            dec = h.markers_done(tid, markers[tid], **kw) if tid in markers else d.Decision()
        elif op == "timeout":
            dec = (h.carry_out(tid, d.abort_timed_out_transaction(m, h.now), **kw)
                   if tid in d.expired_transactions(h.states, h.now) else d.Decision())
        elif op == "expire":
            dec = (h.carry_out(tid, d.expire_transactional_id(m, h.now, h.config), **kw)
                   if tid in d.expired_transactional_ids(h.states, h.now, h.config) else d.Decision())
        elif op == "tick":
            h.now += [1000, 61_000, 3_600_000, 0][n]
            continue
        else:
            fail_next = True
            continue
        if dec.write_markers is not None and not kw["append_fails"]:
            markers[tid] = dec.write_markers
        for metadata in h.states.values():
            assert not metadata.pending_transition_in_progress
        assert_memory_matches_log(h)
