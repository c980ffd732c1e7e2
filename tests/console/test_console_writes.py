"""The console's write actions and per-partition lag charts in headless Chromium against a real broker,
with a group whose id needs every kind of escaping in a URL; and the console served by `eoslog serve
--console-listen` itself.

Screenshots go to $EOSLOG_CONSOLE_SCREENSHOTS when it is set (docs/img for docs/console.md).
"""

from __future__ import annotations

import subprocess
import sys
import urllib.parse

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from test_console_browser import _get, cells, shot

from eoslog.console.app import create_app
from eoslog.console.server import ConsoleServer
from eoslog.console.views import Session
from eoslog.server.config import ConfigError
from eoslog.server.console import console_listener
from eoslog.server.listeners import parse_listeners
from eoslog.testing.embedded import EmbeddedBroker
from eoslog.testing.process import BrokerProcess, free_port
from eoslog.testing.wait import wait_until
from eoslog.tools import groups_cli
from eoslog.tools.brokers import Brokers

pytestmark = pytest.mark.interop

GROUP = "a/b c?#%é"  # a path separator, a query, a fragment, a percent sign, a space and unicode
GROUP_PATH = "/groups/a%2Fb%20c%3F%23%25%C3%A9"


def produce(bootstrap: str, topic: str, partition: int, count: int, prefix: str = "r") -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, value=f"{prefix}-{i}", partition=partition)
    producer.flush(10)


def commit(bootstrap: str, group_id: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commits from outside the group (no member), as a consumer that stopped leaves its offsets."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group_id})
    consumer.commit(offsets=[confluent_kafka.TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                    asynchronous=False)
    consumer.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """events: 2 partitions of 5 records, GROUP committed at their ends (no lag); purge: 10 records."""
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("console-writes") / "data") as broker:
        bootstrap = broker.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic("events", 2, 1), NewTopic("purge", 1, 1)]).values():
            future.result(10)
        for partition in (0, 1):
            produce(bootstrap, "events", partition, 5)
        produce(bootstrap, "purge", 0, 10, "purge")
        commit(bootstrap, GROUP, {("events", 0): 5, ("events", 1): 5})
        yield bootstrap


@pytest.fixture(scope="module")
def console(cluster):
    session = Session(cluster)
    server = ConsoleServer(create_app(session, allow_writes=True)).start()
    wait_until(lambda: _get(server.url + "/")[0] == 200, 10, "the console answers")
    yield server.url
    server.stop()
    session.close()


def chart_ys(driver) -> dict[str, list[float]]:
    """Each partition row's chart as its y values (a smaller y is a larger lag), read in one script."""
    rows = driver.execute_script(
        "return Array.from(document.querySelectorAll('#partitions tr[data-tp]')).map(r => "
        "[r.dataset.tp, r.querySelector('svg.partition-lag polyline').getAttribute('points')])")
    return {tp: [float(p.split(",")[1]) for p in points.split()] for tp, points in rows}


def test_a_group_id_with_special_characters_and_its_per_partition_lag_charts(cluster, console, browser) -> None:
    from selenium.webdriver.common.by import By

    browser.get(console + "/groups")
    browser.find_element(By.LINK_TEXT, GROUP).click()
    wait_until(lambda: browser.current_url.endswith(GROUP_PATH), 5, "the group's link is followed")
    assert browser.find_element(By.TAG_NAME, "h1").text == f"Group {GROUP}"
    assert cells(browser, "#partitions td.lag") == ["0", "0"]
    # Only events-0 gets new records: the polled fragment (its URL carries the id too) shows the lag
    # and that partition's chart rises while the other's stays flat.
    wait_until(lambda: all(len(ys) >= 2 for ys in chart_ys(browser).values()), 10, "both charts have points")
    produce(cluster, "events", 0, 4, "later")
    wait_until(lambda: cells(browser, "#total-lag") == ["4"], 10, "the lag of events-0 grows by 4")
    wait_until(lambda: (ys := chart_ys(browser))["events-0"][-1] < ys["events-0"][0], 10,
               "the chart of events-0 rises")
    ys = chart_ys(browser)
    assert len(set(ys["events-1"])) == 1, ys  # flat
    assert cells(browser, "#partitions td.lag") == ["4", "0"]
    shot(browser, "group-partition-lag")
    status, _ = _get(console + "/groups/a/b%20c")  # an unescaped '/' is not a group's path
    assert status == 404


