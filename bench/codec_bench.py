"""Wire codec benchmark: generated vs hand-specialised vs kafka-python's own codec.

Two workloads, 10 partitions x 1 KiB records each (records kept as opaque bytes by every codec):
  - decode a ProduceRequest (header + body, from the bytes after the size prefix);
  - encode a FetchResponse (header + body, size prefix included).
Prints ops/s (best of several interleaved rounds, to damp a shared machine's noise) and ratios.

    .venv/bin/python bench/codec_bench.py [--produce-version 9] [--fetch-version 12] [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

from eoslog.protocol import codec, messages, specialised, wire

PARTITIONS = 10
RECORDS = os.urandom(1024)


def measure(candidates: list[tuple[str, object]], seconds: float, rounds: int) -> dict[str, float]:
    """ops/s per candidate: the best of ``rounds`` timed runs, candidates interleaved round by round so
    a burst of load from a neighbour on the shared machine hits them all alike."""
    best = {name: 0.0 for name, _ in candidates}
    for _ in range(rounds):
        for name, fn in candidates:
            n = 0
            start = time.perf_counter()
            deadline = start + seconds
            while True:
                for _ in range(50):
                    fn()
                n += 50
                now = time.perf_counter()
                if now >= deadline:
                    break
            best[name] = max(best[name], n / (now - start))
    return best


def produce_frame(version: int) -> bytes:
    m = messages.ProduceRequest
    request = m(transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[m.TopicProduceData(
        name="bench-topic",
        partition_data=[m.PartitionProduceData(index=i, records=RECORDS) for i in range(PARTITIONS)])])
    return codec.encode_request(codec.RequestHeader(0, version, 1, "bench-client"), request)[4:]


def fetch_response() -> messages.FetchResponse:
    m = messages.FetchResponse
    return m(throttle_time_ms=0, error_code=0, session_id=0, responses=[m.FetchableTopicResponse(
        topic="bench-topic",
        partitions=[m.PartitionData(partition_index=i, error_code=0, high_watermark=1000, last_stable_offset=1000,
                                    log_start_offset=0, aborted_transactions=None, records=RECORDS)
                    for i in range(PARTITIONS)])])


def decode_with(decoder, version: int, flexible_header: bool):
    """A full request decode (header included) through a given body decoder."""
    def run(frame: bytes):
        buf = memoryview(frame)
        end = buf.nbytes
        header, pos = codec._read_header(buf, end)
        if flexible_header:
            pos = wire.skip_tagged_fields(buf, pos, end)
        return header, decoder(buf, pos, end)[0]
    return run


def encode_with(encoder, version: int, flexible_header: bool):
    def run(response):
        out = bytearray(4)
        out += b"\x00\x00\x00\x01"
        if flexible_header:
            out += b"\x00"
        parts: list = []
        encoder(response, out, parts)
        return wire.finish_frame(out, parts)
    return run


def kafka_python_produce(version: int, frame: bytes):
    from kafka.protocol.producer import ProduceRequest
    data = bytes(frame)
    return lambda: ProduceRequest.decode(data, version=version, header=True)


def kafka_python_fetch(version: int):
    from kafka.protocol.consumer import FetchResponse
    m = FetchResponse
    response = m[version](throttle_time_ms=0, error_code=0, session_id=0, responses=[m.FetchableTopicResponse(
        topic="bench-topic", partitions=[m.FetchableTopicResponse.PartitionData(
            partition_index=i, error_code=0, high_watermark=1000, last_stable_offset=1000, log_start_offset=0,
            aborted_transactions=None, records=RECORDS) for i in range(PARTITIONS)])])
    response.with_header(correlation_id=1)
    return lambda: response.encode(header=True, framed=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--produce-version", type=int, default=9)
    parser.add_argument("--fetch-version", type=int, default=12)
    parser.add_argument("--seconds", type=float, default=0.2, help="length of one timed run")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    pv, fv, seconds = args.produce_version, args.fetch_version, args.seconds

    frame = produce_frame(pv)
    flexible = pv >= 9
    generated = decode_with(codec.generated_decoder("request", 0, pv), pv, flexible)
    hand = decode_with(specialised.DECODERS[("request", 0, pv)], pv, flexible)
    assert generated(frame) == hand(frame)
    kp = kafka_python_produce(pv, frame)
    decode_ops = measure([
        ("generated", lambda: generated(frame)),
        ("specialised", lambda: hand(frame)),
        ("public decode_request", lambda: codec.decode_request(frame)),
        ("kafka-python 3.0.12", kp),
    ], seconds, args.rounds)

    response = fetch_response()
    flexible = fv >= 12
    generated_enc = encode_with(codec.generated_encoder("response", 1, fv), fv, flexible)
    hand_enc = encode_with(specialised.ENCODERS[("response", 1, fv)], fv, flexible)
    assert b"".join(generated_enc(response)) == b"".join(hand_enc(response))
    header = codec.RequestHeader(1, fv, 1, "c")
    kpf = kafka_python_fetch(fv)
    assert bytes(kpf()) == b"".join(generated_enc(response)), "kafka-python disagrees on the bytes"
    encode_ops = measure([
        ("generated", lambda: generated_enc(response)),
        ("specialised", lambda: hand_enc(response)),
        ("public encode_response", lambda: codec.encode_response(header, response)),
        ("kafka-python 3.0.12", kpf),
    ], seconds, args.rounds)
    rows = [(f"decode ProduceRequest v{pv}", name, ops) for name, ops in decode_ops.items()]
    rows += [(f"encode FetchResponse v{fv}", name, ops) for name, ops in encode_ops.items()]

    print(f"# {platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs, "
          f"{PARTITIONS} partitions x {len(RECORDS)} B records")
    baseline: dict[str, float] = {}
    print("| workload | codec | ops/s | vs kafka-python |")
    print("|---|---|---|---|")
    for workload, _name, ops in rows:
        if _name.startswith("kafka-python"):
            baseline[workload] = ops
    for workload, name, ops in rows:
        print(f"| {workload} | {name} | {ops:,.0f} | {ops / baseline[workload]:.2f}x |")


if __name__ == "__main__":
    main()
