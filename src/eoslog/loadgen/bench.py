"""`eoslog bench`: a load generator built on confluent-kafka that runs against any bootstrap address.

It measures, per message size: produce throughput (msgs/s, MB/s, where MB is 10**6 bytes) until every
delivery report is in, the produce-to-delivery-report latency of that run (mostly queueing, since the
producer fills its queue as fast as it can), the same latency in a paced run (a fixed low rate, so it
shows the broker's round trip instead), and consume throughput reading back what the throughput run
wrote (assign from the beginning, no group membership; read_committed unless `--isolation-level` says
otherwise). Each run creates its own topics and deletes them once measured (only the tiny warm-up topic
stays), so runs are alike and a `--repeat` series does not fill the target's disk or page cache.

The ceiling to compare with is librdkafka's in-memory mock cluster (`test.mock.num.brokers`), a C
broker that stores nothing on disk, driven by the very same client code: `--compare-mock` runs the same
workload against both in one run and prints the ratios, because absolute figures on a shared machine
swing between runs (docs/benchmarks.md). `--compare-tansu` adds Tansu, a Rust broker, with its in-memory
storage (targets.py). report.py holds what a run measured, plot.py draws it.

The clients run in a separate worker process (multiprocessing, spawn) so that the load generator never
shares a GIL with an embedded broker, which lives in a thread of this process. Each message carries its
8-byte sequence number as its key: the delivery callback reads it back to find the send time without a
closure per message. Values come from a small pool of random payloads, so they do not compress.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import struct
import time
import uuid
from array import array
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import click

from eoslog.loadgen.report import (
    MOCK,
    TANSU,
    BenchReport,
    BenchSettings,
    ConsumeResult,
    LatencySummary,
    ProduceResult,
    SizeResult,
    TargetReport,
)
from eoslog.loadgen.targets import TargetUnavailable, mock_cluster, tansu_broker

__all__ = ["MOCK", "TANSU", "BenchError", "BenchReport", "BenchSettings", "LatencySummary", "bench_command",
           "mock_cluster", "run_bench"]

_SEQUENCE = struct.Struct(">Q")
_PAYLOAD_POOL = 64  # distinct random values per size; a power of two so `i & (pool - 1)` picks one
_WARM_UP_TOPIC = "eoslog-bench-warm-up"
ISOLATION_LEVELS = ("read_committed", "read_uncommitted")


class BenchError(Exception):
    """The workload could not run (the broker refused the client, a topic never appeared, ...)."""


# ---------------------------------------------------------------------------------------------------
# Worker-process jobs. Top-level functions taking plain values, so the spawn context can pickle them.
# ---------------------------------------------------------------------------------------------------

def _serves_admin(cluster) -> bool:
    """Whether the cluster's metadata names a live controller, i.e. CreateTopics/DeleteTopics can be
    served. librdkafka's mock names none (its old Metadata leaves the controller at 0, not a broker id)."""
    return cluster.controller_id in cluster.brokers


def _job_prepare_topic(bootstrap: str, topic: str, partitions: int, configs: dict[str, str],
                       timeout: float) -> int:
    """Creates the topic and returns its partition count.

    A cluster whose metadata names no live controller (librdkafka's mock) cannot serve CreateTopics; it
    creates the topic, with its own default partition count, on the first metadata request naming it.
    """
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic

    client = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "log_level": 3})
    if _serves_admin(client.list_topics(timeout=timeout)):
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
        new_topic = NewTopic(topic, partitions, 1, config=configs)
        future = admin.create_topics([new_topic], operation_timeout=timeout)[topic]
        try:
            future.result(timeout)
        except confluent_kafka.KafkaException as exc:
            if exc.args[0].code() != confluent_kafka.KafkaError.TOPIC_ALREADY_EXISTS:
                raise BenchError(f"could not create topic {topic!r}: {exc.args[0].str()}") from None
    deadline = time.monotonic() + timeout
    while True:  # metadata may lag the creation by a moment
        metadata = client.list_topics(topic, timeout=max(1.0, deadline - time.monotonic()))
        found = metadata.topics.get(topic)
        if found is not None and found.error is None and found.partitions:
            return len(found.partitions)
        if time.monotonic() > deadline:
            raise BenchError(f"topic {topic!r} has no partitions after {timeout} s: {found and found.error}")
        time.sleep(0.05)


