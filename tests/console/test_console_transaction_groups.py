"""The transaction groups pages in headless Chromium against a real broker. The Spark sink's commit is
driven without Spark (too slow here): confluent-kafka transactional producers write and leave their
transactions open, as the sink's tasks do, and the test sends CommitTransactionGroup itself, as the
sink's driver does (docs/spark.md, "Broker extension: transaction groups")."""

from __future__ import annotations

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from test_console_browser import _get, cells, shot

from eoslog import api
from eoslog.console.app import create_app
from eoslog.console.server import ConsoleServer
from eoslog.console.views import Session
from eoslog.protocol import messages
from eoslog.testing.embedded import EmbeddedBroker
from eoslog.testing.wait import wait_until
from eoslog.tools import txn_cli
from eoslog.tools.brokers import TRANSACTION, Brokers

pytestmark = pytest.mark.interop

GROUP, PREFIX = "eoslog-sink-s1-q1", "eoslog-sink-s1-q1-"
HANGING_AFTER_MS = 1500
COMMIT_TRANSACTION_GROUP = 0x7E00


def open_transaction(bootstrap: str, transactional_id: str, partition: int) -> confluent_kafka.Producer:
    """A task of the sink: writes, flushes and leaves its transaction open for the driver's commit."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                                         "linger.ms": 0})
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce("sink-out", value=f"row of {transactional_id}", partition=partition)
    assert producer.flush(10) == 0
    return producer


def commit(bootstrap: str, sequence: int, transactional_ids: list[str]) -> list[tuple[str, int, int]]:
    """The driver's commit of batch ``sequence``; returns the members' (id, producer id, epoch)."""
    with Brokers(bootstrap) as brokers:
        members = [(d.transactional_id, d.producer_id, d.producer_epoch)
                   for d in txn_cli.describe_transactions(brokers, transactional_ids)]
        M = messages.CommitTransactionGroupRequest
        response = brokers.coordinator(GROUP, TRANSACTION).request(COMMIT_TRANSACTION_GROUP, 0, M(
            group_name=GROUP, sequence=sequence, abort_prefix=PREFIX,
            transactions=[M.GroupMember(transactional_id=t, producer_id=p, producer_epoch=e) for t, p, e in members]))
    assert (response.error_code, response.already_committed, response.last_committed_sequence) == (0, False, sequence)
    return members


@pytest.fixture(scope="module")
def sink(tmp_path_factory):
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("console-groups") / "data") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in admin.create_topics([NewTopic("sink-out", 2, 1)]).values():
            future.result(10)
        yield broker.bootstrap


@pytest.fixture(scope="module")
def console(sink):
    session = Session(sink)
    server = ConsoleServer(create_app(session, hanging_after_ms=HANGING_AFTER_MS)).start()
    wait_until(lambda: _get(server.url + "/")[0] == 200, 10, "the console answers")
    yield server.url
    server.stop()
    session.close()


def row(driver, selector: str) -> dict[str, str]:
    """The cells of one table row by class name."""
    return driver.execute_script(
        "const r = document.querySelector(arguments[0]); if (!r) return null;"
        "return Object.fromEntries(Array.from(r.querySelectorAll('td[class]'))"
        ".map(c => [c.className, c.innerText.trim()]))", selector)


def test_the_pages_follow_a_query_through_its_batches(sink, console, browser) -> None:
    browser.get(console + "/transaction-groups")
    assert cells(browser, "#transaction-groups td") == ["no transaction groups"]

    # batch 0: two tasks write, the driver commits them as one group
    tasks = [open_transaction(sink, f"{PREFIX}0-{p}", p) for p in range(2)]
    members = commit(sink, 0, [f"{PREFIX}0-{p}" for p in range(2)])
    # batch 1: one task has written and waits for the next commit
    waiting = open_transaction(sink, f"{PREFIX}1-0", 0)

    browser.get(console + "/transaction-groups")
    listed = row(browser, f'#transaction-groups tr[data-group="{GROUP}"]')
    assert (listed["state"], listed["sequence"], listed["members"], listed["open"]) == ("CompleteCommit", "0", "2", "1")
    assert listed["status"].startswith("writing the next batch")
    browser.get(console + f"/transaction-groups/{GROUP}")
    assert cells(browser, "#group td.state") == ["CompleteCommit"]
    assert cells(browser, "#group td.sequence") == ["0"]
    assert {t: (c["producer"], c["state"]) for t in (m[0] for m in members)
            for c in [row(browser, f'#members tr[data-transactional-id="{t}"]')]} == {
        t: (f"{p} / {e}", "CompleteCommit") for t, p, e in members}
    waiting_row = row(browser, f'#open tr[data-transactional-id="{PREFIX}1-0"]')
    assert waiting_row["duration"].endswith(" s") and "sink-out-0" in browser.find_element(
        "css selector", "#open").text
    shot(browser, "transaction-group")

    # the open task outlives the hanging threshold: the group is flagged as stuck on both pages
    browser.get(console + "/transaction-groups")
    wait_until(lambda: browser.find_elements("css selector", f'#transaction-groups tr.hanging[data-group="{GROUP}"]')
               or browser.refresh(), 10, "the group is flagged once its open transaction hangs")
    assert "open longer than the hanging threshold" in row(
        browser, f'#transaction-groups tr[data-group="{GROUP}"]')["status"]
    shot(browser, "transaction-groups")

    # the driver commits batch 1: the open group page follows without a reload (it polls), showing
    # batch 1 committed, its member, and nothing open
    browser.get(console + f"/transaction-groups/{GROUP}")
    assert cells(browser, "#group td.sequence") == ["0"] and cells(browser, "#open tr.hanging td.duration")
    browser.execute_script("window.notReloaded = true")
    [(_, producer_id, epoch)] = commit(sink, 1, [f"{PREFIX}1-0"])
    wait_until(lambda: cells(browser, "#group td.sequence") == ["1"], 10, "the page shows batch 1 committed")
    assert browser.execute_script("return window.notReloaded") is True
    assert cells(browser, "#members td.producer") == [f"{producer_id} / {epoch}"]
    assert cells(browser, "#members td.state") == ["CompleteCommit"]
    assert cells(browser, "#open td") == ["none"]
    assert cells(browser, "#status")[0].startswith("idle: batch 1 committed")
    browser.get(console + "/transaction-groups")
    assert browser.find_elements("css selector", "#transaction-groups tr.hanging") == []
    assert row(browser, f'#transaction-groups tr[data-group="{GROUP}"]')["sequence"] == "1"
    for producer in [*tasks, waiting]:
        producer.flush(1)


def test_an_unknown_group_is_a_note_not_an_error(console, browser) -> None:
    browser.get(console + "/transaction-groups/no-such-group")
    assert "No transaction group no-such-group" in cells(browser, "#absent")[0]


def test_a_broker_without_the_extension_says_so(console, browser, monkeypatch) -> None:
    # The broker runs in this process: make its ApiVersions answer as a broker without eoslog's private APIs
    kafkas = api.supported_versions
    monkeypatch.setattr(api, "supported_versions", lambda: {k: v for k, v in kafkas().items() if k < 0x7E00})
    for path in ("/transaction-groups", f"/transaction-groups/{GROUP}"):
        status, body = _get(console + path)
        assert status == 200 and 'id="unsupported"' in body and "does not support" in body
    monkeypatch.undo()
    assert 'id="unsupported"' not in _get(console + "/transaction-groups")[1]
