"""``eoslog verify``: a fault-injecting exactly-once verification run (see run.py and
docs/reliability.md, "Verify runs"). Exits 1 when the checker finds an anomaly or the run could not
heal its faults, 0 when the history is valid. ``eoslog verify cleanup`` removes the network namespaces
(and what runs in them) that a crashed ``--net namespaces`` run left behind, and the LazyFS mounts of a
crashed power-loss run (docs/verification.md)."""

from __future__ import annotations

from pathlib import Path

import click

from eoslog.verify.cluster_faults import CLUSTER_BITFLIP_KINDS, CLUSTER_KINDS, CLUSTER_POWER_KINDS
from eoslog.verify.faults import SINGLE_BROKER_KINDS
from eoslog.verify.net_faults import NEEDS_ZOOKEEPER_ENSEMBLE, NET_KINDS


def _kinds(value: str | None, known: tuple[str, ...]) -> tuple[str, ...] | None:
    if value is None:
        return None
    kinds = tuple(kind.strip() for kind in value.split(",") if kind.strip())
    if kinds == ("none",):
        return ()
    unknown = [kind for kind in kinds if kind not in known]
    if unknown:
        raise click.BadParameter(f"unknown fault kind(s) {', '.join(unknown)}; known: {', '.join(known)}",
                                 param_hint="--faults")
    return kinds


@click.command()
@click.argument("action", required=False, type=click.Choice(["cleanup"]))
@click.option("--force", is_flag=True, help="With cleanup: also the namespaces and LazyFS mounts of runs still alive.")
@click.option("--duration", type=click.FloatRange(min=1.0), default=60.0, show_default=True,
              help="Seconds of workload under faults (healing and the final read come after).")
@click.option("--bootstrap", default=None, metavar="HOST:PORT",
              help="Test this running broker instead of starting one; only client-side faults apply.")
@click.option("--seed", type=int, default=None, help="Seed for the workload and the fault schedule.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the history, report and plot go (default: a new temporary directory).")
@click.option("--workers", type=click.IntRange(1, 16), default=3, show_default=True,
              help="Transactional client processes.")
@click.option("--partitions", type=click.IntRange(1, 64), default=4, show_default=True,
              help="Partitions of the test topic (each one is a key).")
@click.option("--faults", default=None, metavar="KIND,...",
              help=f"Fault kinds to inject (default: all that apply; 'none' for a run without faults): "
                   f"{', '.join(SINGLE_BROKER_KINDS)} (proxy-replay by default only with "
                   f"--transaction-version 2; power-loss only when named: the broker's data directory is "
                   f"then on LazyFS, a FUSE filesystem; bitflip only when named); with --cluster: {', '.join(CLUSTER_KINDS)}, and when named "
                   f"{', '.join(CLUSTER_POWER_KINDS)} (each broker's data directory on LazyFS) and "
                   f"{', '.join(CLUSTER_BITFLIP_KINDS)}; with --net "
                   f"namespaces: {', '.join(NET_KINDS)}, and when named the power-loss kinds and bitflip.")
@click.option("--cluster", type=click.IntRange(0, 9), default=0, show_default=True, metavar="N",
              help="Start a cluster of N brokers on a local ZooKeeper (Debian's server), each behind a "
                   "fault proxy, instead of one broker; faults then aim at leaders and coordinators.")
@click.option("--net", type=click.Choice(["loopback", "namespaces"]), default="loopback", show_default=True,
              help="With --cluster, namespaces: ZooKeeper, each broker and the clients in network namespaces the run "
                   "creates (root, iproute2 and nftables), links cut by dropping packets; loopback: fault proxies.")
@click.option("--zookeeper-nodes", type=click.Choice(["1", "3"]), default=None,
              help="ZooKeeper nodes of the --cluster run [default: 3 with --net namespaces, where "
                   "isolate-zookeeper needs an ensemble; 1 otherwise].")
@click.option("--abort-rate", type=click.FloatRange(0.0, 1.0), default=0.15, show_default=True,
              help="Share of transactions the clients abort on purpose.")
@click.option("--broker-set", "broker_set", multiple=True, metavar="NAME=VALUE",
              help="A property for the broker the verifier starts (repeatable).")
@click.option("--transaction-version", type=click.IntRange(1, 2), default=1, show_default=True,
              help="2: the clients are eoslog's KIP-890 part 2 producers (EndTxn v5, partitions added by "
                   "Produce v12) instead of confluent-kafka (version 1); one broker only.")
@click.option("--client", type=click.Choice(["confluent-kafka", "eoslog"]), default="confluent-kafka",
              show_default=True,
              help="The version 1 clients: confluent-kafka, or eoslog's raw version 1 producer, which gives up on "
                   "a request and goes on in the same epoch (the known-bug check, with --faults "
                   "proxy-replay-endtxn); one broker only.")
@click.option("--workload", type=click.Choice(["txn", "queue"]), default="txn", show_default=True,
              help="queue: producers and share consumers (share groups, KIP-932), checked for lost, twice "
                   "accepted and over-delivered records (docs/verification.md, \"The queue workload\").")
