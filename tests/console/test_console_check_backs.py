"""Check-back transactions on the console's transactions page, in headless Chromium against a real broker
(docs/transactions.md, "Check-back transactions"; docs/console.md, "Transactions").

Two producers of ``eoslog.client.checkback`` open a local transaction each, write a record and stall inside the
block, as one that died there would: after their 1 s timeout the broker moves both to Checking and asks
the group, whose resolver (a third instance) answers unknown. The page shows them as Checking with the
group and a count that rises, never as hanging and without an abort; then one is answered commit and shows
CompleteCommit, and the other, answered unknown to the last check, shows the broker's abort reason.

Short settings so the whole file takes a few seconds: timeout 1 s, timer every 100 ms, back-off 200 ms
doubling to 800 ms, 8 checks at most.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

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
from test_console_principal import USERS, properties_file

from eoslog import api
from eoslog.client.checkback import CheckBackProducer, LocalTransaction
from eoslog.console.app import create_app
from eoslog.console.server import ConsoleServer
from eoslog.console.views import Session
from eoslog.security.client import ClientSecurity
from eoslog.testing.embedded import EmbeddedBroker
from eoslog.testing.process import free_port
from eoslog.testing.wait import wait_until
from eoslog.tools import txn_cli
from eoslog.tools.brokers import Brokers
from eoslog.tools.users_cli import users_group

pytestmark = pytest.mark.interop

GROUP, TOPIC = "orders-app", "cb-orders"
MAX_CHECKS = 8  # the last about 4.6 s after the first: room to answer commit before it
PROPERTIES = {
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "100",
    "eoslog.transaction.check.max.checks": str(MAX_CHECKS),
    "eoslog.transaction.check.backoff.ms": "200",
    "eoslog.transaction.check.backoff.max.ms": "800",
    "eoslog.transaction.check.lease.ms": "3000",
}
HANGING_AFTER_MS = 300  # an Ongoing transaction this old is flagged: a Checking one, older, must not be


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory):
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("console-checkback") / "data",
                        properties=PROPERTIES) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
            future.result(10)
        yield broker.bootstrap


@pytest.fixture(scope="module")
def console(bootstrap):
    session = Session(bootstrap)
    server = ConsoleServer(create_app(session, allow_writes=True, hanging_after_ms=HANGING_AFTER_MS)).start()
    wait_until(lambda: _get(server.url + "/")[0] == 200, 10, "the console answers")
    yield server.url
    server.stop()
    session.close()


@contextlib.contextmanager
def stalled_transaction(producer: CheckBackProducer, value: bytes) -> Iterator[LocalTransaction]:
    """A local transaction that has written ``value`` and never leaves its block (until the test ends):
    its producer neither commits nor aborts, so the broker's timeout hands it to the check-back group."""
    block = producer.local_transaction()
    txn = block.__enter__()
    txn.send(TOPIC, value, partition=0)
    try:
        yield txn
    finally:
        # Leaving now would EndTxn; the transaction has been decided by then, so only drop the generator
        # (its abort attempt is refused: fenced or already complete) once the producer is closed.
        producer.close()
        block.gen.close()


def row(driver, transactional_id: str) -> dict[str, str] | None:
    """One row of the transactions table: its class and the text of each cell that has a class."""
    return driver.execute_script(
        "const r = document.querySelector(`#transactions tr[data-transactional-id=\"${arguments[0]}\"]`);"
        "if (!r) return null;"
        "const c = Object.fromEntries(Array.from(r.querySelectorAll('td[class]'))"
        "  .map(td => [td.className, td.innerText.trim()]));"
        "c.row = r.className; c.forms = r.querySelectorAll('form').length; return c;", transactional_id)


def reloaded_row(driver, url: str, transactional_id: str) -> dict[str, str] | None:
    driver.get(url)
    return row(driver, transactional_id)


def checks(cell: str) -> int:
    count, of, maximum = cell.split()
    assert (of, maximum) == ("of", str(MAX_CHECKS)), cell
    return int(count)