def _job_delete_topics(bootstrap: str, topics: list[str], timeout: float) -> None:
    """Deletes a run's topics, so that runs do not pile up data on the target: a broker that writes a log
    would otherwise meet its page cache's dirty limits after a few gigabytes (with --repeat, every later
    run is then paced by the kernel's writeback instead of the broker), and the runs would not be alike.
    The mock serves no DeleteTopics (nor CreateTopics); it keeps its bounded in-memory tail."""
    import confluent_kafka
    from confluent_kafka.admin import AdminClient

    client = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "log_level": 3})
    if not _serves_admin(client.list_topics(timeout=timeout)):
        return
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    for topic, future in admin.delete_topics(topics, operation_timeout=timeout).items():
        try:
            future.result(timeout)
        except confluent_kafka.KafkaException as exc:
            if exc.args[0].code() != confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise BenchError(f"could not delete topic {topic!r}: {exc.args[0].str()}") from None


def _job_produce(bootstrap: str, topic: str, size: int, settings: BenchSettings,
                 paced: bool) -> ProduceResult:
    import confluent_kafka

    if paced:
        count, rate = settings.latency_messages, settings.latency_rate
        config = settings.producer_config(bootstrap, linger_ms=settings.latency_linger_ms)
        time_limit = count / rate + settings.timeout
    else:
        count, rate = settings.messages, 0.0
        config = settings.producer_config(bootstrap)
        time_limit = settings.seconds
    sent = array("d", bytes(8 * count))
    latencies = array("d")
    errors = 0
    first_error: list[str] = []
    unpack = _SEQUENCE.unpack
    clock = time.perf_counter

    def on_delivery(err, msg) -> None:
        nonlocal errors
        now = clock()
        if err is not None:
            errors += 1
            if not first_error:
                first_error.append(err.str())
        else:
            latencies.append(now - sent[unpack(msg.key())[0]])

    fatal: list[str] = []

    def on_error(err) -> None:  # without an error callback a fatal error surfaces inside a delivery callback
        if err.fatal():
            fatal.append(err.str())

    producer = confluent_kafka.Producer({**config, "on_delivery": on_delivery, "error_cb": on_error})
    # Connection, InitProducerId and topic metadata happen before the clock starts.
    try:
        producer.produce(_WARM_UP_TOPIC, b"warm-up", _SEQUENCE.pack(0))
        producer.list_topics(topic, timeout=settings.timeout)
        unsent = producer.flush(settings.timeout)
    except (confluent_kafka.KafkaException, SystemError) as exc:
        # A fatal error (say, a broker that does not offer idempotence) can surface as an exception left
        # pending while the next callback runs; confluent-kafka then reports it as a SystemError.
        reason = fatal[0] if fatal else exc.__cause__ or exc
        raise BenchError(f"the client failed during warm-up: {reason}") from None
    if unsent != 0 or fatal or errors:
        detail = fatal[0] if fatal else first_error[0] if first_error else "timed out"
        raise BenchError(f"the warm-up message was not delivered: {detail}")
    latencies = array("d")
    errors = 0

    payloads = [os.urandom(size) for _ in range(_PAYLOAD_POOL)]
    mask = _PAYLOAD_POOL - 1
    produce, poll, pack = producer.produce, producer.poll, _SEQUENCE.pack
    started = clock()
    deadline = started + time_limit
    if paced:
        interval = 1.0 / rate
        due = started
        for i in range(count):
            while (wait := due - clock()) > 0:
                poll(wait)  # serves delivery callbacks while waiting, so their timestamps are prompt
            sent[i] = clock()
            produce(topic, payloads[i & mask], pack(i))
            due += interval
            if clock() > deadline:
                break
    else:
        for i in range(count):
            if not i & 1023:
                poll(0)
                if clock() > deadline or fatal:
                    break
            key = pack(i)
            while True:
                sent[i] = clock()
                try:
                    produce(topic, payloads[i & mask], key)
                    break
                except BufferError:  # the local queue is full: wait for delivery reports
                    poll(0.001)
    undelivered = producer.flush(settings.timeout)
    seconds = clock() - started
    if fatal:
        raise BenchError(f"producer failed: {fatal[0]}")
    delivered = len(latencies)
    return ProduceResult(messages=delivered, bytes=delivered * size, seconds=seconds, errors=errors,
                         undelivered=undelivered, latency=LatencySummary.of(latencies))


