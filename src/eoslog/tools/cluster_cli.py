"""`eoslog cluster ...`: a local cluster in one command, and the cluster's state over the Kafka protocol.

    eoslog cluster up [--brokers 3] [--zookeeper-nodes 1|3] [--dir DIR]
    eoslog cluster status --dir DIR;  eoslog cluster stop|start|restart BROKER --dir DIR
    eoslog cluster describe [--bootstrap HOST:PORT] [--topic T] [--zookeeper CONNECT] [--json]
    eoslog cluster elect-leaders [--preferred | --unclean] [--topic T] [--bootstrap HOST:PORT]
    eoslog cluster reassign --topic T --partition P --replicas 2,3 | --cancel;  eoslog cluster reassignments

describe and elect-leaders use Metadata, DescribeCluster and ElectLeaders, so they work against any
Kafka cluster too; elect-leaders sends to the controller Metadata names, as Kafka's admin client does.
"""

from __future__ import annotations

import contextlib
import signal
import tempfile
import time
from pathlib import Path

import click

from eoslog.client.connection import BrokerConnection
from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.tools.brokers import CLIENT_ID
from eoslog.tools.common import emit_json, json_option, plural, print_table
from eoslog.tools.txn_cli import DEFAULT_BOOTSTRAP

METADATA = (3, 9)
DESCRIBE_CLUSTER = (60, 0)
ELECT_LEADERS = (43, 1)


@click.group("cluster")
def cluster_group() -> None:
    """A replicated eoslog cluster (docs/cluster.md)."""


@cluster_group.command("up")
@click.option("--brokers", default=3, show_default=True, type=click.IntRange(1, 9))
@click.option("--zookeeper-nodes", default=1, show_default=True, type=click.Choice(["1", "3"]))
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where ZooKeeper and broker data go (default: a temporary directory, removed at exit).")
def up(brokers: int, zookeeper_nodes: str, directory: Path | None) -> None:
    """Start ZooKeeper and BROKERS brokers on loopback and watch them: print their PIDs, addresses and data
    directories, say when one dies, and stop, start or restart a broker when `eoslog cluster
    stop|start|restart ID --dir DIR` asks. Ctrl-C (or SIGTERM) stops them all."""
    from eoslog.tools.local.cluster import EmbeddedCluster
    from eoslog.tools.local.supervisor import CONTROL_SOCKET, ClusterSupervisor, ControlServer

    temporary = None
    if directory is None:
        temporary = tempfile.TemporaryDirectory(prefix="eoslog-cluster-")
        directory = Path(temporary.name)
    directory = directory.resolve()
    if (directory / CONTROL_SOCKET).exists():
        with contextlib.suppress(OSError):
            from eoslog.tools.local.supervisor import send

            send(directory, {"action": "status"}, timeout=5)
            raise click.ClickException(f"a cluster already runs on {directory}: stop it first (Ctrl-C in its terminal)")
    cluster = EmbeddedCluster(directory, brokers, int(zookeeper_nodes), session_timeout_ms=6000)
    supervisor = ClusterSupervisor(cluster)
    stopping = []
    previous = signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    control = None
    try:
        started = time.monotonic()
        cluster.start()
        cluster.release_client()
        control = ControlServer(directory / CONTROL_SOCKET, supervisor)
        click.echo(f"ZooKeeper: {cluster.zookeeper.connect_string_with_chroot('/eoslog')}")
        print_members(supervisor.members())
        click.echo(f"ready in {time.monotonic() - started:.1f} s; bootstrap servers:")
        click.echo(cluster.bootstrap)
        click.echo(f"eoslog cluster status|stop|start|restart [BROKER] --dir {directory}   (Ctrl-C stops the cluster)")
        while not stopping:
            for line in supervisor.poll():
                click.echo(f"{time.strftime('%H:%M:%S')} {line}")
            served = control.serve_once(0.2)
            if served is not None and served[0].get("action") != "status":
                click.echo(f"{time.strftime('%H:%M:%S')} {served[1]['message']} (asked on {CONTROL_SOCKET})")
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        click.echo("stopping brokers and ZooKeeper ...")
        if control is not None:
            control.close()
        # A broker whose ZooKeeper is gone does not finish a clean shutdown: it is killed sooner then.
        zookeeper_alive = all(node.is_running for node in cluster.zookeeper.nodes)
        cluster.stop(broker_timeout=60.0 if zookeeper_alive else 10.0)
        if temporary is not None:
            temporary.cleanup()


