"""The console's schema pages (issue 39): an embedded broker serving both its console and its schema
registry (so the console reads its own broker's registry without being told where), versions registered
with confluent-kafka's SchemaRegistryClient, the pages read over HTTP, the diff picked in a real headless
Chromium (Debian's chromium and chromium-driver, driven by selenium), and ``eoslog console
--schema-registry-url`` as a process in front of the same registry."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.error
import urllib.request
from html import unescape

import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from eoslog.console.app import create_app
from eoslog.console.schema_views import SchemaRegistryAccess
from eoslog.console.server import ConsoleServer
from eoslog.console.views import Session
from eoslog.testing.wait import wait_until

pytestmark = pytest.mark.interop

ID = {"name": "id", "type": "string"}
AMOUNT = {"name": "amount", "type": "double"}
CURRENCY = {"name": "currency", "type": "string", "default": "EUR"}
NOTE = {"name": "note", "type": ["null", "string"], "default": None}
PAYMENTS = [{"type": "record", "name": "Payment", "namespace": "shop", "fields": fields}
            for fields in ([ID, AMOUNT], [ID, AMOUNT, CURRENCY], [ID, AMOUNT, CURRENCY, NOTE])]
ORDERS = [{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "title": "Order",
           "properties": properties, "required": ["id"]}
          for properties in ({"id": {"type": "integer"}},
                             {"id": {"type": "integer"}, "total": {"type": "number"}})]
MONEY = {"type": "record", "name": "Money", "namespace": "shop",
         "fields": [{"name": "cents", "type": "long"}, {"name": "currency", "type": "string"}]}
INVOICE = {"type": "record", "name": "Invoice", "namespace": "shop",
           "fields": [{"name": "id", "type": "string"}, {"name": "total", "type": "shop.Money"}]}


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _register(client: SchemaRegistryClient, subject: str, schema: Schema) -> int:
    def attempt():
        try:
            return client.register_schema(subject, schema)
        except SchemaRegistryError as exc:
            if exc.error_code in (50004, 50003, 50002):  # no writer yet: the registry is still starting
                return None
            raise

    return wait_until(attempt, 60, f"{subject} registered")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One broker serving a console and a registry: payments-value (Avro, 3 versions, each adding a
    field), orders-value (JSON Schema, 2 versions, level NONE), shop/money (a '/' in the subject) referenced
    by invoices-value, and old-value soft-deleted. Yields (console URL, registry URL, bootstrap)."""
    from eoslog.server.embedded import EmbeddedBroker

    properties = {"eoslog.console.listen": "127.0.0.1:0", "eoslog.schema.registry.listen": "127.0.0.1:0"}
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("console-schemas"), properties=properties) as embedded:
        registry_url = embedded.broker.schema_registry.server.url
        client = SchemaRegistryClient({"url": registry_url})
        for schema in PAYMENTS:
            _register(client, "payments-value", Schema(json.dumps(schema), "AVRO"))
        client.set_compatibility("orders-value", "NONE")
        for schema in ORDERS:
            _register(client, "orders-value", Schema(json.dumps(schema), "JSON"))
        _register(client, "shop/money", Schema(json.dumps(MONEY), "AVRO"))
        _register(client, "invoices-value", Schema(json.dumps(INVOICE), "AVRO",
                                                   [SchemaReference("shop.Money", "shop/money", 1)]))
        _register(client, "old-value", Schema('"string"', "AVRO"))
        client.delete_subject("old-value")
        console_url = f"http://127.0.0.1:{embedded.broker.console.bound_port}"
        yield console_url, registry_url, embedded.bootstrap


def rows(html: str, table: str) -> dict[str, dict[str, str]]:
    """The rows of a table of the page: data-* key -> {cell class: text}."""
    body = html.split(f'id="{table}"', 1)[1].split("</table>", 1)[0]
    found = {}
    for key, row in re.findall(r'<tr data-\w+="([^"]*)"[^>]*>(.*?)</tr>', body, re.DOTALL):
        found[unescape(key)] = {c: unescape(re.sub(r"<[^>]+>", "", text)).strip()
                                for c, text in re.findall(r'<td class="([\w-]+)">(.*?)</td>', row, re.DOTALL)}
    return found


