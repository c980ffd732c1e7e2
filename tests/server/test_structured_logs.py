"""`eoslog serve --log-format json --log-level ... --metrics-listen ...` as a real process: every line it
writes is a JSON object with ts, level, logger and message; per-component levels apply (the server's
debug lines appear, the log layer's info lines do not); a refused request is logged at debug with its
reason; and the endpoint the flag asked for serves metrics."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import urllib.request

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from eoslog.server.logging_setup import parse_levels
from eoslog.testing.process import free_port
from eoslog.testing.wait import wait_until


def test_json_lines_per_component_levels_and_refusals(tmp_path):
    port, metrics_port = free_port(), free_port()
    port_file = tmp_path / "port"
    stderr_path = tmp_path / "broker.log"
    command = [sys.executable, "-m", "eoslog", "serve", "--data-dir", str(tmp_path / "data"),
               "--listen", f"127.0.0.1:{port}", "--port-file", str(port_file),
               "--metrics-listen", f"127.0.0.1:{metrics_port}", "--log-format", "json",
               "--log-level", "warning", "--log-level", "eoslog.server=debug",
               "--log-level", "eoslog.api.errors=debug"]
    with open(stderr_path, "wb") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr, stdin=subprocess.DEVNULL)
    try:
        wait_until(lambda: port_file.exists() or process.poll() is not None, 30, "the broker is ready")
        assert process.poll() is None, stderr_path.read_text()
        bootstrap = f"127.0.0.1:{port}"
        producer = Producer({"bootstrap.servers": bootstrap})
        producer.produce("logged", b"x", partition=0)
        assert producer.flush(15) == 0
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "auto.offset.reset": "error"})
        consumer.assign([TopicPartition("logged", 0, 500)])

        def refused() -> bool:
            message = consumer.poll(0.2)
            return message is not None and message.error() is not None \
                and message.error().code() == KafkaError._AUTO_OFFSET_RESET

        wait_until(refused, 10, "the out-of-range fetch is refused")
        consumer.close()
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as response:
            assert 'request="Fetch"' in response.read().decode()
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0

    lines = [line for line in stderr_path.read_text().splitlines() if line.strip()]
    entries = [json.loads(line) for line in lines]  # every line parses
    for entry in entries:
        assert {"ts", "level", "logger", "message"} <= entry.keys()
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", entry["ts"])
    loggers = {(e["logger"], e["level"]) for e in entries}
    assert ("eoslog.server.broker", "info") in loggers  # eoslog.server=debug lets its info through
    assert ("eoslog.server.metrics", "info") in loggers
    assert not any(e["logger"].startswith("eoslog.log") and e["level"] == "info" for e in entries)  # root: warning
    refusals = [e for e in entries if e["logger"] == "eoslog.api.errors" and e["level"] == "debug"]
    assert any("OFFSET_OUT_OF_RANGE" in e["message"] for e in refusals), refusals


def test_log_level_specs():
    assert parse_levels(["info"]) == ("info", {})
    assert parse_levels(["warning", "eoslog.cluster=debug", "kazoo=ERROR"]) == (
        "warning", {"eoslog.cluster": "debug", "kazoo": "error"})
    for bad in ("verbose", "eoslog.cluster=loud", "=debug"):
        with pytest.raises(ValueError):
            parse_levels([bad])


def test_metrics_listen_property():
    from eoslog.server.config import BrokerConfig, ConfigError

    config = BrokerConfig()
    assert config.metrics_listen is None
    config.set_property("eoslog.metrics.listen", "0.0.0.0:9404")
    assert config.metrics_listen == ("0.0.0.0", 9404)
    with pytest.raises(ConfigError):
        config.set_property("eoslog.metrics.listen", "nonsense")


def test_json_lines_carry_extra_fields_and_tracebacks():
    import logging

    from eoslog.server.logging_setup import JsonFormatter

    record = logging.LogRecord("eoslog.x", logging.WARNING, __file__, 1, "moved %s", ("t-0",), None)
    record.topic = "t"
    entry = json.loads(JsonFormatter().format(record))
    assert entry["message"] == "moved t-0" and entry["level"] == "warning" and entry["topic"] == "t"
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        record = logging.LogRecord("eoslog.x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    assert "RuntimeError: boom" in json.loads(JsonFormatter().format(record))["exception"]