def test_resetting_a_stopped_group_to_earliest_makes_its_lag_the_whole_partition(cluster, console, browser) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.select import Select

    browser.get(console + GROUP_PATH)
    form = browser.find_element(By.ID, "reset-offsets")
    Select(form.find_element(By.NAME, "to")).select_by_value("earliest")  # topic: every topic with offsets
    form.find_element(By.TAG_NAME, "button").click()
    alert = browser.switch_to.alert
    assert GROUP in alert.text
    alert.accept()
    wait_until(lambda: browser.find_elements(By.ID, "notice"), 10, "the page shows the outcome")
    assert urllib.parse.urlsplit(browser.current_url).path == GROUP_PATH
    assert "events-0 5 → 0" in browser.find_element(By.ID, "notice").text
    # every record of each partition is lag again: 9 and 5 records from the log start
    assert cells(browser, "#partitions td.lag") == ["9", "5"] and cells(browser, "#total-lag") == ["14"]
    with Brokers(cluster) as brokers:
        view = groups_cli.describe_group(brokers, GROUP)
    assert [(p.partition, p.committed_offset) for p in view.partitions] == [(0, 0), (1, 0)]
    shot(browser, "group-reset")


def test_a_group_with_members_keeps_its_offsets(cluster, console) -> None:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster, "group.id": "live",
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["purge"])
    try:
        wait_until(lambda: consumer.poll(0.2) is not None and consumer.assignment(), 15, "live has a member")
        consumer.commit(offsets=[confluent_kafka.TopicPartition("purge", 0, 1)], asynchronous=False)
        data = urllib.parse.urlencode({"topic": "purge", "to": "offset", "value": "3"}).encode()
        status, body = _get(console + "/groups/live/reset-offsets", data=data)  # the redirect is followed
        assert status == 200 and 'id="refusal"' in body and "active members" in body
        with Brokers(cluster) as brokers:
            [committed] = [p.committed_offset for p in groups_cli.describe_group(brokers, "live").partitions]
        assert committed == 1
    finally:
        consumer.close()


def test_deleting_records_moves_the_log_start_and_the_browser_starts_there(cluster, console, browser) -> None:
    from selenium.webdriver.common.by import By

    browser.get(console + "/topics/purge/partitions/0/records")
    assert cells(browser, "#records tr[data-offset] td:first-child")[0] == "0"
    field = browser.find_element(By.CSS_SELECTOR, "#delete-records input[name=offset]")
    field.clear()
    field.send_keys("4")
    browser.find_element(By.CSS_SELECTOR, "#delete-records button").click()
    alert = browser.switch_to.alert
    assert "purge-0" in alert.text
    alert.accept()
    wait_until(lambda: browser.find_elements(By.ID, "notice"), 10, "the page shows the outcome")
    assert "Log start 4," in browser.find_element(By.TAG_NAME, "main").text
    offsets = cells(browser, "#records tr[data-offset] td:first-child")
    assert offsets[0] == "4" and len(offsets) == 6
    shot(browser, "records-deleted")
    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster, "group.id": "check"})
    low, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition("purge", 0), 10)
    consumer.close()
    assert (low, high) == (4, 10)
    # past the high watermark: the broker's refusal is shown, nothing moves
    status, body = _get(console + "/topics/purge/partitions/0/delete-records", data=b"offset=99")
    assert status == 200 and 'id="refusal"' in body and "OFFSET_OUT_OF_RANGE" in body
    assert "Log start 4," in body


