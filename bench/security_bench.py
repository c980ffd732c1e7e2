"""What TLS and SASL cost: produce and consume throughput per security protocol, in one run.

    .venv/bin/python bench/security_bench.py [--messages 200000] [--size 1024] [--runs 3] [--write]

One broker process serves four listeners at once: PLAINTEXT, SSL (client certificates required),
SASL_PLAINTEXT (SCRAM-SHA-512) and SASL_SSL (SCRAM-SHA-512). For each, confluent-kafka produces
``--messages`` records of ``--size`` bytes (idempotent, acks=all, one partition, a fresh topic each run)
and a consumer reads them back (read_committed). The protocols alternate within each round, so drift
in the machine affects all alike; the figures are medians of the rounds, and ratios are to PLAINTEXT.
SASL costs once per connection (a SCRAM login is 2 round trips and PBKDF2 work on the client only),
TLS costs on every byte. ``--write`` appends a section to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import confluent_kafka

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from eoslog.testing.certs import make_certs
from eoslog.testing.process import BrokerProcess, free_port

USER, PASSWORD = "bench", "bench-secret"
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def client_configs(ports: dict[str, int], certs) -> dict[str, dict]:
    sasl = {"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": USER, "sasl.password": PASSWORD}
    tls = {"ssl.ca.location": str(certs.ca)}
    mutual = {**tls, "ssl.certificate.location": str(certs.client_cert("bench")),
              "ssl.key.location": str(certs.client_key("bench"))}
    security = {
        "PLAINTEXT": {"security.protocol": "plaintext"},
        "SSL": {"security.protocol": "ssl", **mutual},
        "SASL_PLAINTEXT": {"security.protocol": "sasl_plaintext", **sasl},
        "SASL_SSL": {"security.protocol": "sasl_ssl", **sasl, **tls},
    }
    return {name: {"bootstrap.servers": f"127.0.0.1:{ports[name]}", **config} for name, config in security.items()}


def produce(config: dict, topic: str, messages: int, size: int) -> float:
    producer = confluent_kafka.Producer({**config, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                                         "batch.size": 1_000_000})
    value = b"x" * size
    started = time.perf_counter()
    for _ in range(messages):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120):
        raise RuntimeError(f"{config['security.protocol']}: records not delivered")
    return messages * size / (time.perf_counter() - started) / 1e6


def consume(config: dict, topic: str, messages: int, size: int) -> float:
    """Assigned, not subscribed: a group join would be timed too."""
    consumer = confluent_kafka.Consumer({**config, "group.id": "bench", "enable.auto.commit": False,
                                         "isolation.level": "read_committed"})
    started = time.perf_counter()
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    got = 0
    deadline = time.monotonic() + 120
    while got < messages and time.monotonic() < deadline:
        got += sum(1 for m in consumer.consume(10_000, 1.0) if m.error() is None)
    elapsed = time.perf_counter() - started
    consumer.close()
    if got < messages:
        raise RuntimeError(f"{config['security.protocol']}: read {got} of {messages}")
    return messages * size / elapsed / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--write", action="store_true", help="append the results to docs/benchmarks.md")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="eoslog-security-bench-") as root:
        root = Path(root)
        certs = make_certs(root / "certs", ("bench",))
        data_dir = root / "data"
        subprocess.run([sys.executable, "-m", "eoslog", "users", "add", USER, "--data-dir", str(data_dir),
                        "--mechanism", "SCRAM-SHA-512", "--password-file", "-"], input=PASSWORD + "\n",
                       text=True, check=True, capture_output=True)
        ports = {name: free_port() for name in PROTOCOLS}
        properties = {
            "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
            "ssl.keystore.location": str(certs.broker), "ssl.truststore.location": str(certs.ca),
            "listener.name.ssl.ssl.client.auth": "required", "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        }
        configs = client_configs(ports, certs)
        results: dict[str, dict[str, list[float]]] = {name: {"produce": [], "consume": []} for name in PROTOCOLS}
        with BrokerProcess(data_dir=data_dir, port=ports["PLAINTEXT"], properties=properties):
            produce(configs["PLAINTEXT"], "warm-up", 20_000, args.size)
            for run in range(args.runs):
                order = PROTOCOLS if run % 2 == 0 else tuple(reversed(PROTOCOLS))
                for name in order:
                    topic = f"bench-{name.lower()}-{run}"
                    results[name]["produce"].append(produce(configs[name], topic, args.messages, args.size))
                    results[name]["consume"].append(consume(configs[name], topic, args.messages, args.size))
                    print(f"run {run + 1} {name:15} produce {results[name]['produce'][-1]:7.1f} MB/s   "
                          f"consume {results[name]['consume'][-1]:7.1f} MB/s", flush=True)

    medians = {name: {kind: statistics.median(values) for kind, values in kinds.items()}
               for name, kinds in results.items()}
    base = medians["PLAINTEXT"]
    lines = ["| listener | produce MB/s (min-max) | ratio | consume MB/s (min-max) | ratio |",
             "|---|---:|---:|---:|---:|"]
    for name in PROTOCOLS:
        m, r = medians[name], results[name]
        lines.append(f"| {name} | {m['produce']:.1f} ({min(r['produce']):.0f}-{max(r['produce']):.0f}) | "
                     f"{m['produce'] / base['produce']:.2f}x | {m['consume']:.1f} ({min(r['consume']):.0f}-"
                     f"{max(r['consume']):.0f}) | {m['consume'] / base['consume']:.2f}x |")
    table = "\n".join(lines)
    print(table)
    if args.write:
        machine = f"{platform.machine()}, {platform.system()} {platform.release()}, Python {platform.python_version()}"
        section = (
            f"\n## Security protocols: PLAINTEXT vs SSL vs SASL ({date.today().isoformat()})\n\n"
            f"`.venv/bin/python bench/security_bench.py --messages {args.messages} --size {args.size} "
            f"--runs {args.runs} --write` on {machine}, confluent-kafka {confluent_kafka.version()[0]} "
            f"(librdkafka {confluent_kafka.libversion()[0]}). One broker serving all four listeners; "
            f"idempotent acks=all produce of {args.messages:,} records of {args.size} B to one partition, then "
            f"a read_committed consume, alternating the protocols within each of {args.runs} rounds; medians, "
            f"ratios to PLAINTEXT. SSL requires client certificates; SASL is SCRAM-SHA-512.\n\n{table}\n")
        with open(Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md", "a") as out:
            out.write(section)


if __name__ == "__main__":
    main()