def diff_lines(html: str, kind: str) -> list[str]:
    return [unescape(t) for t in re.findall(rf'<span class="diff-{kind}">(.*?)</span>', html, re.DOTALL)]


def test_the_subjects_page_lists_format_versions_level_and_soft_deletes(served):
    console, _, _ = served
    status, html = _get(console + "/schemas")
    assert status == 200, html
    assert 'href="/schemas" class="here"' in html  # in the navigation
    subjects = rows(html, "subjects")
    assert subjects["payments-value"] == {"format": "AVRO", "latest": "3", "versions": "3",
                                          "compatibility": "BACKWARD", "deleted": ""}
    assert subjects["orders-value"] == {"format": "JSON", "latest": "2", "versions": "2", "compatibility": "NONE",
                                        "deleted": ""}
    assert subjects["old-value"]["deleted"] == "soft-deleted"
    assert subjects["invoices-value"]["latest"] == "1"
    assert 'href="/schemas/shop%2Fmoney"' in html  # one path segment, '/' escaped


def test_a_subject_page_lists_versions_and_pretty_prints_the_chosen_one(served):
    console, _, _ = served
    status, html = _get(console + "/schemas/payments-value")
    assert status == 200, html
    versions = rows(html, "versions")
    assert sorted(versions) == ["1", "2", "3"]
    assert len({v["id"] for v in versions.values()}) == 3
    schema = unescape(html.split('id="schema">', 1)[1].split("</pre>", 1)[0])
    assert json.loads(schema) == PAYMENTS[2] and '\n  "fields": [' in schema  # the latest, indented
    _, first = _get(console + "/schemas/payments-value?version=1")
    assert json.loads(unescape(first.split('id="schema">', 1)[1].split("</pre>", 1)[0])) == PAYMENTS[0]
    # references link to the referenced subject's version
    _, invoice = _get(console + "/schemas/invoices-value")
    assert rows(invoice, "versions")["1"]["references"] == "shop.Money (shop/money version 1)"
    assert 'href="/schemas/shop%2Fmoney?version=1"' in invoice
    status, money = _get(console + "/schemas/shop%2Fmoney")
    assert status == 200 and "Subject shop/money" in money


def test_the_diff_marks_the_added_field_as_added_lines(served):
    console, _, _ = served
    status, html = _get(console + "/schemas/payments-value/diff")  # default: 3 against 2
    assert status == 200, html
    assert "version 2 → 3" in unescape(html)
    added, removed = diff_lines(html, "add"), diff_lines(html, "del")
    assert any('"name": "note"' in line for line in added), added
    assert not any("currency" in line for line in added + removed)  # in both versions
    assert not any('"name"' in line for line in removed), removed
    assert rows_of_changes(html) == {"added": "note", "removed": "-", "changed": "-"}
    _, wide = _get(console + "/schemas/payments-value/diff?from=1&to=3")
    assert {'"name": "currency"', '"name": "note"'} <= {line.strip(" +,") for line in diff_lines(wide, "add")}
    assert rows_of_changes(wide)["added"] == "currency, note"
    # backwards: the fields are removed lines
    _, back = _get(console + "/schemas/payments-value/diff?from=3&to=1")
    assert any('"name": "currency"' in line for line in diff_lines(back, "del"))
    assert rows_of_changes(back)["removed"] == "currency, note"
    # JSON Schema: the property added
    _, orders = _get(console + "/schemas/orders-value/diff")
    assert any('"total": {' in line for line in diff_lines(orders, "add")), orders
    assert rows_of_changes(orders) == {"added": "total", "removed": "-", "changed": "-"}
    # one version against itself: said so, no diff
    _, same = _get(console + "/schemas/payments-value/diff?from=2&to=2")
    assert 'id="no-diff"' in same and not diff_lines(same, "add")


def rows_of_changes(html: str) -> dict[str, str]:
    body = html.split('id="field-changes"', 1)[1].split("</table>", 1)[0]
    return {c: unescape(t) for c, t in re.findall(r'<td class="(\w+)">(.*?)</td>', body)}


