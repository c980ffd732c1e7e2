"""The console on a 3-broker cluster: each request goes where Kafka serves it (a partition's offsets and
producers to its leader, a group to its coordinator, transaction listings to every broker), so the pages
show every broker's share."""

from __future__ import annotations

import re
import urllib.request

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.console.app import create_app
from eoslog.console.server import ConsoleServer
from eoslog.console.views import Session
from eoslog.protocol import messages
from eoslog.spark.task_writer import colocated_transactional_id
from eoslog.tools import txn_cli
from eoslog.tools.brokers import TRANSACTION, Brokers

pytestmark = pytest.mark.interop


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as response:
        assert response.status == 200
        return response.read().decode()


def test_pages_gather_every_brokers_share(eoslog_cluster):
    bootstrap = eoslog_cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic("spread", 6, 3), NewTopic("grouped", 1, 3)]).values():
        future.result(30)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": "spread-tx"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for p in range(6):
        producer.produce("spread", value=f"v{p}", partition=p)
    producer.commit_transaction(30)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "spread-group"})
    consumer.commit(offsets=[confluent_kafka.TopicPartition("spread", p, 0) for p in range(6)], asynchronous=False)
    consumer.close()

    groups = commit_groups_at_every_coordinator(bootstrap)

    session = Session(bootstrap)
    server = ConsoleServer(create_app(session)).start()
    try:
        overview = get(server.url + "/")
        assert len(re.findall(r"<tr><td>\d+</td><td>127\.0\.0\.1</td>", overview)) == 3
        topic = get(server.url + "/topics/spread")
        # every partition's high watermark comes from its own leader: one record and the COMMIT marker
        assert re.findall(r'<td class="hw">(\d+)</td>', topic) == ["2"] * 6
        assert len(set(re.findall(r'data-partition="\d+" class="">\s*<td>\d+</td><td>(\d+)</td>', topic))) > 1
        group = get(server.url + "/groups/spread-group")
        assert re.findall(r'<td class="lag [^"]*">(\d+)</td>', group) == ["2"] * 6
        transactions = get(server.url + "/transactions")
        assert 'data-transactional-id="spread-tx"' in transactions and "CompleteCommit" in transactions
        # each broker lists the transaction groups it coordinates
        listing = get(server.url + "/transaction-groups")
        assert re.findall(r'<tr data-group="([^"]+)"', listing) == sorted(groups)
        for group, member in groups.items():
            page = get(server.url + f"/transaction-groups/{group}")
            assert re.findall(r'<tr data-transactional-id="([^"]+)">', page) == [member]
            assert '<td class="state">CompleteCommit</td>' in page.split('id="members"')[1]
    finally:
        server.stop()
        session.close()


def commit_groups_at_every_coordinator(bootstrap: str) -> dict[str, str]:
    """A transaction group coordinated by each broker, committed with one member (colocated with it, as
    the Spark sink makes them): group name -> member's transactional id."""
    by_node: dict[int, str] = {}
    with Brokers(bootstrap) as brokers:
        for k in range(200):
            found = brokers.call(10, 3, messages.FindCoordinatorRequest(key=f"console-txg-{k}", key_type=TRANSACTION))
            if found.error_code == 0:
                by_node.setdefault(found.node_id, f"console-txg-{k}")
            if len(by_node) == 3:
                break
        assert len(by_node) == 3, by_node
        [state_topic] = [t for t in brokers.metadata(["__transaction_state"]).topics]
        groups = {g: colocated_transactional_id(f"{g}-0-0", g, len(state_topic.partitions)) for g in by_node.values()}
        for group, member in groups.items():
            producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": member})
            producer.init_transactions(30)
            producer.begin_transaction()
            producer.produce("grouped", value=b"grouped")
            assert producer.flush(30) == 0
            [d] = txn_cli.describe_transactions(brokers, [member])
            M = messages.CommitTransactionGroupRequest
            response = brokers.coordinator(group, TRANSACTION).request(0x7E00, 0, M(
                group_name=group, sequence=0, abort_prefix=None, transactions=[M.GroupMember(
                    transactional_id=member, producer_id=d.producer_id, producer_epoch=d.producer_epoch)]))
            assert response.error_code == 0, response
    return groups
