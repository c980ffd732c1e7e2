"""What schema validation on the broker (``confluent.value.schema.validation``, issue 39) costs produce
throughput; the aim is at most 10 % for the id check. One run, so the ratios compare:

    PYTHONPATH=src .venv/bin/python bench/schema_validation_bench.py [--records 200000] [--rounds 5]
        [--value-bytes 100] [--compression none] [--acks all] [--payload] [--general] [--vary]
        [--producer-process]

- produce: an embedded broker serving its own registry; two topics, one with validation on and one
  without (with ``--payload`` a third, whose values are decoded too: ``eoslog.value.schema.validation.level
  =payload``), and the same records (the wire format: magic byte, a registered Avro schema's id, a valid
  Avro payload) produced to each by confluent-kafka's Producer, in rounds whose order rotates so that drift
  of the shared machine falls on all alike. Records a second per topic (median over the rounds) and ratios.
  ``--general`` adds a validated topic whose check reads batches with the general scan alone (wire_scan's
  ``scan_general``, what the id check did before it looked for runs of alike records): before and after
  in one run. With the records a second, the CPU time the broker's event loop thread spent per record
  (its pthread CPU clock): the shared machine's load scatters it far less. ``--producer-process`` runs
  the producer in a child process instead of this one, where it shares the broker's GIL;
- the broker's check alone: ``validate_records`` over one client batch of 500 records, without a check,
  with a check that reads nothing (what decoding the batch into records costs: the RecordCheck hook sees
  decoded records), and with the schema id check, in µs per batch and per record. This is the cost the
  produce figures contain, without the client and the network.

The broker and the producer share this process and the machine's cores, so absolute figures are
pessimistic; what differs between the two topics is the check alone.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from eoslog.server.embedded import EmbeddedBroker
from eoslog.testing.wait import wait_until

SCHEMA = {"type": "record", "name": "Reading", "namespace": "bench", "fields": [{"name": "data", "type": "bytes"}]}


def produce(bootstrap: str, topic: str, values: list[bytes], count: int, compression: str, acks: str,
            loop_clock: int | None = None, child_process: bool = False) -> tuple[float, float]:
    """Records a second for ``count`` records (``values`` in turn), from the first send to the last delivery, and
    the CPU time the broker's event loop thread (``loop_clock``) spent meanwhile, in µs a record. The
    producer runs in this process unless ``child_process``: here its Python loop shares the broker's GIL,
    so every numpy call that lets the GIL go may hand it to the producer, which a broker serving other
    processes' producers does not see."""
    if not child_process:
        return _produce(bootstrap, topic, values, count, compression, acks, loop_clock)
    # The child says when it starts sending and when the last delivery came: the loop's CPU is read then.
    with subprocess.Popen([sys.executable, __file__, "--child", bootstrap, topic, ",".join(v.hex() for v in values),
                           str(count),
                           compression, acks], stdout=subprocess.PIPE, text=True) as child:
        assert child.stdout is not None
        lines = iter(child.stdout.readline, "")
        if next(lines, "").strip() != "sending":
            raise SystemExit(f"{topic}: the producer did not start")
        loop_started = time.clock_gettime(loop_clock) if loop_clock is not None else 0.0
        rate = float(next(lines, "nan"))
        loop_cpu = time.clock_gettime(loop_clock) - loop_started if loop_clock is not None else 0.0
    if child.returncode != 0 or math.isnan(rate):
        raise SystemExit(f"{topic}: the producer failed")
    return rate, loop_cpu / count * 1e6


