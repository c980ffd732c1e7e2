"""The console's share group pages (issue 37) in a real headless Chromium (Debian's chromium and
chromium-driver, driven by selenium) against a real embedded broker: a share group whose id holds a
``/``, one partition all accepted, one with records nobody took yet, and a member still in the group. The
page must show what DescribeShareGroupOffsets answers: start offsets and lags."""

from __future__ import annotations

import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from eoslog.console.app import create_app
from eoslog.console.server import ConsoleServer
from eoslog.console.views import Session
from eoslog.testing.embedded import EmbeddedBroker
from eoslog.testing.wait import wait_until

pytestmark = pytest.mark.interop

GROUP = "queue/workers"  # a '/' in the id: the link carries it as %2F
PROPERTIES = {"group.share.min.heartbeat.interval.ms": "200", "group.share.heartbeat.interval.ms": "500"}


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """Topic jobs: 3 records on partition 0, all accepted; then 4 on partition 1 that nobody took. A member
    of the group stays subscribed (to an empty topic)."""
    with EmbeddedBroker(tmp_path_factory.mktemp("console-share") / "data", properties=PROPERTIES) as broker:
        bootstrap = broker.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for topic in (NewTopic("jobs", 2, 1), NewTopic("idle", 1, 1)):
            admin.create_topics([topic])[topic.topic].result(30)
        resource = ConfigResource(ResourceType.GROUP, GROUP, incremental_configs=[ConfigEntry(
            "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([resource])[resource].result(30)
        producer = Producer({"bootstrap.servers": bootstrap})
        for i in range(3):
            producer.produce("jobs", value=b"job-%d" % i, partition=0)
        assert producer.flush(30) == 0
        worker = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                                "share.acknowledgement.mode": "explicit"})
        worker.subscribe(["jobs"])
        accepted, deadline = 0, time.monotonic() + 30
        while accepted < 3:
            assert time.monotonic() < deadline, accepted
            for message in worker.poll(0.5) or ():
                assert message.error() is None, message.error()
                worker.acknowledge(message, AcknowledgeType.ACCEPT)
                accepted += 1
            worker.commit_sync(10)
        worker.close()
        for i in range(4):
            producer.produce("jobs", value=b"later-%d" % i, partition=1)
        assert producer.flush(30) == 0
        watcher = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "client.id": "watcher"})
        watcher.subscribe(["idle"])
        watcher.poll(1.0)  # joins
        try:
            yield bootstrap
        finally:
            watcher.close()


@pytest.fixture(scope="module")
def console(shared):
    session = Session(shared)
    server = ConsoleServer(create_app(session)).start()
    wait_until(lambda: _get(server.url + "/share-groups")[0] == 200, 10, "the console answers")
    yield server.url
    server.stop()
    session.close()


def cells(driver, selector: str) -> list[str]:
    return driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0])).map(e => e.innerText.trim())", selector)


def test_the_share_group_pages_show_start_offsets_lag_and_members(console, browser):
    from selenium.webdriver.common.by import By

    browser.get(console + "/share-groups")
    assert "Share groups" in cells(browser, "nav a.here")
    browser.find_element(By.LINK_TEXT, GROUP).click()
    wait_until(lambda: browser.current_url.endswith("/share-groups/queue%2Fworkers"), 10, "the group page loads")

    def partitions() -> dict[str, tuple[str, str]]:
        rows = browser.execute_script(
            "return Array.from(document.querySelectorAll('#share-partitions tr[data-partition]')).map("
            "r => [r.dataset.partition, r.querySelector('td.start').innerText, r.querySelector('td.lag').innerText])")
        return {name: (start, lag) for name, start, lag in rows}

    # the watcher's subscription initializes idle-0 a heartbeat after it joined: reload until it is there
    def loaded() -> bool:
        browser.refresh()
        return "idle-0" in partitions()

    wait_until(loaded, 15, "idle-0's share state initialized")
    assert partitions() == {"jobs-0": ("3", "0"), "jobs-1": ("0", "4"), "idle-0": ("0", "0")}
    assert cells(browser, "#total-lag") == ["Total lag 4."]
    [member] = [row for row in cells(browser, "#members tr")[1:]]
    assert "watcher" in member and "idle: 0" in member


def test_an_unknown_share_group_is_a_404(console):
    status, html = _get(console + "/share-groups/nobody")
    assert status == 404 and "no share group nobody" in html
