"""What writing non-default tagged fields (KIP-951's leader hints) costs the response encoders.

In one process, candidates interleaved round by round (bench/codec_bench.py's ``measure``):
  - ProduceResponse v10, 10 partitions, all acknowledged (no hint): the generated encoder as built now
    (checks each partition's CurrentLeader and the NodeEndpoints against their defaults) against one
    generated with the old rule (tagged sections always empty);
  - FetchResponse v16, 10 partitions x 1 KiB: the same pair for the generated encoder, and the
    specialised encoder fed partitions holding the shared default tag objects (api/fetch.py's, an
    identity check each) against partitions holding fresh, equal defaults (compared field by field).
Prints ops/s and ratios.

    PYTHONPATH=src .venv/bin/python bench/tagged_fields_bench.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys

from eoslog.protocol import codegen, messages, specialised

sys.path.insert(0, os.path.dirname(__file__))
from codec_bench import encode_with, measure  # a sibling script, not a package

PARTITIONS = 10
RECORDS = os.urandom(1024)


def old_rule_encoder(name: str, version: int):
    """The encoder generated with tagged sections always empty (the rule before KIP-951 support)."""
    original = codegen._encode_tagged

    def empty(w, ind, tagged, obj):
        w.emit(ind, "out += b'\\x00'")

    codegen._encode_tagged = empty
    try:
        cls = messages.message_class(name)
        return codegen.build_encoder(cls.SPEC, version, cls)[0]
    finally:
        codegen._encode_tagged = original


def produce_response() -> messages.ProduceResponse:
    m = messages.ProduceResponse
    return m(throttle_time_ms=0, responses=[m.TopicProduceResponse(name="bench-topic", partition_responses=[
        m.PartitionProduceResponse(index=i, error_code=0, base_offset=1000 * i, log_append_time_ms=-1,
                                   log_start_offset=0, record_errors=[], error_message=None)
        for i in range(PARTITIONS)])])


def fetch_response(shared_defaults: bool) -> messages.FetchResponse:
    m = messages.FetchResponse
    tags = ({"diverging_epoch": specialised.NO_DIVERGING_EPOCH, "current_leader": specialised.NO_CURRENT_LEADER,
             "snapshot_id": specialised.NO_SNAPSHOT_ID} if shared_defaults else {})
    return m(throttle_time_ms=0, error_code=0, session_id=0, responses=[m.FetchableTopicResponse(
        topic="bench-topic", partitions=[m.PartitionData(
            partition_index=i, error_code=0, high_watermark=1000, last_stable_offset=1000, log_start_offset=0,
            aborted_transactions=None, preferred_read_replica=-1, records=RECORDS, **tags)
            for i in range(PARTITIONS)])])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=0.2)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    produce = produce_response()
    produce_new = encode_with(codegen.build_encoder(messages.ProduceResponse.SPEC, 10, messages.ProduceResponse)[0],
                              10, True)
    produce_old = encode_with(old_rule_encoder("ProduceResponse", 10), 10, True)
    assert b"".join(produce_new(produce)) == b"".join(produce_old(produce))

    shared, fresh = fetch_response(True), fetch_response(False)
    fetch_new = encode_with(codegen.build_encoder(messages.FetchResponse.SPEC, 16, messages.FetchResponse)[0], 16, True)
    fetch_old = encode_with(old_rule_encoder("FetchResponse", 16), 16, True)
    hand = encode_with(specialised.ENCODERS[("response", 1, 16)], 16, True)
    assert b"".join(fetch_new(shared)) == b"".join(fetch_old(shared)) == b"".join(hand(fresh))

    ops = measure([
        ("produce v10 generated, tags checked", lambda: produce_new(produce)),
        ("produce v10 generated, old rule", lambda: produce_old(produce)),
        ("fetch v16 generated, tags checked", lambda: fetch_new(shared)),
        ("fetch v16 generated, old rule", lambda: fetch_old(shared)),
        ("fetch v16 specialised, shared defaults", lambda: hand(shared)),
        ("fetch v16 specialised, fresh defaults", lambda: hand(fresh)),
    ], args.seconds, args.rounds)
    print(f"python {platform.python_version()}, {PARTITIONS} partitions, best of {args.rounds} rounds")
    for name, value in ops.items():
        print(f"  {name:42s} {value:10,.0f} ops/s")
    pairs = [("produce v10 generated, tags checked", "produce v10 generated, old rule"),
             ("fetch v16 generated, tags checked", "fetch v16 generated, old rule"),
             ("fetch v16 specialised, shared defaults", "fetch v16 specialised, fresh defaults")]
    for a, b in pairs:
        print(f"  {a} / {b}: {ops[a] / ops[b]:.2f}")


if __name__ == "__main__":
    main()
