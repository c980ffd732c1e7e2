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

pytestmark = pytest.mark.interop


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as response:
        assert response.status == 200
        return response.read().decode()


def test_pages_gather_every_brokers_share(eoslog_cluster):
    bootstrap = eoslog_cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("spread", 6, 3)])["spread"].result(30)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": "spread-tx"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for p in range(6):
        producer.produce("spread", value=f"v{p}", partition=p)
    producer.commit_transaction(30)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "spread-group"})
    consumer.commit(offsets=[confluent_kafka.TopicPartition("spread", p, 0) for p in range(6)], asynchronous=False)
    consumer.close()

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
    finally:
        server.stop()
        session.close()