def _job_consume(bootstrap: str, topic: str, produced: int, settings: BenchSettings) -> ConsumeResult:
    """Reads the topic from its log start offsets until `produced` messages have been read.

    librdkafka's mock cluster keeps only the last 5 MiB (or 100,000 batches) of each partition, so a run
    that produced more is re-read from the start, pass after pass, to read the same volume as a broker
    that keeps everything (which needs exactly one pass).
    """
    import confluent_kafka
    from confluent_kafka import TopicPartition

    consumer = confluent_kafka.Consumer(settings.consumer_config(bootstrap))
    try:
        partitions = consumer.list_topics(topic, timeout=settings.timeout).topics[topic].partitions
        starts, retained, trimmed = [], 0, False
        for p in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=settings.timeout)
            starts.append(TopicPartition(topic, p, low))
            retained += high - low
            trimmed = trimmed or low > 0
        wanted = produced if retained else 0
        # Only a log trimmed at its start needs more than one pass. An untrimmed one is read in a single
        # pass even when its high watermarks look short: Tansu 0.6 reports the last batch's base offset + 1.
        per_pass = retained if trimmed else wanted
        clock = time.perf_counter
        messages = nbytes = errors = passes = 0
        started = clock()
        deadline = started + settings.timeout
        consume = consumer.consume
        while messages < wanted and clock() < deadline:
            consumer.assign(starts)
            passes += 1
            pass_end = min(wanted, messages + per_pass)
            while messages < pass_end and clock() < deadline:
                for msg in consume(10_000, 0.2):
                    if msg.error():
                        errors += 1
                        continue
                    messages += 1
                    nbytes += len(msg)  # the value's length
        seconds = clock() - started
    finally:
        consumer.close()
    return ConsumeResult(messages=messages, bytes=nbytes, seconds=seconds, produced=produced,
                         retained=retained, passes=passes, errors=errors)


# ---------------------------------------------------------------------------------------------------
# Orchestration (this process): targets, the worker pool, the report.
# ---------------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _Target:
    name: str
    bootstrap: str


def _bench_once(pool: ProcessPoolExecutor, target: _Target, size: int, settings: BenchSettings,
                progress) -> SizeResult:
    """One run of the workload for one size: fresh topics, produce, paced produce, consume, delete."""
    limit = settings.timeout * 3 + settings.seconds

    def call(fn, *args):
        return pool.submit(fn, *args).result(timeout=limit)

    topic = f"eoslog-bench-{size}-{uuid.uuid4().hex[:8]}"
    name = f"{target.name}, {size} B"
    configs = dict(settings.topic_configs)
    partitions = call(_job_prepare_topic, target.bootstrap, topic, settings.partitions, configs,
                      settings.timeout)
    progress(f"{name}: produce throughput")
    produce = call(_job_produce, target.bootstrap, topic, size, settings, False)
    paced = None
    if settings.latency_rate > 0 and settings.latency_messages > 0:
        progress(f"{name}: paced latency at {settings.latency_rate:g} msgs/s")
        call(_job_prepare_topic, target.bootstrap, topic + "-paced", settings.partitions, configs,
             settings.timeout)
        paced = call(_job_produce, target.bootstrap, topic + "-paced", size, settings, True)
    progress(f"{name}: consume throughput")
    consume = call(_job_consume, target.bootstrap, topic, produce.messages, settings)
    call(_job_delete_topics, target.bootstrap, [topic] + ([topic + "-paced"] if paced else []), settings.timeout)
    return SizeResult(size, partitions, produce, paced, consume)