def _produce(bootstrap: str, topic: str, values: list[bytes], count: int, compression: str, acks: str,
             loop_clock: int | None = None, announce: bool = False) -> tuple[float, float]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 256 * 1024,
                         "compression.type": compression, "acks": acks, "queue.buffering.max.messages": 1_000_000})
    failures = []

    def report(error, _message) -> None:
        if error is not None:
            failures.append(error)

    if announce:
        print("sending", flush=True)
    started = time.perf_counter()
    loop_started = time.clock_gettime(loop_clock) if loop_clock is not None else 0.0
    turn = len(values)
    for index in range(count):
        value = values[index % turn]
        while True:
            try:
                producer.produce(topic, value, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    elapsed = time.perf_counter() - started
    loop_cpu = time.clock_gettime(loop_clock) - loop_started if loop_clock is not None else 0.0
    if failures:
        raise SystemExit(f"{topic}: {len(failures)} failed deliveries, the first {failures[0]}")
    return count / elapsed, loop_cpu / count * 1e6


def avro_value(schema_id: int, size: int) -> bytes:
    """A record of SCHEMA in the wire format, ``size`` bytes in all (its ``data`` filling what is left)."""
    from fastavro import parse_schema, schemaless_writer

    parsed = parse_schema(SCHEMA)
    length = max(0, size - 5 - 1)
    while True:
        out = io.BytesIO()
        schemaless_writer(out, parsed, {"data": b"x" * length})
        value = b"\x00" + schema_id.to_bytes(4, "big") + out.getvalue()
        if len(value) <= size or length == 0:
            return value
        length -= 1


def check_alone(schema_id: int, value: bytes, view) -> tuple[float, float, float, float, float]:
    """µs per 500-record batch through validate_records: without a check, with a check that refuses nothing
    and reads nothing (the cost of decoding the batch into records), with the schema id check, and with
    it on values whose sizes differ from record to record (half to one and a half times ``value``'s: the
    scan then walks the record lengths in Python, schema_registry/wire_scan.py), and with payload
    validation (each record decoded, then its payload by fastavro)."""
    from eoslog.log.config import LogConfig
    from eoslog.log.record_validation import validate_records
    from eoslog.records.builder import SimpleRecord, build_batch
    from eoslog.records.header import iter_headers
    from eoslog.schema_registry.validation import TopicValidation, record_check

    data = build_batch([SimpleRecord(None, value, ()) for _ in range(500)])
    view_ = memoryview(data)
    (header,) = iter_headers(view_)
    config = LogConfig()
    check = record_check(TopicValidation("bench-on", "io.confluent.kafka.serializers.subject.TopicNameStrategy",
                                         None), view)
    now = int(time.time() * 1000)
    runs = 200
    off = timeit.timeit(lambda: validate_records(view_, header, config, topic_partition="t-0", now_ms=now), number=runs)
    nothing = timeit.timeit(lambda: validate_records(view_, header, config, topic_partition="t-0", now_ms=now,
                                                     checks=(lambda _h, _r, _i: None,)), number=runs)
    on = timeit.timeit(lambda: validate_records(view_, header, config, topic_partition="t-0", now_ms=now,
                                                checks=(check,)), number=runs)
    varied = build_batch([SimpleRecord(None, (value + value)[:len(value) // 2 + (i * 7919) % max(1, len(value))], ())
                          for i in range(500)])
    varied_view = memoryview(varied)
    (varied_header,) = iter_headers(varied_view)
    on_varied = timeit.timeit(lambda: validate_records(varied_view, varied_header, config, topic_partition="t-0",
                                                       now_ms=now, checks=(check,)), number=runs)
    payload_check = record_check(TopicValidation("bench-on", "io.confluent.kafka.serializers.subject.TopicNameStrategy",
                                                 None, True), view)
    payload = timeit.timeit(lambda: validate_records(view_, header, config, topic_partition="t-0", now_ms=now,
                                                     checks=(payload_check,)), number=runs // 4)
    return (off / runs * 1e6, nothing / runs * 1e6, on / runs * 1e6, on_varied / runs * 1e6,
            payload / (runs // 4) * 1e6)


def main() -> None:
    if sys.argv[1:2] == ["--child"]:  # a producer for produce(), in its own process
        bootstrap, topic, values, count, compression, acks = sys.argv[2:8]
        print(_produce(bootstrap, topic, [bytes.fromhex(v) for v in values.split(",")], int(count), compression,
                       acks, announce=True)[0],
              flush=True)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--compression", default="none")
    parser.add_argument("--acks", default="all")
    parser.add_argument("--payload", action="store_true", help="a topic with payload validation")
    parser.add_argument("--general", action="store_true", help="a validated topic read by the general scan alone")
    parser.add_argument("--vary", action="store_true",
                        help="values of 17 sizes from half to one and a half --value-bytes, changing every record")
    parser.add_argument("--producer-process", action="store_true",
                        help="the producer in a child process, not sharing the broker's GIL")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data_dir, EmbeddedBroker(
            Path(data_dir), properties={"eoslog.schema.registry.listen": "127.0.0.1:0"}) as embedded:
        server = embedded.broker.schema_registry.server
        wait_until(lambda: server.registry.is_writer and server.registry._writer is not None, 60, "the writer")
        admin = AdminClient({"bootstrap.servers": embedded.bootstrap})
        topics = {"off": "bench-off", "on": "bench-on", "payload": "bench-payload", "general": "bench-general"}
        validated = {"confluent.value.schema.validation": "true"}
        futures = admin.create_topics([
            NewTopic(topics["off"], 1, 1), NewTopic(topics["on"], 1, 1, config=validated),
            NewTopic(topics["general"], 1, 1, config=validated),
            NewTopic(topics["payload"], 1, 1, config={**validated, "eoslog.value.schema.validation.level": "payload"})])
        for future in futures.values():
            future.result(30)
        client = SchemaRegistryClient({"url": server.url})
        schema_id = client.register_schema("bench-on-value", Schema(json.dumps(SCHEMA), "AVRO"))
        for topic in ("bench-payload", "bench-general"):
            assert client.register_schema(f"{topic}-value", Schema(json.dumps(SCHEMA), "AVRO")) == schema_id
        value = avro_value(schema_id, args.value_bytes)
        # --vary: a size that changes from record to record, as Avro values with strings of any length have
        values = ([avro_value(schema_id, args.value_bytes // 2 + (i * 7 % 17) * args.value_bytes // 16)
                   for i in range(17)] if args.vary else [value])
        view = embedded.broker.schema_validation.view
        wait_until(lambda: schema_id in view.ids("bench-general-value"), 30, "the broker sees the id")
        kinds = ["off", "on"] + ["payload"] * args.payload + ["general"] * args.general
        if args.general:
            from eoslog.schema_registry.wire_scan import scan_general

            (check,) = embedded.call(lambda: embedded.broker.registry.partition(topics["general"], 0).record_checks)
            check._scan = lambda records, count, _keys=True: scan_general(records, count)
        for kind in kinds[1:]:  # warm-up, and a check that the values pass
            produce(embedded.bootstrap, topics[kind], values, 1000, args.compression, args.acks)
        rates: dict[str, list[float]] = {kind: [] for kind in kinds}
        loop_us: dict[str, list[float]] = {kind: [] for kind in kinds}
        # The broker's event loop runs in one thread: its CPU time per record is the cost that does not
        # depend on how busy the shared machine is (the records a second do).
        loop_clock = time.pthread_getcpuclockid(embedded._thread.ident)
        for round_ in range(args.rounds):
            shift = round_ % len(kinds)
            for kind in kinds[shift:] + kinds[:shift]:
                rate, cpu = produce(embedded.bootstrap, topics[kind], values, args.records, args.compression,
                                    args.acks, loop_clock, args.producer_process)
                rates[kind].append(rate)
                loop_us[kind].append(cpu)
        off_us, decode_us, on_us, varied_us, payload_us = check_alone(schema_id, value, view)
    off, on = statistics.median(rates["off"]), statistics.median(rates["on"])
    sizes = sorted({len(v) for v in values})
    shown = f"{sizes[0]}-byte" if len(sizes) == 1 else f"{sizes[0]}- to {sizes[-1]}-byte"
    print(f"records: {args.records} x {args.rounds} rounds per topic, {shown} values, "
          f"compression {args.compression}, acks {args.acks}, producer in "
          f"{'a child' if args.producer_process else 'the broker'} process")
    print(f"validation off: {off:10,.0f} records/s  (rounds: {', '.join(f'{r:,.0f}' for r in rates['off'])})")
    print(f"validation on:  {on:10,.0f} records/s  (rounds: {', '.join(f'{r:,.0f}' for r in rates['on'])})")
    if args.payload:
        payload = statistics.median(rates["payload"])
        print(f"payload:        {payload:10,.0f} records/s  (rounds: "
              f"{', '.join(f'{r:,.0f}' for r in rates['payload'])})")
    if args.general:
        general = statistics.median(rates["general"])
        print(f"on, general scan: {general:8,.0f} records/s  (rounds: "
              f"{', '.join(f'{r:,.0f}' for r in rates['general'])})")
    print(f"on / off: {on / off:.3f}  (cost {100 * (1 - on / off):.1f} %)")
    loop = {kind: statistics.median(values) for kind, values in loop_us.items()}
    print("broker event loop CPU, µs a record (median): " + ", ".join(f"{kind} {us:.2f}" for kind, us in loop.items())
          + f"; on / off {loop['on'] / loop['off']:.3f}")
    if args.general:
        print(f"general scan / off: {general / off:.3f}  (cost {100 * (1 - general / off):.1f} %)")
    if args.payload:
        print(f"payload / off: {payload / off:.3f}  (cost {100 * (1 - payload / off):.1f} %); "
              f"payload / on: {payload / on:.3f}")
    print(f"validate_records on a 500-record batch: {off_us:8.1f} µs without a check, {decode_us:8.1f} µs with "
          f"one that reads nothing (the batch decoded: {(decode_us - off_us) / 500:.2f} µs a record), {on_us:8.1f} µs "
          f"with the schema id check ({(on_us - off_us) / 500:.3f} µs a record; {(varied_us - off_us) / 500:.3f} µs "
          f"with sizes that differ from record to record); {payload_us:8.1f} µs with payload validation "
          f"({(payload_us - off_us) / 500:.2f} µs a record)")


if __name__ == "__main__":
    main()
