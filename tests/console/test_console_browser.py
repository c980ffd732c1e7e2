"""The web console in a real headless Chromium (Debian's chromium and chromium-driver, driven by
selenium) against a real broker: a transactional workload with a committed and an aborted transaction,
a transaction left open, and a consumer group that commits and stops while more records arrive.

Screenshots of each page go to $EOSLOG_CONSOLE_SCREENSHOTS when it is set (docs/img for docs/console.md).
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.console.app import create_app
from eoslog.console.server import ConsoleServer
from eoslog.console.views import Session
from eoslog.testing.embedded import EmbeddedBroker
from eoslog.testing.wait import wait_until
from eoslog.tools import txn_cli
from eoslog.tools.brokers import Brokers

pytestmark = pytest.mark.interop

HANGING_AFTER_MS = 300
SCREENSHOTS = os.environ.get("EOSLOG_CONSOLE_SCREENSHOTS")


def transactional_producer(bootstrap: str, transactional_id: str) -> confluent_kafka.Producer:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                                         "transaction.timeout.ms": 60_000, "linger.ms": 0})
    producer.init_transactions(10)
    return producer


@pytest.fixture(scope="module")
def workload(tmp_path_factory):
    """orders: 3 committed records, 3 aborted ones, then plain ones; ledger: one transaction left open;
    group billing has committed its position in orders and stopped."""
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("console") / "data") as broker:
        bootstrap = broker.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topics = [NewTopic("orders", 1, 1), NewTopic("ledger", 1, 1), NewTopic("scratch", 1, 1)]
        for future in admin.create_topics(topics).values():
            future.result(10)
        committer = transactional_producer(bootstrap, "committer")
        committer.begin_transaction()
        for i in range(3):
            committer.produce("orders", key=f"k{i}", value=f"committed-{i}", headers=[("source", b"test")])
        committer.commit_transaction(10)
        committer.begin_transaction()
        for i in range(3):
            committer.produce("orders", key=f"k{i}", value=f"aborted-{i}")
        committer.flush(10)
        committer.abort_transaction(10)
        stuck = transactional_producer(bootstrap, "stuck")
        stuck.begin_transaction()
        stuck.produce("ledger", key="x", value="open-0")
        stuck.flush(10)

        consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "billing",
                                             "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                                             "enable.auto.commit": False})
        consumer.subscribe(["orders"])
        seen = []
        wait_until(lambda: (m := consumer.poll(0.2)) is not None and not m.error() and seen.append(m.value())
                   or len(seen) == 3, 15, "billing reads the committed records")
        consumer.commit(asynchronous=False)
        consumer.close()
        yield bootstrap, stuck


@pytest.fixture(scope="module")
def console(workload):
    bootstrap, _ = workload
    session = Session(bootstrap)
    server = ConsoleServer(create_app(session, allow_writes=True, hanging_after_ms=HANGING_AFTER_MS)).start()
    wait_until(lambda: _get(server.url + "/")[0] == 200, 10, "the console answers")
    yield server.url
    server.stop()
    session.close()


def _get(url: str, data: bytes | None = None) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, data=data, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def shot(driver, name: str) -> None:
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        # the whole page, not the viewport (Chrome DevTools' capture beyond the viewport)
        size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": 1280, "height": min(size["height"], 1600), "scale": 1}
        data = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                                                                 "clip": clip})["data"]
        (Path(SCREENSHOTS) / f"console-{name}.png").write_bytes(base64.b64decode(data))


def cells(driver, selector: str) -> list[str]:
    """The text of every match, read in one script so that an htmx swap cannot come in between."""
    return driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0])).map(e => e.innerText.trim())", selector)


def test_overview_and_topic_pages(workload, console, browser) -> None:
    from selenium.webdriver.common.by import By

    bootstrap, _ = workload
    browser.get(console + "/")
    assert len(cells(browser, "#brokers tr")) == 2  # the header and the one broker
    # the throughput sparkline samples the high watermarks while the page is open
    wait_until(lambda: cells(browser, "#rate") == ["0"], 10, "the overview measures a first rate")
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(20):
        producer.produce("scratch", value=f"r{i}")
    producer.flush(10)
    wait_until(lambda: cells(browser, "#rate") not in ([], ["0"], ["-"]), 10, "the overview shows records/s")
    assert len(browser.execute_script(
        "return document.querySelector('#throughput-chart polyline').getAttribute('points')").split()) >= 2
    shot(browser, "overview")
    browser.get(console + "/topics")
    assert {"orders", "ledger"} <= {t.split(" ")[0] for t in cells(browser, "#topics td:first-child")}
    shot(browser, "topics")
    browser.get(console + "/topics/ledger")
    # the open transaction pins the last stable offset below the high watermark
    [lso], [hw] = cells(browser, "#partitions td.lso"), cells(browser, "#partitions td.hw")
    assert int(lso) == 0 and int(hw) == 1
    shot(browser, "topic")
    browser.find_element(By.LINK_TEXT, "producers").click()
    wait_until(lambda: browser.current_url.endswith("/producers"), 5, "the producers page loads")
    assert cells(browser, "#producers td.txn-start") == ["0"]  # stuck's transaction opened at offset 0
    shot(browser, "producers")


def test_records_of_aborted_transactions_are_marked(console, browser) -> None:
    from selenium.webdriver.common.by import By

    browser.get(console + "/topics/orders/partitions/0/records?isolation=read_uncommitted")
    rows = {r.find_element(By.CSS_SELECTOR, "td.value").text: r.get_attribute("data-status")
            for r in browser.find_elements(By.CSS_SELECTOR, "#records tr[data-status]")
            if r.get_attribute("data-status") != "marker"}
    assert rows == {"committed-0": "committed", "committed-1": "committed", "committed-2": "committed",
                    "aborted-0": "aborted", "aborted-1": "aborted", "aborted-2": "aborted"}
    assert cells(browser, "#records tr.aborted td.status") == ["aborted"] * 3
    assert [c for c in cells(browser, "#records td.marker")] == ["COMMIT marker", "ABORT marker"]
    shot(browser, "records")
    browser.find_element(By.ID, "toggle").click()
    wait_until(lambda: "isolation=read_committed" in browser.current_url, 5, "the toggle loads read_committed")
    assert cells(browser, "#records td.value") == ["committed-0", "committed-1", "committed-2"]


def test_lag_grows_live_on_the_group_page(workload, console, browser) -> None:
    bootstrap, _ = workload
    browser.get(console + "/groups")
    assert "billing" in cells(browser, "#groups td:first-child")
    browser.get(console + "/groups/billing")
    # committed after the third record: the lag counts the aborted transaction's offsets still ahead
    [before] = cells(browser, "#total-lag")
    assert int(before) == 5
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for i in range(5):
        producer.produce("orders", value=f"later-{i}")
    producer.flush(10)
    # no reload: the lag table polls (htmx) and shows the new records as lag
    wait_until(lambda: cells(browser, "#total-lag") == ["10"], 10, "the group page shows the lag grown by 5")
    assert cells(browser, "#partitions td.lag") == ["10"]
    # and the lag chart rose: its last point is higher (a smaller y) than its first
    points = browser.execute_script("return document.querySelector('#lag-chart polyline').getAttribute('points')")
    ys = [float(p.split(",")[1]) for p in points.split()]
    assert len(ys) >= 2 and ys[-1] < ys[0]
    shot(browser, "group")


def test_a_hanging_transaction_is_aborted_through_the_page(workload, console, browser) -> None:
    from selenium.webdriver.common.by import By

    bootstrap, stuck = workload
    browser.get(console + "/transactions")
    wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, "#transactions tr.hanging[data-transactional-id=stuck]")
               or browser.refresh(), 10, "the open transaction of stuck is listed as hanging")
    row = browser.find_element(By.CSS_SELECTOR, "#transactions tr[data-transactional-id=stuck]")
    assert row.find_element(By.CSS_SELECTOR, "td.state").text == "Ongoing"
    epoch = int(row.find_element(By.CSS_SELECTOR, "td.producer").text.split("/")[1])
    assert "ledger-0" in row.text
    assert cells(browser, "#hanging tr.hanging td:first-child") == ["ledger-0"]
    shot(browser, "transactions")
    row.find_element(By.CSS_SELECTOR, "form.abort button").click()
    alert = browser.switch_to.alert
    assert "stuck" in alert.text
    alert.accept()
    wait_until(lambda: browser.find_elements(By.ID, "notice"), 10, "the page confirms the abort started")

    # The broker confirms: the transaction is no longer open at its coordinator and the producer's epoch
    # was bumped (fenced); a broker may hand the fencing request the next epoch at once (state Empty,
    # as Kafka does on the client's retry) or leave CompleteAbort.
    def aborted():
        with Brokers(bootstrap) as brokers:
            [described] = txn_cli.describe_transactions(brokers, ["stuck"])
            ongoing = [t.transactional_id for t in txn_cli.list_transactions(brokers, ["Ongoing"])]
        return (described.transaction_state in ("CompleteAbort", "Empty") and not described.topics
                and described.producer_epoch > epoch and "stuck" not in ongoing)
    wait_until(aborted, 15, "DescribeTransactions and ListTransactions no longer have stuck open")
    with pytest.raises(confluent_kafka.KafkaException):
        stuck.commit_transaction(10)  # its producer was fenced
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "checker",
                                         "isolation.level": "read_committed", "enable.auto.commit": False})
    _, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition("ledger", 0), 10)
    consumer.assign([confluent_kafka.TopicPartition("ledger", 0, 0)])
    seen = []
    wait_until(lambda: (m := consumer.poll(0.2)) is not None and not m.error() and seen.append(m.value()) or
               consumer.position([confluent_kafka.TopicPartition("ledger", 0)])[0].offset >= high, 10,
               "a read_committed consumer reaches the end of ledger")
    consumer.close()
    assert seen == [] and high == 2  # the open record and its ABORT marker
    browser.get(console + "/transactions")
    assert cells(browser, "#hanging tr.hanging") == []
    assert browser.find_element(By.CSS_SELECTOR, "#transactions tr[data-transactional-id=stuck] td.state").text \
        in ("CompleteAbort", "Empty")
    # and the record browser shows the open record as aborted, followed by its ABORT marker
    browser.get(console + "/topics/ledger/partitions/0/records")
    assert cells(browser, "#records tr.aborted td.value") == ["open-0"]
    assert cells(browser, "#records td.marker") == ["ABORT marker"]
    shot(browser, "transactions-after-abort")


def test_the_console_command_is_read_only_without_allow_writes(workload, tmp_path) -> None:
    bootstrap, _ = workload
    port_file = tmp_path / "port"
    process = subprocess.Popen([sys.executable, "-m", "eoslog", "console", "--bootstrap", bootstrap,
                                "--listen", "127.0.0.1:0", "--port-file", str(port_file)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: port_file.exists() and port_file.read_text().strip(), 15, "the console binds")
        url = f"http://127.0.0.1:{port_file.read_text().strip()}"
        status, body = wait_until(lambda: (r := _get(url + "/transactions"))[0] and r, 10, "the console answers")
        assert status == 200 and "stuck" in body and "form" not in body.split("<main>")[1].split("<h2>")[0]
        status, body = _get(url + "/transactions/abort", data=b"transactional_id=committer")
        assert status == 403 and "--allow-writes" in body
        with Brokers(bootstrap) as brokers:
            [described] = txn_cli.describe_transactions(brokers, ["committer"])
        assert described.transaction_state == "CompleteAbort" and described.producer_epoch >= 0
    finally:
        process.terminate()
        process.wait(10)


def test_the_record_browser_pages_and_seeks_by_timestamp(console) -> None:
    base = console + "/topics/orders/partitions/0/records"
    status, body = _get(base + "?offset=0&limit=2&isolation=read_uncommitted")
    assert status == 200 and body.count('data-offset="') == 2
    assert 'id="next" href="/topics/orders/partitions/0/records?offset=2&' in body
    status, body = _get(base + "?offset=4&limit=2")  # inside the aborted transaction, found from the Fetch
    assert status == 200 and body.count('data-status="aborted"') == 2
    status, body = _get(base + "?timestamp=0")
    assert status == 200 and "Showing from offset 0," in body
    status, body = _get(base + "?timestamp=4102444800000")  # 2100: past every record
    assert status == 200 and "no records from offset" in body and 'id="next"' not in body
    status, body = _get(base + "?timestamp=yesterday")
    assert status == 400 and "timestamp" in body