def test_checking_transactions_show_their_checks_and_outcome(bootstrap, console, browser) -> None:
    page = console + "/transactions"
    answers: dict[str, str] = {}  # txn id -> what the group's database says; unknown until the test decides
    with (CheckBackProducer(bootstrap, GROUP, resolver=lambda txn_id: answers.get(txn_id, "unknown"),
                            transactional_id="cb-resolver", poll_wait_ms=500) as group_member,
          stalled_transaction(CheckBackProducer(bootstrap, GROUP, transactional_id="cb-commit",
                                                transaction_timeout_ms=1000), b"kept") as kept,
          stalled_transaction(CheckBackProducer(bootstrap, GROUP, transactional_id="cb-abort",
                                                transaction_timeout_ms=1000), b"dropped") as dropped):
        wait_until(lambda: (reloaded_row(browser, page, "cb-commit") or {}).get("state") == "Checking", 10,
                   "the stalled transaction is Checking on the page")
        first = row(browser, "cb-commit")
        assert first["row"] == "checking"  # shaded as checking, not as hanging
        assert first["check-group"] == GROUP
        assert first["next-check"] == "due" or first["next-check"].startswith("in ")
        assert first["forms"] == 0 and first["action"] == "its group decides"  # no Abort button
        assert first["producer"] == f"{kept.id.split(':')[1]} / {kept.id.split(':')[2]}"
        # its partition is open on purpose: not in the hanging table, which offers ABORT markers
        assert cells(browser, "#hanging td") == ["none"]
        # an abort posted by hand (no page offers it) is refused, and the transaction stays Checking
        status, body = _get(console + "/transactions/abort", data=b"transactional_id=cb-commit")
        assert status == 200 and 'id="refusal"' in body and "cb-commit is a check-back transaction" in body
        counted = checks(first["checks"])
        wait_until(lambda: checks(reloaded_row(browser, page, "cb-commit")["checks"]) > counted, 10,
                   "the check count rises as the group answers unknown")
        assert row(browser, "cb-commit")["state"] == "Checking"
        shot(browser, "transactions-checking")

        # the group's database now says commit: the transaction is committed, the other stays checked
        answers[kept.id] = "commit"
        wait_until(lambda: (reloaded_row(browser, page, "cb-commit") or {}).get("state") == "CompleteCommit", 10,
                   "the page shows the check-back commit")
        committed = row(browser, "cb-commit")
        assert committed["row"] == "" and committed["next-check"] == "" and committed["check-group"] == GROUP
        assert "abort" not in committed["state"].lower()
        wait_until(lambda: (reloaded_row(browser, page, "cb-abort") or {}).get("state", "").startswith(
            "CompleteAbort"), 10, "the broker aborts after the last check")
        aborted = row(browser, "cb-abort")
        assert cells(browser, '#transactions tr[data-transactional-id="cb-abort"] .abort-reason') == [
            f"check-back: max checks ({MAX_CHECKS}) reached"]
        assert aborted["row"] == "" and aborted["forms"] == 0
        assert (kept.id, "commit", 0) in group_member.answered
        assert not any(txn_id == dropped.id and answer != "unknown" for txn_id, answer, _ in group_member.answered)
        shot(browser, "transactions-checked")


def test_a_broker_without_check_backs_says_so(console, browser, monkeypatch) -> None:
    # The broker runs in this process: make its ApiVersions answer as a broker without eoslog's private APIs
    kafkas = api.supported_versions
    monkeypatch.setattr(api, "supported_versions", lambda: {k: v for k, v in kafkas().items() if k < 0x7E00})
    browser.get(console + "/transactions")
    assert "does not support eoslog's check-back transactions" in cells(browser, "#check-backs-unsupported")[0]
    assert browser.find_elements("css selector", "#transactions") and not browser.find_elements(
        "css selector", "#transactions td.checks")
    monkeypatch.undo()
    browser.get(console + "/transactions")
    assert not browser.find_elements("css selector", "#check-backs-unsupported")


def test_only_the_ids_the_principal_may_describe(tmp_path, browser) -> None:
    """alice may describe the transactional id cb-visible, not cb-hidden: both Checking, she sees one."""
    for user, password in USERS.items():
        added = CliRunner().invoke(users_group, ["add", user, "--data-dir", str(tmp_path / "data"),
                                                 "--password-file", "-"], input=password + "\n")
        assert added.exit_code == 0, added.output
    port = free_port()
    properties = {**PROPERTIES, "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
                  "sasl.enabled.mechanisms": "SCRAM-SHA-512", "super.users": "User:admin",
                  "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                  "transaction.state.log.num.partitions": "1"}
    with EmbeddedBroker(data_dir=tmp_path / "data", properties=properties) as broker:
        files = {user: properties_file(tmp_path / f"{user}.properties", user) for user in USERS}
        admin_security = ClientSecurity.from_file(files["admin"])
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "security.protocol": "sasl_plaintext",
                             "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "admin",
                             "sasl.password": USERS["admin"]})
        for future in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
            future.result(10)
        grant = AclBinding(ResourceType.TRANSACTIONAL_ID, "cb-visible", ResourcePatternType.LITERAL, "User:alice",
                           "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)
        for future in admin.create_acls([grant]).values():
            future.result(10)
        session = Session(broker.bootstrap, ClientSecurity.from_file(files["alice"]))
        server = ConsoleServer(create_app(session, hanging_after_ms=HANGING_AFTER_MS)).start()
        try:
            with contextlib.ExitStack() as stack:
                # nobody polls for the group: both stay Checking at check 0
                for t in ("cb-visible", "cb-hidden"):
                    stack.enter_context(stalled_transaction(CheckBackProducer(
                        broker.bootstrap, GROUP, transactional_id=t, transaction_timeout_ms=1000,
                        security=admin_security), t.encode()))
                with Brokers(broker.bootstrap, security=admin_security) as brokers:
                    wait_until(lambda: {t: r.state for t, r in txn_cli.list_check_backs(brokers).items()}
                               == {"cb-visible": "Checking", "cb-hidden": "Checking"}, 10,
                               "both transactions Checking (as the super user sees them)")
                # the console's rows come from ListTransactions, its checks from ListCheckBacks: both filter
                with Brokers(broker.bootstrap, security=ClientSecurity.from_file(files["alice"])) as brokers:
                    assert set(txn_cli.list_check_backs(brokers)) == {"cb-visible"}
                browser.get(server.url + "/transactions")
                seen = row(browser, "cb-visible")
                assert (seen["state"], seen["check-group"], seen["row"]) == ("Checking", GROUP, "checking")
                # alice may not describe the broker's configs: the count without its maximum
                assert seen["checks"] == "0"
                assert row(browser, "cb-hidden") is None and "cb-hidden" not in browser.page_source
                assert not browser.find_elements("css selector", "#check-backs-unsupported")
        finally:
            server.stop()
            session.close()
