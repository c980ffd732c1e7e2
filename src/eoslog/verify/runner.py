"""What every verify runner does the same way, whatever its workload (run.py's exactly-once workload,
queue_run.py's queue workload): the output directory, the time-stamped log, the broker or cluster under
test, the fault phase, the teardown and the files a run leaves. Each runner keeps only what its workload
needs besides (its workers, its final read, its checker), so a fix here reaches every workload at once."""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.verify.history import HistoryWriter
from eoslog.verify.workload import CLIENT_TUNING

WORKER_STOP_TIMEOUT_S = 45.0


def prepare_out(out: Path | None, prefix: str, stale: tuple[str, ...]) -> Path:
    """The run's directory (a new temporary one without ``out``). A reused one starts from scratch: the
    history, data directories and ``stale`` files belong to earlier runs."""
    out = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix=prefix))
    out.mkdir(parents=True, exist_ok=True)
    (out / "history.jsonl").unlink(missing_ok=True)
    shutil.rmtree(out / "data", ignore_errors=True)
    shutil.rmtree(out / "cluster", ignore_errors=True)
    for name in stale:
        (out / name).unlink(missing_ok=True)
    return out


def stamped(log: Callable[[str], None], began: float) -> Callable[[str], None]:
    """``log`` with the seconds since ``began`` in front of each message."""
    return lambda message: log(f"[{time.monotonic() - began:7.1f}s] {message}")


def proxied_broker(data_dir: Path, properties: dict[str, str], log_path: Path, proxy_seed: int):
    """One broker process (not started) behind a started fault proxy: (broker, proxy, the bootstrap the
    clients use, the proxy's)."""
    from eoslog.tools.local.faultproxy import FaultProxy
    from eoslog.tools.local.process import BrokerProcess, free_port

    broker_port, proxy_port = free_port(), free_port()
    proxy = FaultProxy("127.0.0.1", broker_port, listen_port=proxy_port, seed=proxy_seed)
    proxy.start_in_thread()
    broker = BrokerProcess(data_dir, broker_port, properties, advertised=f"127.0.0.1:{proxy_port}",
                           log_path=log_path)
    return broker, proxy, f"127.0.0.1:{proxy_port}"


def cluster_topic(brokers: int) -> tuple[int, dict[str, str]]:
    """A cluster run's topic: (replication factor, config), three replicas and two in sync at most."""
    return min(3, brokers), {"min.insync.replicas": str(min(2, brokers))}


def start_under_test(broker, cluster, size: int, bootstrap: str | None, say: Callable[[str], None],
                     namespaces: bool = False) -> str:
    """Starts the single broker or the cluster (of ``size`` brokers); the bootstrap the clients use."""
    if broker is not None:
        broker.start()
        say(f"broker pid {broker.process.pid} on port {broker.port}, clients through the proxy at {bootstrap}")
    if cluster is not None:
        cluster.start()
        bootstrap = cluster.bootstrap
        say(f"cluster of {size} brokers on ZooKeeper {cluster.zookeeper.connect_string}, "
            + (f"each in a network namespace of its own: {bootstrap}" if namespaces
               else f"each behind a fault proxy: {bootstrap}"))
    return bootstrap


def create_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int = 1,
                 config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **CLIENT_TUNING})
    for future in admin.create_topics([NewTopic(topic, partitions, replication_factor,
                                                config=config or {})]).values():
        future.result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        metadata = admin.list_topics(topic, timeout=10)
        entry = metadata.topics.get(topic)
        if entry is not None and entry.error is None and len(entry.partitions) == partitions:
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic} not visible in metadata")


def nemesis_options(pool, options, say: Callable[[str], None]) -> dict:
    """What every nemesis is given besides its kinds and targets."""
    return {"kill_client": pool.kill_one, "fault_seconds": options.fault_seconds,
            "quiet_seconds": options.quiet_seconds, "drop_rate": options.drop_rate, "log": say}


def fault_phase(pool, nemesis, duration: float, cluster, topic: str, partitions: int,
                say: Callable[[str], None]) -> list[str]:
    """The run proper: the nemesis injects faults while the pool replaces dead workers, until ``duration``
    passes, the nemesis fails, or its forced schedule is done; then healing, the workers stopped and, on
    a cluster, every partition led again. What went wrong, as problems."""
    problems = []
    nemesis.start()
    deadline = time.monotonic() + duration
    while time.monotonic() < deadline and nemesis.error is None and not nemesis.finished.is_set():
        pool.supervise()
        time.sleep(0.1)
    say("healing and stopping workers")
    nemesis.stop(timeout=120)
    if nemesis.error is not None:
        problems.append(f"nemesis: {nemesis.error}")
    # A fault that landed after the loop's last look (a client kill at the deadline) is recorded and
    # its worker replaced like any other, before the pool stops.
    pool.supervise()
    killed = pool.stop()
    if killed:
        say(f"{killed} worker(s) did not stop within {WORKER_STOP_TIMEOUT_S:.0f} s and were killed")
    if cluster is not None:
        problems += wait_cluster_led(cluster, topic, partitions, say)
    return problems


def checked(step: tuple[bool, str], say: Callable[[str], None]) -> list[str]:
    """A closing step's (complete, description), logged; the description as a problem when incomplete."""
    complete, description = step
    say(description)
    return [] if complete else [description]


def wait_cluster_led(cluster, topic: str, partitions: int, say, timeout: float = 120.0) -> list[str]:
    """After healing: every broker registered and every partition of the topic led by one of them."""
    try:
        cluster.wait_for(lambda s: len(s.brokers) == len(cluster.brokers) and all(
            (s.leader_of(topic, p) or -1) > 0 for p in range(partitions)), timeout, "cluster healed")
    except TimeoutError as exc:
        return [f"the cluster did not heal: {str(exc).splitlines()[0]}"]
    say("cluster healed: every broker registered, every partition led")
    return []


def stop_clients_and_broker(pool, history: HistoryWriter, broker, proxy) -> list[str]:
    """The end of a run, for every workload: the workers, the history, the single broker and the fault
    proxy, in that order; what went wrong on the way, as problems (the run's result matters more than a
    slow shutdown)."""
    problems = []
    if pool is not None and not pool.stopping:
        pool.stop(timeout=5)
    history.close()
    if broker is not None:
        try:
            broker.__exit__(None, None, None)
        except Exception as exc:  # noqa: BLE001 - the run's result matters more than a slow shutdown
            problems.append(f"broker shutdown: {exc}")
    if proxy is not None:
        proxy.stop()
    return problems


def write_results(result, windows) -> None:
    """``report.txt``, ``summary.json`` and ``faults.json`` in the run's directory."""
    out = result.out
    (out / "report.txt").write_text(result.render_text() + "\n")
    (out / "summary.json").write_text(json.dumps(result.summary(), indent=2, default=str) + "\n")
    (out / "faults.json").write_text(json.dumps([dataclasses.asdict(w) for w in windows], indent=1) + "\n")