@click.option("--transactional-consumers", type=click.FloatRange(0.0, 1.0), default=0.5, show_default=True,
              help="With --workload queue: the share of the consumers that are transactional workers (an output "
                   "and the ACCEPTs in one transaction; --abort-rate of them aborted on purpose).")
@click.option("--quiet", is_flag=True, help="Print only the report.")
def verify_command(action, force, duration, bootstrap, seed, out, workers, partitions, faults, cluster, net,
                   zookeeper_nodes, abort_rate, broker_set, transaction_version, client, workload,
                   transactional_consumers, quiet):
    """Run transactional clients against a broker while injecting faults (broker SIGKILL and SIGSTOP,
    client crashes, dropped responses, cut connections, packet loss between namespaces), then check the
    history for exactly-once anomalies. Exits non-zero when any is found. `eoslog verify cleanup`
    removes what a crashed --net namespaces or power-loss run left behind."""
    if action == "cleanup":
        from eoslog.faults import lazyfs
        from eoslog.faults.netns import cleanup

        removed = cleanup(force=force)
        click.echo(f"removed {len(removed)} network namespace(s)" + "".join(f"\n  {n}" for n in removed))
        unmounted = lazyfs.cleanup(force=force)
        click.echo(f"removed {len(unmounted)} LazyFS mount(s)" + "".join(f"\n  {m}" for m in unmounted))
        return
    from eoslog.verify.run import VerifyOptions, run_verify

    if workload == "queue" and (bootstrap is not None or net != "loopback" or transaction_version != 1):
        raise click.UsageError("--workload queue starts its own broker or --cluster on loopback")
    if cluster and bootstrap is not None:
        raise click.BadParameter("--cluster starts its own brokers; it cannot be combined with --bootstrap",
                                 param_hint="--cluster")
    if client == "eoslog" and (cluster or transaction_version != 1):
        raise click.BadParameter("the raw version 1 clients speak version 1 to one broker", param_hint="--client")
    if cluster and transaction_version == 2:
        raise click.BadParameter("the transaction version 2 clients speak to one broker; not with --cluster",
                                 param_hint="--transaction-version")
    zookeeper_nodes = int(zookeeper_nodes) if zookeeper_nodes is not None else 3 if net == "namespaces" else 1
    if net == "namespaces":
        if not cluster:
            raise click.BadParameter("network namespaces are for --cluster runs", param_hint="--net")
        from eoslog.faults.netns import unavailable_reason

        reason = unavailable_reason()
        if reason is not None:
            raise click.UsageError(f"--net namespaces: {reason}")
    faults = _kinds(faults, NET_KINDS + CLUSTER_POWER_KINDS + CLUSTER_BITFLIP_KINDS if net == "namespaces"
                    else CLUSTER_KINDS + CLUSTER_POWER_KINDS + CLUSTER_BITFLIP_KINDS if cluster
                    else SINGLE_BROKER_KINDS)
    if workload == "queue" and faults and set(faults) & {"power-loss", "power-loss-all", "bitflip", "proxy-replay"}:
        raise click.BadParameter("the queue workload runs the kinds injected by default", param_hint="--faults")
    if faults and set(faults) & {"power-loss", "power-loss-all"}:
        from eoslog.faults.lazyfs import unavailable_reason as lazyfs_unavailable

        reason = lazyfs_unavailable()
        if reason is not None:
            raise click.UsageError(f"power-loss: {reason}")
    if faults and zookeeper_nodes == 1 and set(faults) & set(NEEDS_ZOOKEEPER_ENSEMBLE):
        raise click.BadParameter("isolate-zookeeper needs --zookeeper-nodes 3", param_hint="--faults")

    properties = {}
    for item in broker_set:
        name, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"expected NAME=VALUE, got {item!r}", param_hint="--broker-set")
        properties[name.strip()] = value.strip()
    if bootstrap is not None and properties:
        raise click.BadParameter("--broker-set applies only to the broker the verifier starts",
                                 param_hint="--broker-set")
    options = VerifyOptions(duration=duration, bootstrap=bootstrap, seed=seed, out=out, workers=workers,
                            partitions=partitions, abort_rate=abort_rate, faults=faults,
                            broker_properties=properties, cluster=cluster, transaction_version=transaction_version, client=client,
                            net=net, zookeeper_nodes=zookeeper_nodes)
    log = None if quiet else (lambda message: click.echo(message, err=True))
    if workload == "queue":
        from eoslog.verify.queue_run import run_queue_verify

        result = run_queue_verify(options, log=log, transactional_consumers=transactional_consumers)
    else:
        result = run_verify(options, log=log)
    click.echo(result.render_text())
    click.echo(f"output: {result.out} (history.jsonl, report.txt, summary.json"
               + (", plot.png" if result.plot_path else "") + ")")
    raise SystemExit(0 if result.valid else 1)