@pytest.mark.parametrize(("path", "status", "says"), [
    ("/schemas/nothing-value", 404, "nothing-value"),
    ("/schemas/payments-value?version=9", 404, "has no version 9"),
    ("/schemas/payments-value/diff?from=1&to=9", 404, "has no version 9"),
    ("/schemas/payments-value?version=latest", 400, "version must be an integer, got 'latest'"),
    ("/schemas/payments-value/diff?from=x", 400, "from must be an integer, got 'x'"),
    ("/schemas/payments-value/diff?to=0", 400, "to must be at least 1, got 0"),
    ("/schemas/payments-value/other", 404, "no page /schemas/payments-value/other"),
])
def test_bad_input_is_an_error_page_naming_it(served, path, status, says):
    console, _, _ = served
    got, html = _get(console + path)
    assert got == status, html
    assert 'id="error"' in html and says in unescape(html), html
    assert "Traceback" not in html


def test_without_a_registry_the_pages_say_so(served):
    _, _, bootstrap = served
    session = Session(bootstrap)
    server = ConsoleServer(create_app(session)).start()
    gone = ConsoleServer(create_app(session, schema_registry=SchemaRegistryAccess("http://127.0.0.1:9"))).start()
    try:
        for path in ("/schemas", "/schemas/payments-value", "/schemas/payments-value/diff"):
            status, html = _get(server.url + path)
            assert status == 200 and 'id="no-registry"' in html, html
        # a registry configured but out of reach is the cluster-out-of-reach page, naming the URL
        status, html = _get(gone.url + "/schemas")
        assert status == 502 and "the schema registry at http://127.0.0.1:9 did not answer" in html, html
    finally:
        server.stop()
        gone.stop()
        session.close()


def test_the_console_command_takes_a_registry_url(served, tmp_path):
    _, registry, bootstrap = served
    port_file = tmp_path / "port"
    process = subprocess.Popen([sys.executable, "-m", "eoslog", "console", "--bootstrap", bootstrap, "--listen",
                                "127.0.0.1:0", "--port-file", str(port_file), "--schema-registry-url", registry],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: port_file.exists() and port_file.read_text().strip(), 30, "the console serving")
        status, html = _get(f"http://127.0.0.1:{int(port_file.read_text())}/schemas/orders-value/diff")
        assert status == 200 and any('"total"' in line for line in diff_lines(html, "add")), html
    finally:
        process.terminate()
        process.wait(15)


def texts(driver, selector: str) -> list[str]:
    return driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0])).map(e => e.textContent)", selector)


def test_the_browser_picks_two_versions_and_sees_their_diff(served, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    console, _, _ = served
    browser.get(console + "/")
    browser.find_element(By.LINK_TEXT, "Schemas").click()
    wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, '#subjects tr[data-subject="payments-value"]'), 10,
               "the subjects listed")
    browser.find_element(By.LINK_TEXT, "payments-value").click()
    wait_until(lambda: browser.find_elements(By.ID, "compare"), 10, "the subject page")
    # the form defaults to the latest against the one before
    assert Select(browser.find_element(By.ID, "diff-from")).first_selected_option.text == "2"
    assert Select(browser.find_element(By.ID, "diff-to")).first_selected_option.text == "3"
    Select(browser.find_element(By.ID, "diff-from")).select_by_value("1")
    browser.find_element(By.ID, "compare-button").click()
    wait_until(lambda: "diff?from=1&to=3" in browser.current_url and browser.find_elements(By.ID, "diff"), 10,
               "the diff page")
    # the form on the diff page shows the two versions compared
    assert Select(browser.find_element(By.ID, "diff-from")).first_selected_option.text == "1"
    assert Select(browser.find_element(By.ID, "diff-to")).first_selected_option.text == "3"
    added = texts(browser, "#diff .diff-add")
    assert any('"name": "currency"' in line for line in added) and any('"name": "note"' in line for line in added)
    assert texts(browser, "#diff .diff-del") == []
    assert texts(browser, "#field-changes .added") == ["currency, note"]
    # added lines are green, not the page's default colour
    colour = browser.execute_script("return getComputedStyle(document.querySelector('#diff .diff-add')).color")
    assert colour == "rgb(19, 115, 51)", colour
    _screenshot(browser, "console-schema-diff.png")


def _screenshot(driver, name: str) -> None:
    import os

    directory = os.environ.get("EOSLOG_CONSOLE_SCREENSHOTS")
    if directory:
        driver.save_screenshot(os.path.join(directory, name))