def test_a_page_of_another_site_cannot_write(cluster, console) -> None:
    """A form another site's page submits here carries that site's Origin: refused, nothing deleted."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(console + "/topics/purge/partitions/0/delete-records", data=b"offset=-1",
                                     headers={"Origin": "http://attacker.example"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 403 and "attacker.example" in refused.value.read().decode()
    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster, "group.id": "check"})
    low, _ = consumer.get_watermark_offsets(confluent_kafka.TopicPartition("purge", 0), 10)
    consumer.close()
    assert low < 10


def test_the_broker_serves_its_own_console(tmp_path) -> None:
    port = free_port()
    with BrokerProcess(tmp_path / "data", properties={"eoslog.console.listen": f"127.0.0.1:{port}"}) as broker:
        console = f"http://127.0.0.1:{port}"
        bootstrap = broker.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic("served", 1, 1)]).values():
            future.result(10)
        produce(bootstrap, "served", 0, 3)
        commit(bootstrap, GROUP, {("served", 0): 1})
        status, body = _get(console + "/topics/served")
        assert status == 200 and 'data-partition="0"' in body and '<td class="hw">3</td>' in body
        status, body = _get(console + "/groups")
        assert status == 200 and f'href="{GROUP_PATH}"' in body
        status, body = _get(console + GROUP_PATH + "/partitions")
        assert status == 200 and '<td id="total-lag">2</td>' in body
        status, body = _get(console + GROUP_PATH)
        assert status == 200 and "reset-offsets" not in body  # read-only: no form
        status, body = _get(console + "/topics/served/partitions/0/records")
        assert status == 200 and body.count("data-offset=") == 3 and "delete-records" not in body
        # read-only by default: every write answers 403, whatever it asks
        for path, form in [(GROUP_PATH + "/reset-offsets", {"to": "earliest"}),
                           ("/topics/served/partitions/0/delete-records", {"offset": "2"}),
                           ("/transactions/abort", {"transactional_id": "x"})]:
            status, body = _get(console + path, data=urllib.parse.urlencode(form).encode())
            assert status == 403 and "--allow-writes" in body, path
        # and the broker still serves its clients while the console is asked
        produce(bootstrap, "served", 0, 2, "more")
        consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                                             "auto.offset.reset": "earliest"})
        consumer.assign([confluent_kafka.TopicPartition("served", 0, 0)])
        seen: list[bytes] = []
        wait_until(lambda: (m := consumer.poll(0.2)) is not None and not m.error() and seen.append(m.value())
                   or len(seen) == 5, 10, "a consumer reads the five records")
        consumer.close()
        status, body = _get(console + "/topics/served")
        assert status == 200 and '<td class="hw">5</td>' in body
        with Brokers(bootstrap) as brokers:
            [view] = [v for v in groups_cli.describe_group(brokers, GROUP).partitions]
        assert view.committed_offset == 1  # the forbidden reset changed nothing


def test_a_broker_with_only_secured_listeners_needs_the_console_client_config(tmp_path) -> None:
    result = subprocess.run([sys.executable, "-m", "eoslog", "serve", "--data-dir", str(tmp_path / "data"),
                             "--set", "listeners=SASL_PLAINTEXT://127.0.0.1:0",
                             "--console-listen", "127.0.0.1:0"], check=False, capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 1
    assert "PLAINTEXT listener" in result.stderr and "--console-command-config" in result.stderr
    assert not (tmp_path / "data").exists()  # refused before the data directory was touched
    listeners = parse_listeners("SASL_SSL://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9094")
    assert console_listener(listeners, None).name == "PLAINTEXT"
    assert console_listener(listeners, "SASL_SSL").name == "SASL_SSL"
    with pytest.raises(ConfigError, match="security.protocol=SASL_PLAINTEXT"):
        console_listener(listeners, "SASL_PLAINTEXT")


def test_the_broker_serves_its_console_through_a_secured_listener(tmp_path) -> None:
    """Only a SASL_SSL listener: the console logs in with the client properties it is given."""
    from click.testing import CliRunner

    from eoslog.testing.certs import make_certs
    from eoslog.tools.topics_cli import topics_group
    from eoslog.tools.users_cli import users_group

    certs = make_certs(tmp_path / "certs", ())
    data_dir = tmp_path / "data"
    added = CliRunner().invoke(users_group, ["add", "ops", "--data-dir", str(data_dir), "--password-file", "-"],
                               input="ops-secret\n")
    assert added.exit_code == 0, added.output
    client = tmp_path / "client.properties"
    client.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                      'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required '
                      'username="ops" password="ops-secret";\n'
                      f"ssl.truststore.location={certs.ca}\n")
    port, console_port = free_port(), free_port()
    properties = {"listeners": f"SASL_SSL://127.0.0.1:{port}",
                  "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
                  "ssl.keystore.location": str(certs.broker),
                  "eoslog.console.listen": f"127.0.0.1:{console_port}",
                  "eoslog.console.command.config": str(client)}
    with EmbeddedBroker(data_dir=data_dir, properties=properties):
        created = CliRunner().invoke(topics_group, ["create", "guarded", "--partitions", "2", "-b",
                                                    f"127.0.0.1:{port}", "--command-config", str(client)])
        assert created.exit_code == 0, created.output
        status, body = _get(f"http://127.0.0.1:{console_port}/topics/guarded")
        assert status == 200 and body.count("data-partition=") == 2
