"""Principal-scoped views: on a SASL listener with ACLs, the console logs in as ``--command-config``'s
principal and shows only what it may describe. ``alice`` may Describe topic ``a`` and group ``ga`` and
nothing else; the super user ``admin`` wrote to ``b``, committed for ``gb``, left a transaction open and
committed a transaction group. Walked in headless Chromium through the navigation and links: alice sees
``a`` and ``ga`` and none of the rest, the sections she has no right to are notes, no page is an error."""

from __future__ import annotations

from pathlib import Path

import confluent_kafka
import pytest
from click.testing import CliRunner
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from test_console_browser import _get, cells, shot

from eoslog.console.app import create_app
from eoslog.console.server import ConsoleServer
from eoslog.console.views import Session
from eoslog.protocol import messages
from eoslog.security.client import ClientSecurity
from eoslog.testing.embedded import EmbeddedBroker
from eoslog.testing.process import free_port
from eoslog.testing.wait import wait_until
from eoslog.tools import txn_cli
from eoslog.tools.brokers import TRANSACTION, Brokers
from eoslog.tools.users_cli import users_group

pytestmark = pytest.mark.interop
USERS = {"admin": "admin-secret", "alice": "alice-secret"}


def properties_file(path: Path, user: str) -> Path:
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                    f'username="{user}" password="{USERS[user]}";\n')
    return path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """(bootstrap, {user: client properties file}) of a SASL_PLAINTEXT broker with an authorizer."""
    tmp = tmp_path_factory.mktemp("console-principal")
    for user, password in USERS.items():
        added = CliRunner().invoke(users_group, ["add", user, "--data-dir", str(tmp / "data"), "--password-file", "-"],
                                   input=password + "\n")
        assert added.exit_code == 0, added.output
    port = free_port()
    properties = {"listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}", "sasl.enabled.mechanisms": "SCRAM-SHA-512",
                  "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin",
                  "offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1"}
    with EmbeddedBroker(data_dir=tmp / "data", properties=properties) as broker:
        files = {user: properties_file(tmp / f"{user}.properties", user) for user in USERS}
        login = {"bootstrap.servers": broker.bootstrap, "security.protocol": "sasl_plaintext",
                 "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "admin", "sasl.password": USERS["admin"]}
        admin = AdminClient(login)
        for future in admin.create_topics([NewTopic("a", 1, 1), NewTopic("b", 1, 1)]).values():
            future.result(10)
        grants = [AclBinding(kind, name, ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.DESCRIBE,
                             AclPermissionType.ALLOW) for kind, name in ((ResourceType.TOPIC, "a"),
                                                                         (ResourceType.GROUP, "ga"))]
        for future in admin.create_acls(grants).values():
            future.result(10)
        producer = confluent_kafka.Producer(login)
        for topic in ("a", "b"):
            producer.produce(topic, b"plain")
        producer.flush(10)
        for group, topic in (("ga", "a"), ("gb", "b")):
            consumer = confluent_kafka.Consumer({**login, "group.id": group, "enable.auto.commit": False})
            consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 1)], asynchronous=False)
            consumer.close()
        # a member of ga consuming both topics: its assignment names b
        member_of_ga = confluent_kafka.Consumer({**login, "group.id": "ga", "enable.auto.commit": False})
        member_of_ga.subscribe(["a", "b"])
        wait_until(lambda: member_of_ga.poll(0.1) is None and len(member_of_ga.assignment()) == 2, 20,
                   "the member of ga is assigned a-0 and b-0")
        # a transaction left open on b, and a transaction group committed by the admin
        opened = confluent_kafka.Producer({**login, "transactional.id": "txb"})
        opened.init_transactions(10)
        opened.begin_transaction()
        opened.produce("b", b"open")
        opened.flush(10)
        member = confluent_kafka.Producer({**login, "transactional.id": "eoslog-sink-s-q-0-0"})
        member.init_transactions(10)
        member.begin_transaction()
        member.produce("b", b"grouped")
        member.flush(10)
        with Brokers(broker.bootstrap, security=ClientSecurity.from_file(files["admin"])) as brokers:
            [d] = txn_cli.describe_transactions(brokers, ["eoslog-sink-s-q-0-0"])
            M = messages.CommitTransactionGroupRequest
            committed = brokers.coordinator("eoslog-sink-s-q", TRANSACTION).request(0x7E00, 0, M(
                group_name="eoslog-sink-s-q", sequence=0, abort_prefix=None, transactions=[M.GroupMember(
                    transactional_id=d.transactional_id, producer_id=d.producer_id, producer_epoch=d.producer_epoch)]))
            assert committed.error_code == 0
        yield broker.bootstrap, files
        opened.abort_transaction(10)
        member_of_ga.close()


@pytest.fixture(scope="module")
def consoles(cluster):
    """{user: the URL of a console logged in as that user}."""
    bootstrap, files = cluster
    sessions = {user: Session(bootstrap, ClientSecurity.from_file(files[user])) for user in USERS}
    servers = {user: ConsoleServer(create_app(session)).start() for user, session in sessions.items()}
    for server in servers.values():
        wait_until(lambda s=server: _get(s.url + "/")[0] == 200, 10, "the console answers")
    yield {user: server.url for user, server in servers.items()}
    for user, server in servers.items():
        server.stop()
        sessions[user].close()