def print_members(members) -> None:
    print_table([[m.role, m.id, m.pid, m.state, m.address, m.data_dir, m.log] for m in members],
                ["ROLE", "ID", "PID", "STATE", "ADDRESS", "DATA-DIR", "LOG"])


def _ask(directory: Path, request: dict) -> dict:
    from eoslog.tools.local.supervisor import CONTROL_SOCKET, send

    try:
        return send(directory.resolve(), request)
    except OSError as exc:
        raise click.ClickException(f"no `eoslog cluster up` answers on {directory / CONTROL_SOCKET} "
                                   f"({exc.strerror or exc}): start one with `eoslog cluster up --dir {directory}`"
                                   ) from None


def _dir_option(command):
    return click.option("--dir", "directory", required=True, type=click.Path(file_okay=False, path_type=Path),
                        help="The directory `eoslog cluster up` runs on (it prints it).")(command)


@cluster_group.command("status")
@_dir_option
@json_option
def status(directory: Path, as_json: bool) -> None:
    """The processes of a running `eoslog cluster up`: role, id, PID, state, address, data dir, log."""
    answer = _ask(directory, {"action": "status"})
    if as_json:
        emit_json(answer["members"])
    else:
        print_members(_members(answer))


def _members(answer: dict):
    from eoslog.tools.local.supervisor import Member

    return [Member(**m) for m in answer["members"]]


def _broker_action(action: str):
    def command(broker: int, directory: Path, as_json: bool) -> None:
        answer = _ask(directory, {"action": action, "broker": broker})
        if as_json:
            emit_json({"ok": answer["ok"], "message": answer["message"], "members": answer["members"]})
        elif answer["ok"]:
            click.echo(answer["message"])
        if not answer["ok"]:
            raise click.ClickException(answer["message"])

    command.__name__ = f"{action}_command"
    command.__doc__ = {"stop": "Stop one broker of a running `eoslog cluster up` (SIGTERM: a clean shutdown).",
                       "start": "Start a stopped (or dead) broker again, on its port and data directory.",
                       "restart": "Stop a broker cleanly and start it again on its port and data directory.",
                       }[action]
    command = json_option(_dir_option(click.argument("broker", type=int)(command)))
    return cluster_group.command(action)(command)


for _action in ("stop", "start", "restart"):
    _broker_action(_action)