def _median_run(runs: list[SizeResult]) -> SizeResult:
    """Each figure from its own median run (by throughput, or by p50 for the paced run)."""
    def median(items, key):
        return sorted(items, key=key)[(len(items) - 1) // 2]

    paced = [r.paced for r in runs if r.paced is not None]
    return SizeResult(size=runs[0].size, partitions=runs[0].partitions,
                      produce=median([r.produce for r in runs], lambda p: p.msgs_per_s),
                      paced=median(paced, lambda p: p.latency.p50_ms) if paced else None,
                      consume=median([r.consume for r in runs], lambda c: c.msgs_per_s))


def run_bench(bootstrap: str | None, settings: BenchSettings, compare_mock: bool = False,
              progress=lambda message: None, compare_tansu: str | None = None) -> BenchReport:
    """Runs the workload against `bootstrap` ("HOST:PORT", "mock", or None for an embedded eoslog broker),
    against librdkafka's mock cluster too when `compare_mock` is set, and against an in-memory Tansu
    broker when `compare_tansu` is not None (a path to its binary, or "" to look for one).

    Targets take turns for every size and repetition, so that noise from other work on a shared machine
    falls on both sides of a ratio alike.
    """
    if any(size < _SEQUENCE.size for size in settings.sizes):
        raise ValueError(f"message sizes must be at least {_SEQUENCE.size} bytes")
    # The load generator's client, before anything starts: without the bench extra the command is then the
    # one-line hint alone, not a broker started and a hint after it (tools/extras.py).
    import confluent_kafka  # noqa: F401

    targets: list[_Target] = []
    with contextlib.ExitStack() as stack:
        pool = stack.enter_context(ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")))
        if bootstrap is None:
            from eoslog.server.embedded import EmbeddedBroker

            progress("starting an embedded eoslog broker")
            broker = stack.enter_context(EmbeddedBroker())
            targets.append(_Target("eoslog (embedded)", broker.bootstrap))
        elif bootstrap != MOCK:
            targets.append(_Target(bootstrap, bootstrap))
        if compare_tansu is not None:
            progress("starting Tansu (memory storage)")
            try:
                targets.append(_Target(TANSU, stack.enter_context(tansu_broker(compare_tansu or None))))
            except TargetUnavailable as exc:
                raise BenchError(str(exc)) from None
        if bootstrap == MOCK or compare_mock:
            targets.append(_Target(MOCK, stack.enter_context(mock_cluster())))
        runs: dict[tuple[str, int], list[SizeResult]] = {}
        for size in settings.sizes:
            for _ in range(max(1, settings.repeat)):
                for target in targets:
                    runs.setdefault((target.name, size), []).append(
                        _bench_once(pool, target, size, settings, progress))
    return BenchReport(settings, [
        TargetReport(t.name, t.bootstrap, [_median_run(runs[(t.name, size)]) for size in settings.sizes])
        for t in targets])


def render(report: BenchReport, console=None) -> None:
    from rich.console import Console
    from rich.table import Table

    if console is None:
        console = Console()
        if not console.is_terminal:
            console = Console(width=160)  # piped into a file: do not squeeze the columns into 80
    s = report.settings
    produce_table = Table(title=f"produce: acks={s.acks} idempotent={s.idempotent} linger.ms={s.linger_ms:g} "
                                f"batch.size={s.batch_size} compression={s.compression}; paced run "
                                f"{s.latency_rate:g} msgs/s, linger.ms={s.latency_linger_ms:g}; "
                                f"median of {s.repeat}"
                                + "".join(f"; {name}={value}" for name, value in s.topic_configs))
    consume_table = Table(title=f"consume ({s.isolation_level}; assign from the log start offsets, no group)")
    for column in ("target", "size B", "partitions", "msgs/s", "MB/s", "p50 ms", "p99 ms", "max ms",
                   "paced p50", "paced p99", "paced max", "errors"):
        produce_table.add_column(column, justify="left" if column == "target" else "right")
    for column in ("target", "size B", "msgs/s", "MB/s", "consumed", "produced", "passes", "errors"):
        consume_table.add_column(column, justify="left" if column == "target" else "right")
    for target in report.targets:
        for r in target.results:
            p, c, q = r.produce, r.consume, r.paced
            produce_table.add_row(
                target.name, str(r.size), str(r.partitions), f"{p.msgs_per_s:,.0f}", f"{p.mb_per_s:.1f}",
                f"{p.latency.p50_ms:.2f}", f"{p.latency.p99_ms:.2f}", f"{p.latency.max_ms:.1f}",
                *((f"{q.latency.p50_ms:.2f}", f"{q.latency.p99_ms:.2f}", f"{q.latency.max_ms:.1f}") if q
                  else ("-", "-", "-")),
                _flag(p.errors + p.undelivered + (q.errors + q.undelivered if q else 0)))
            consume_table.add_row(target.name, str(r.size), f"{c.msgs_per_s:,.0f}", f"{c.mb_per_s:.1f}",
                                  f"{c.messages:,}", f"{c.produced:,}", str(c.passes), _flag(c.errors))
    console.print(produce_table)
    console.print(consume_table)
    for reference in (MOCK, TANSU):
        ratios = report.ratios(reference)
        if not ratios:
            continue
        ratio_table = Table(
            title=f"{report.targets[0].name} / {reference} (throughput: higher is better; latency: lower)")
        for column in ("size B", "produce MB/s", "consume MB/s", "produce p50", "paced p50"):
            ratio_table.add_column(column, justify="right")
        for row in ratios:
            ratio_table.add_row(str(row["size"]), *(_times(row[key]) for key in
                                ("produce_mb_per_s", "consume_mb_per_s", "produce_p50_ms", "paced_p50_ms")))
        console.print(ratio_table)


def _flag(errors: int) -> str:
    return f"[red]{errors}[/red]" if errors else "0"


def _times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}×"


def _parse_sizes(ctx, param, value: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part) for part in value.split(",") if part.strip())
    except ValueError:
        raise click.BadParameter("expected comma-separated byte counts, e.g. 100,1024") from None
    if not sizes or any(size < _SEQUENCE.size for size in sizes):
        raise click.BadParameter(f"each size must be at least {_SEQUENCE.size} bytes")
    return sizes