def visit(driver, url: str) -> None:
    """Loads a page and checks it is not an error page."""
    driver.get(url)
    assert not driver.find_elements("css selector", "#error"), f"{url}: {cells(driver, '#error')}"
    assert not driver.title.startswith("Error")


def click(driver, text: str) -> None:
    """Follows a link, as a user would."""
    before = driver.current_url
    driver.find_element("link text", text).click()
    wait_until(lambda: driver.current_url != before, 5, f"the link {text!r} loads")
    assert not driver.find_elements("css selector", "#error"), f"{driver.current_url}: {cells(driver, '#error')}"


def listed(driver, selector: str, attribute: str) -> list[str]:
    return driver.execute_script("return Array.from(document.querySelectorAll(arguments[0]))"
                                 ".map(e => e.getAttribute(arguments[1]))", selector, attribute)


def test_the_admin_sees_everything(consoles, browser) -> None:
    """The workload is there: what alice does not see below is hidden from her, not missing."""
    url = consoles["admin"]
    visit(browser, url + "/topics")
    assert {"a", "b"} <= set(listed(browser, "#topics tr[data-topic]", "data-topic"))
    visit(browser, url + "/groups")
    assert {"ga", "gb"} <= set(listed(browser, "#groups tr[data-group]", "data-group"))
    visit(browser, url + "/groups/ga")
    assert listed(browser, "#partitions tr[data-tp]", "data-tp") == ["a-0", "b-0"]
    visit(browser, url + "/transactions")
    assert {"txb", "eoslog-sink-s-q-0-0"} <= set(listed(browser, "#transactions tr[data-transactional-id]",
                                                        "data-transactional-id"))
    visit(browser, url + "/transaction-groups")
    assert listed(browser, "#transaction-groups tr[data-group]", "data-group") == ["eoslog-sink-s-q"]
    visit(browser, url + "/topics/b")
    assert cells(browser, "#configs tr.own td:first-child") == [] and len(cells(browser, "#configs tr")) > 1


def test_alice_sees_only_what_she_may_describe(consoles, browser) -> None:
    url = consoles["alice"]
    visit(browser, url + "/")
    assert "1 topic, 1 partition." in browser.find_element("css selector", "main").text

    click(browser, "Topics")
    assert listed(browser, "#topics tr[data-topic]", "data-topic") == ["a"]
    browser.find_element("link text", "show internal topics").click()
    assert listed(browser, "#topics tr[data-topic]", "data-topic") == ["a"]
    click(browser, "a")
    assert cells(browser, "#partitions td.hw") == ["1"]  # ListOffsets needs Describe: she has it
    [note] = cells(browser, "#configs-not-authorized")
    assert note == "not authorized to describe the configs of topic a (TOPIC_AUTHORIZATION_FAILED)"
    shot(browser, "topic-not-authorized")
    click(browser, "producers")  # DescribeProducers needs Read on the topic
    assert "DescribeProducers a-0: TOPIC_AUTHORIZATION_FAILED" in cells(browser, "#not-authorized")[0]
    browser.back()
    click(browser, "records")  # so does Fetch
    assert "Fetch a-0" in cells(browser, "#not-authorized")[0]

    click(browser, "Consumer groups")
    assert listed(browser, "#groups tr[data-group]", "data-group") == ["ga"]
    click(browser, "ga")
    assert listed(browser, "#partitions tr[data-tp]", "data-tp") == ["a-0"]
    [assignment] = cells(browser, "#members td:nth-child(5)")
    assert assignment == "a: 0"  # the member consumes b too

    click(browser, "Transactions")
    assert cells(browser, "#transactions td") == ["no transactional ids"]
    assert cells(browser, "#hanging td") == ["none"]
    assert "1 partition (DescribeProducers" in cells(browser, "#hanging-not-authorized")[0]

    click(browser, "Transaction groups")
    assert cells(browser, "#transaction-groups td") == ["no transaction groups"]

    # Nothing of b, gb, txb or the transaction group anywhere she can go
    for path in ("/", "/topics?internal=1", "/topics/a", "/groups", "/groups/ga", "/transactions",
                 "/transaction-groups"):
        status, body = _get(url + path)
        assert status == 200 and 'id="error"' not in body, path
        for hidden in ('data-topic="b"', 'href="/topics/b"', "gb", "txb", "eoslog-sink-s-q"):
            assert hidden not in body, (path, hidden)


def test_addresses_she_may_not_see_are_notes(consoles) -> None:
    url = consoles["alice"]
    for path, refused in (("/topics/b", "topic b: TOPIC_AUTHORIZATION_FAILED"),
                          ("/topics/b/partitions/0/records", "TOPIC_AUTHORIZATION_FAILED"),
                          ("/groups/gb", "GROUP_AUTHORIZATION_FAILED"),
                          ("/transaction-groups/eoslog-sink-s-q", None)):
        status, body = _get(url + path)
        assert status == 200 and 'id="error"' not in body, path
        if refused:
            assert 'id="not-authorized"' in body and refused in body and "User:alice" in body, path
        else:
            assert 'id="absent"' in body and "eoslog-sink-s-q-0-0" not in body