def _metadata(wire: BrokerConnection, topics: list[str] | None):
    request = messages.MetadataRequest(
        topics=None if topics is None else [messages.MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False)
    return wire.request(*METADATA, request)


def describe_cluster(bootstrap: str, topic: str | None = None) -> dict:
    wire = BrokerConnection.from_bootstrap(bootstrap, client_id=CLIENT_ID)
    try:
        metadata = _metadata(wire, [topic] if topic else None)
    finally:
        wire.close()
    partitions = []
    for t in sorted(metadata.topics, key=lambda t: t.name or ""):
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            partitions.append({
                "topic": t.name, "partition": p.partition_index, "leader": p.leader_id,
                "leader_epoch": p.leader_epoch, "replicas": list(p.replica_nodes), "isr": list(p.isr_nodes),
                "offline": list(p.offline_replicas),
                "error": ErrorCode(p.error_code).name if p.error_code else None,
            })
    return {
        "cluster_id": metadata.cluster_id,
        "controller": metadata.controller_id,
        "brokers": [{"id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                    for b in sorted(metadata.brokers, key=lambda b: b.node_id)],
        "partitions": partitions,
        "under_replicated": sum(1 for p in partitions if len(p["isr"]) < len(p["replicas"])),
        "offline": sum(1 for p in partitions if p["leader"] < 0),
    }


def zookeeper_status(connect: str) -> dict:
    """Each ZooKeeper server's answer to ``srvr`` (its mode), or that it is unreachable."""
    import socket

    hosts = connect.split("/", 1)[0].split(",")
    servers = {}
    for host in hosts:
        name, _, port = host.rpartition(":")
        try:
            with socket.create_connection((name, int(port)), timeout=2) as sock:
                sock.sendall(b"srvr")
                reply = b""
                while chunk := sock.recv(4096):
                    reply += chunk
            mode = next((line.split(":", 1)[1].strip() for line in reply.decode().splitlines()
                         if line.startswith("Mode:")), "not serving")
        except OSError as exc:
            mode = f"unreachable ({exc.strerror or exc})"
        servers[host] = mode
    serving = [m for m in servers.values() if m in ("leader", "follower", "standalone")]
    quorum = len(serving) > len(servers) // 2
    return {"servers": servers, "quorum": quorum}


@cluster_group.command("describe")
@click.option("--bootstrap", "--bootstrap-server", "-b", "bootstrap", default=DEFAULT_BOOTSTRAP,
              show_default=True)
@click.option("--topic", default=None, help="Only this topic's partitions.")
@click.option("--zookeeper", default=None, metavar="HOST:PORT[,...][/CHROOT]",
              help="Also report ZooKeeper's health (the cluster's zookeeper.connect).")
@json_option
def describe(bootstrap: str, topic: str | None, zookeeper: str | None, as_json: bool) -> None:
    """Brokers, the controller, and every partition's leader, replicas, ISR and offline replicas."""
    info = describe_cluster(bootstrap, topic)
    if zookeeper is not None:
        info["zookeeper"] = zookeeper_status(zookeeper)
    if as_json:
        emit_json(info)
        return
    click.echo(f"cluster {info['cluster_id']}  controller: broker {info['controller']}  "
               f"under-replicated partitions: {info['under_replicated']}  offline partitions: {info['offline']}")
    if "zookeeper" in info:
        status = info["zookeeper"]
        servers = ", ".join(f"{h} {m}" for h, m in status["servers"].items())
        if status["quorum"]:
            click.echo(f"ZooKeeper: quorum available ({servers})")
        else:
            click.echo(click.style(f"ZooKeeper: NO QUORUM ({servers})", fg="red") + ": brokers keep serving with "
                       "the ISR they have; leader elections, ISR changes and topic changes wait until it is back")
    click.echo("")
    print_table([[b["id"], b["host"], b["port"], b["rack"]] for b in info["brokers"]],
                ["BROKER", "HOST", "PORT", "RACK"])
    click.echo("")
    rows = []
    for p in info["partitions"]:
        isr = ",".join(map(str, p["isr"]))
        rows.append([p["topic"], p["partition"], p["leader"] if p["leader"] >= 0 else "[red]none[/red]",
                     p["leader_epoch"], ",".join(map(str, p["replicas"])),
                     f"[yellow]{isr}[/yellow]" if len(p["isr"]) < len(p["replicas"]) else isr,
                     ",".join(map(str, p["offline"])) or None])
    if rows:
        print_table(rows, ["TOPIC", "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "OFFLINE"])
    else:
        click.echo("partitions: none")


@cluster_group.command("elect-leaders")
@click.option("--bootstrap", "--bootstrap-server", "-b", "bootstrap", default=DEFAULT_BOOTSTRAP,
              show_default=True)
@click.option("--preferred", "election", flag_value="preferred", default=True,
              help="Move leadership back to each partition's preferred (first) replica (default).")
@click.option("--unclean", "election", flag_value="unclean",
              help="Elect a leader outside the ISR for partitions that have none (may lose acknowledged data).")
@click.option("--topic", default=None, help="Only this topic's partitions (default: all).")
@json_option
def elect_leaders(bootstrap: str, election: str, topic: str | None, as_json: bool) -> None:
    """Preferred or unclean leader election, through the controller."""
    info = describe_cluster(bootstrap, topic)
    controller = next((b for b in info["brokers"] if b["id"] == info["controller"]), None)
    if controller is None:
        raise click.ClickException("no controller is registered right now; try again shortly")
    wanted: dict[str, list[int]] = {}
    for p in info["partitions"]:
        wanted.setdefault(p["topic"], []).append(p["partition"])
    request = messages.ElectLeadersRequest(
        election_type=1 if election == "unclean" else 0, timeout_ms=30_000,
        topic_partitions=None if topic is None else [
            messages.ElectLeadersRequest.TopicPartitions(topic=t, partitions=ps) for t, ps in wanted.items()])
    wire = BrokerConnection(controller["host"], controller["port"], client_id=CLIENT_ID)
    try:
        response = wire.request(*ELECT_LEADERS, request)
    finally:
        wire.close()
    if response.error_code:
        raise click.ClickException(f"ElectLeaders: {ErrorCode(response.error_code).name}")
    elected, failed = [], {}
    for result in response.replica_election_results:
        for p in result.partition_result:
            if p.error_code == 0:
                elected.append(f"{result.topic}-{p.partition_id}")
            elif p.error_code != ErrorCode.ELECTION_NOT_NEEDED:
                failed[f"{result.topic}-{p.partition_id}"] = ErrorCode(p.error_code).name
    if as_json:
        emit_json({"elected": elected, "errors": failed})
        return
    for partition in elected:
        click.echo(f"{partition}: new leader elected")
    for partition, error in failed.items():
        click.echo(f"{partition}: {error}")
    click.echo(f"{plural(len(elected), 'partition')} changed leader")


@cluster_group.command("reassign")
@click.option("--bootstrap", "--bootstrap-server", "-b", "bootstrap", default=DEFAULT_BOOTSTRAP,
              show_default=True)
@click.option("--topic", required=True)
@click.option("--partition", "partitions", type=int, multiple=True, required=True, help="Repeatable.")
@click.option("--replicas", default=None, help="Comma-separated broker ids, the first the preferred leader.")
@click.option("--cancel", is_flag=True, help="Cancel the partitions' reassignment in progress instead.")
@json_option
def reassign(bootstrap: str, topic: str, partitions: tuple[int, ...], replicas: str | None, cancel: bool,
             as_json: bool) -> None:
    """Move partitions to new replicas (AlterPartitionReassignments, KIP-455), or cancel a move."""
    if cancel == (replicas is not None):
        raise click.UsageError("give either --replicas or --cancel")
    target = None if cancel else [int(r) for r in replicas.split(",")]
    request = messages.AlterPartitionReassignmentsRequest(timeout_ms=30_000, topics=[
        messages.AlterPartitionReassignmentsRequest.ReassignableTopic(name=topic, partitions=[
            messages.AlterPartitionReassignmentsRequest.ReassignablePartition(partition_index=p, replicas=target)
            for p in partitions])])
    wire = BrokerConnection.from_bootstrap(bootstrap, client_id=CLIENT_ID)
    try:
        response = wire.request(45, 0, request)
    finally:
        wire.close()
    if response.error_code:
        raise click.ClickException(f"AlterPartitionReassignments: {ErrorCode(response.error_code).name}")
    outcomes = {f"{result.name}-{p.partition_index}":
                "accepted" if p.error_code == 0 else f"{ErrorCode(p.error_code).name}: {p.error_message}"
                for result in response.responses for p in result.partitions}
    if as_json:
        emit_json(outcomes)
    else:
        for partition, outcome in outcomes.items():
            click.echo(f"{partition}: {outcome}")
    if any(outcome != "accepted" for outcome in outcomes.values()):
        click.get_current_context().exit(1)  # a partition that does not exist, or a refused move


@cluster_group.command("reassignments")
@click.option("--bootstrap", "--bootstrap-server", "-b", "bootstrap", default=DEFAULT_BOOTSTRAP,
              show_default=True)
@json_option
def reassignments(bootstrap: str, as_json: bool) -> None:
    """Reassignments in progress (ListPartitionReassignments)."""
    wire = BrokerConnection.from_bootstrap(bootstrap, client_id=CLIENT_ID)
    try:
        response = wire.request(46, 0, messages.ListPartitionReassignmentsRequest(timeout_ms=30_000, topics=None))
    finally:
        wire.close()
    moving = [{"topic": t.name, "partition": p.partition_index, "replicas": list(p.replicas),
               "adding": list(p.adding_replicas), "removing": list(p.removing_replicas)}
              for t in response.topics for p in t.partitions]
    if as_json:
        emit_json(moving)
    elif not moving:
        click.echo("none")
    else:
        print_table([[m["topic"], m["partition"], ",".join(map(str, m["replicas"])), ",".join(map(str, m["adding"])),
                      ",".join(map(str, m["removing"]))] for m in moving],
                    ["TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING"])