def _parse_pairs(ctx, param, values: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    pairs = []
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise click.BadParameter(f"expected NAME=VALUE, got {item!r}")
        pairs.append((name.strip(), value.strip()))
    return tuple(pairs)


@click.command("bench")
@click.option("--bootstrap", default=None, metavar="HOST:PORT|mock",
              help="Broker to load (default: an embedded eoslog broker; 'mock': librdkafka's mock cluster).")
@click.option("--compare-mock", is_flag=True,
              help="Also run the same workload against librdkafka's mock cluster.")
@click.option("--compare-tansu", "compare_tansu", is_flag=False, flag_value="", default=None, metavar="[PATH]",
              help="Also run it against Tansu with memory storage (the binary from the 'bench' extra, "
                   "tansu on PATH, or PATH).")
@click.option("--sizes", default="100,1024", show_default=True, callback=_parse_sizes,
              help="Message sizes in bytes.")
@click.option("--messages", default=500_000, show_default=True,
              help="Messages per throughput run (upper bound).")
@click.option("--seconds", default=10.0, show_default=True, help="Time limit per throughput run.")
@click.option("--acks", default="all", show_default=True, type=click.Choice(["0", "1", "all"]))
@click.option("--idempotent/--no-idempotent", default=True, show_default=True)
@click.option("--partitions", default=4, show_default=True,
              help="Partitions of each bench topic (the mock: always 4).")
@click.option("--linger-ms", default=5.0, show_default=True)
@click.option("--batch-size", default=1_000_000, show_default=True)
@click.option("--compression", default="none", show_default=True,
              type=click.Choice(["none", "gzip", "snappy", "lz4", "zstd"]))
@click.option("--latency-rate", default=1000.0, show_default=True,
              help="Msgs/s of the paced latency run (0: skip).")
@click.option("--latency-messages", default=2000, show_default=True,
              help="Messages in the paced latency run.")
@click.option("--topic-config", "topic_configs", multiple=True, metavar="NAME=VALUE", callback=_parse_pairs,
              help="A config of the bench topics (repeatable), e.g. eoslog.fsync.on.ack=false.")
@click.option("--isolation-level", default="read_committed", show_default=True,
              type=click.Choice(ISOLATION_LEVELS), help="isolation.level of the consume run.")
@click.option("--repeat", default=1, show_default=True, help="Runs per figure (the median is reported).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON instead of tables.")
@click.option("--plot", "plot_path", default=None, metavar="OUT.png", type=click.Path(dir_okay=False),
              help="Also draw throughput and latency percentiles per target into a PNG (needs matplotlib).")
def bench_command(bootstrap, compare_mock, compare_tansu, sizes, messages, seconds, acks, idempotent, partitions,
                  linger_ms, batch_size, compression, latency_rate, latency_messages, topic_configs,
                  isolation_level, repeat, as_json, plot_path) -> None:
    """Measure produce/consume throughput and produce latency with confluent-kafka.

    Each run creates its topics and deletes them once measured."""
    if acks != "all" and idempotent:
        raise click.UsageError("an idempotent producer needs --acks all (or pass --no-idempotent)")
    settings = BenchSettings(sizes=sizes, messages=messages, seconds=seconds, acks=acks,
                             idempotent=idempotent,
                             partitions=partitions, linger_ms=linger_ms, batch_size=batch_size,
                             compression=compression, latency_rate=latency_rate,
                             latency_messages=latency_messages,
                             topic_configs=topic_configs, isolation_level=isolation_level,
                             repeat=repeat)
    from rich.console import Console

    status = Console(stderr=True)
    if bootstrap is None:
        # The embedded broker makes this command's process the broker's (the clients run in a spawned
        # worker): it gets the allocator and collector settings of `eoslog serve`, so the figures are what
        # a user of `eoslog serve` gets. (Here, not in run_bench: a test calling that keeps its own.)
        from eoslog.server import gc_policy
        from eoslog.server.run import tune_allocator

        tune_allocator()
        gc_policy.tune()
    try:
        report = run_bench(bootstrap, settings, compare_mock=compare_mock, compare_tansu=compare_tansu,
                           progress=lambda text: status.print(f"[dim]{time.strftime('%X')}[/dim] {text}"))
    except (BenchError, TimeoutError) as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        render(report)
    if plot_path:
        from eoslog.loadgen.plot import plot

        try:
            written = plot(report, plot_path)
        except ImportError as exc:
            raise click.ClickException(f"--plot needs matplotlib (pip install 'eoslog[bench]'): {exc}") from None
        status.print(f"plot written to {written}")
