"""Produce at 100 B without Python in the client: kcat against eoslog, Tansu and librdkafka's mock.

    PYTHONPATH=src .venv/bin/python bench/kcat_produce_bench.py [--messages 3000000] [--size 100]
        [--rounds 3] [--fsync-on-ack true|false]

`eoslog bench` drives confluent-kafka from Python, one `produce()` call per message; at 100 B that call,
not the broker, sets the pace (every target lands at ~0.65-0.75M msgs/s, docs/benchmarks.md). Here
kcat (C, librdkafka) sends a file of SIZE-byte lines, idempotent, acks=all, linger.ms 5, batch.size
1,000,000, to partition 0 of a one-partition topic on each target. Writing to partition 0 makes the mock
like for like too: it always creates 4 partitions, but only one of them is written. The targets take
turns, each round in the same order; the rate is messages over kcat's whole run (connect and final
flush included).

Debian's kcat links the system librdkafka (2.0.2 on Debian 12), whose ApiVersions handling Tansu 0.6
refuses; kcat is run against the librdkafka that confluent-kafka's wheel bundles (2.16), the same library
`eoslog bench` uses.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))


def bundled_librdkafka_dir(scratch: str) -> str:
    """A directory holding ``librdkafka.so.1`` that points at confluent-kafka's bundled library."""
    import confluent_kafka

    libs = glob.glob(str(Path(confluent_kafka.__file__).parent.parent / "confluent_kafka.libs" / "librdkafka*.so*"))
    if not libs:
        raise SystemExit("confluent-kafka's wheel bundles no librdkafka here; kcat would use the system one")
    os.symlink(libs[0], os.path.join(scratch, "librdkafka.so.1"))
    return scratch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=3_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fsync-on-ack", default="true", choices=["true", "false"])
    args = parser.parse_args()
    kcat = shutil.which("kcat")
    if kcat is None:
        raise SystemExit("kcat is not installed (make test installs it)")

    from eoslog.loadgen.bench import _job_delete_topics, _job_prepare_topic
    from eoslog.loadgen.targets import mock_cluster, tansu_broker
    from eoslog.testing.embedded import EmbeddedBroker

    with contextlib.ExitStack() as stack:
        scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="kcat-bench-"))
        env = {**os.environ, "LD_LIBRARY_PATH": bundled_librdkafka_dir(scratch)}
        lines = os.path.join(scratch, "lines")
        with open(lines, "wb") as out:
            out.write((b"x" * (args.size - 1) + b"\n") * args.messages)
        targets = {"eoslog": stack.enter_context(EmbeddedBroker()).bootstrap,
                   "tansu": stack.enter_context(tansu_broker()),
                   "mock": stack.enter_context(mock_cluster())}
        rates: dict[str, list[float]] = {name: [] for name in targets}
        for r in range(args.rounds):
            for name, bootstrap in targets.items():
                topic = f"kcat-bench-{uuid.uuid4().hex[:8]}"
                _job_prepare_topic(bootstrap, topic, 1, {"eoslog.fsync.on.ack": args.fsync_on_ack}, 30)
                started = time.perf_counter()
                subprocess.run([kcat, "-P", "-b", bootstrap, "-t", topic, "-p", "0",
                                "-X", "enable.idempotence=true", "-X", "acks=all", "-X", "linger.ms=5",
                                "-X", "batch.size=1000000", "-X", "log_level=3", "-l", lines],
                               check=True, env=env)
                seconds = time.perf_counter() - started
                _job_delete_topics(bootstrap, [topic], 30)
                rates[name].append(args.messages / seconds)
                print(f"round {r + 1} {name:6}: {args.messages / seconds:12,.0f} msgs/s "
                      f"{args.messages * args.size / seconds / 1e6:7.1f} MB/s ({seconds:.2f} s)", flush=True)
    median = {name: statistics.median(values) for name, values in rates.items()}
    print(f"\n{args.messages:,} x {args.size} B, eoslog.fsync.on.ack={args.fsync_on_ack}, medians of {args.rounds}:")
    for name, value in median.items():
        print(f"  {name:6} {value:12,.0f} msgs/s {value * args.size / 1e6:7.1f} MB/s")
    print(f"  eoslog / tansu {median['eoslog'] / median['tansu']:.2f}x, eoslog / mock {median['eoslog'] / median['mock']:.2f}x")


if __name__ == "__main__":
    main()
