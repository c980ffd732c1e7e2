"""The schema pages under the registry's authorization: a SASL_PLAINTEXT broker with ACLs and SCRAM users
serves its registry with basic authentication and subject authorization, and its console logs in as bob
(``eoslog.console.command.config``), who may read topic ``orders`` only. The console asks the registry as
bob, so the registry's own subject mapping (``orders-value`` is topic ``orders``) decides what the pages
show: the subjects page lists ``orders-value`` alone, its diff is shown, and ``payments-value`` is a "not
authorized" note naming what bob lacks, not an error page."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from html import unescape

import pytest
from click.testing import CliRunner
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from eoslog.testing.process import free_port
from eoslog.testing.wait import wait_until
from eoslog.tools.users_cli import users_group

pytestmark = pytest.mark.interop
USERS = {"admin": "admin-secret", "bob": "bob-secret"}
V1 = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]}
V2 = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"},
                                                     {"name": "total", "type": "double", "default": 0.0}]}


def _client_properties(path, user: str) -> str:
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                    f"sasl.username={user}\nsasl.password={USERS[user]}\n")
    return str(path)


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture(scope="module")
def console_as_bob(tmp_path_factory):
    from eoslog.server.embedded import EmbeddedBroker

    tmp_path = tmp_path_factory.mktemp("console-schemas-acls")
    data_dir = tmp_path / "data"
    for user, password in USERS.items():
        added = CliRunner().invoke(users_group, ["add", user, "--data-dir", str(data_dir), "--password-file", "-"],
                                   input=password + "\n")
        assert added.exit_code == 0, added.output
    bootstrap = f"127.0.0.1:{free_port()}"
    properties = {"listeners": f"SASL_PLAINTEXT://{bootstrap}", "sasl.enabled.mechanisms": "SCRAM-SHA-512",
                  "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin",
                  "eoslog.schema.registry.listen": "127.0.0.1:0", "eoslog.schema.registry.basic.auth": "true",
                  "eoslog.schema.registry.authorization": "true",
                  "eoslog.schema.registry.command.config": _client_properties(tmp_path / "admin.properties", "admin"),
                  "eoslog.console.listen": "127.0.0.1:0",
                  "eoslog.console.command.config": _client_properties(tmp_path / "bob.properties", "bob")}
    with EmbeddedBroker(data_dir=data_dir, properties=properties) as embedded:
        admin = AdminClient({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                             "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "admin",
                             "sasl.password": USERS["admin"]})
        binding = AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:bob", "*",
                             AclOperation.READ, AclPermissionType.ALLOW)
        for future in admin.create_acls([binding]).values():
            future.result(10)
        client = SchemaRegistryClient({"url": embedded.broker.schema_registry.server.url,
                                       "basic.auth.user.info": f"admin:{USERS['admin']}"})
        for subject in ("orders-value", "payments-value"):
            for schema in (V1, V2):
                wait_until(lambda s=subject, v=schema: _register(client, s, v), 60, f"{subject} registered")
        yield f"http://127.0.0.1:{embedded.broker.console.bound_port}"


def _register(client, subject: str, schema: dict):
    try:
        return client.register_schema(subject, Schema(json.dumps(schema), "AVRO"))
    except SchemaRegistryError as exc:
        if exc.error_code in (50004, 50003, 50002, 50001):  # the registry is still starting (or reading ACLs)
            return None
        raise


def test_the_pages_show_what_the_console_principal_may_read(console_as_bob):
    status, html = _get(console_as_bob + "/schemas")
    assert status == 200, html
    assert 'data-subject="orders-value"' in html and "payments-value" not in html
    status, html = _get(console_as_bob + "/schemas/orders-value/diff")
    assert status == 200, html
    assert any('"name": "total"' in unescape(line) for line in html.split("\n") if 'class="diff-add"' in line)
    # a subject of a topic bob may not describe: the note page, naming the registry's refusal and him
    status, html = _get(console_as_bob + "/schemas/payments-value")
    assert status == 200 and 'id="not-authorized"' in html, html
    note = unescape(html.split('id="not-authorized">', 1)[1].split("</p>", 1)[0])
    assert "(User:bob)" in note and "the schema registry refused" in note and "40301" in note, note
    assert "DESCRIBE on TOPIC 'payments'" in note, note
