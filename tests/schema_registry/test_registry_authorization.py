"""Subjects authorized through the cluster's ACLs (authorization.py's mapping): a broker with the ACL
authorizer and SCRAM users, the registry process with --basic-auth --authorize in front of it, ACLs
granted with confluent-kafka's AdminClient; and the mapping itself over fixed bindings."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import urllib.error
import urllib.request

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

from eoslog.schema_registry import authorization
from eoslog.schema_registry.authorization import SubjectAuthorizer, topic_of
from eoslog.schema_registry.kafka_access import KafkaAccess
from eoslog.security import acl
from eoslog.testing.embedded import EmbeddedBroker
from eoslog.testing.process import free_port
from eoslog.testing.wait import wait_until
from eoslog.tools.users_cli import users_group

pytestmark = pytest.mark.interop
USERS = {"registry": "registry-secret", "ann": "ann-secret", "bob": "bob-secret", "carol": "carol-secret"}
SCHEMA = {"schema": json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]})}


def login(bootstrap: str, user: str) -> dict:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user, "sasl.password": USERS[user]}


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("sr-acls")
    data_dir = tmp_path / "data"
    for user, password in USERS.items():
        added = CliRunner().invoke(users_group, ["add", user, "--data-dir", str(data_dir), "--password-file", "-"],
                                   input=password + "\n")
        assert added.exit_code == 0, added.output
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    properties = {"listeners": f"SASL_PLAINTEXT://{bootstrap}", "sasl.enabled.mechanisms": "SCRAM-SHA-512",
                  "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:registry"}
    client = tmp_path / "registry.properties"
    client.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=registry\n"
                      f"sasl.password={USERS['registry']}\n")
    port_file = tmp_path / "registry.port"
    with EmbeddedBroker(data_dir=data_dir, properties=properties):
        admin = AdminClient(login(bootstrap, "registry"))
        grants = [("ann", "orders", AclOperation.WRITE), ("bob", "orders", AclOperation.READ)]
        for future in admin.create_acls([
                AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, f"User:{user}", "*", operation,
                           AclPermissionType.ALLOW) for user, topic, operation in grants]).values():
            future.result(10)
        log = open(tmp_path / "registry.log", "w")  # noqa: SIM115 - closed below
        process = subprocess.Popen(
            [sys.executable, "-m", "eoslog", "schema-registry", "--bootstrap", bootstrap, "--command-config",
             str(client), "--listen", "127.0.0.1:0", "--port-file", str(port_file), "--basic-auth", "--authorize",
             "--super-users", "User:registry", "--session-timeout-ms", "6000"], stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_until(lambda: port_file.exists() and port_file.read_text().strip(), 30, "the registry serving")
            yield f"http://127.0.0.1:{int(port_file.read_text())}", admin
        finally:
            process.terminate()
            process.wait(15)
            log.close()


def call(url: str, user: str, method: str, path: str, body: object = None) -> tuple[int, object]:
    headers = {"Content-Type": "application/vnd.schemaregistry.v1+json",
               "Authorization": "Basic " + base64.b64encode(f"{user}:{USERS[user]}".encode()).decode()}
    data = None if body is None else json.dumps(body).encode()
    try:
        with urllib.request.urlopen(urllib.request.Request(url + path, data=data, headers=headers, method=method),
                                    timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_subjects_follow_the_acls_of_their_topics(guarded):
    url, admin = guarded
    # a producer (WRITE on orders) registers; a consumer (READ) may not, and is told what it lacks
    status, body = wait_until(lambda: (r := call(url, "ann", "POST", "/subjects/orders-value/versions", SCHEMA))
                              [0] != 50004 and r[0] != 500 and r, 60, "the first registration")
    assert status == 200, body
    schema_id = body["id"]
    status, body = call(url, "bob", "POST", "/subjects/orders-key/versions", {"schema": '"string"'})
    assert (status, body["error_code"]) == (403, 40301)
    assert "WRITE on TOPIC 'orders'" in body["message"] and "User:bob" in body["message"]
    # both may read it (READ and WRITE imply DESCRIBE); carol, with nothing granted, may not
    assert call(url, "bob", "GET", "/subjects/orders-value/versions") == (200, [1])
    assert call(url, "ann", "GET", f"/schemas/ids/{schema_id}")[0] == 200
    assert call(url, "carol", "GET", "/subjects/orders-value/versions")[0] == 403
    assert call(url, "carol", "GET", f"/schemas/ids/{schema_id}")[0] == 403
    assert call(url, "carol", "POST", "/compatibility/subjects/orders-value/versions/latest", SCHEMA)[0] == 403
    # lists show only what the caller may read
    assert call(url, "registry", "POST", "/subjects/payments-value/versions", {"schema": '"long"'})[0] == 200
    assert call(url, "registry", "GET", "/subjects")[1] == ["orders-value", "payments-value"]
    assert call(url, "bob", "GET", "/subjects") == (200, ["orders-value"])
    assert call(url, "carol", "GET", "/subjects") == (200, [])
    # deleting and configuring need more than producing
    assert call(url, "ann", "DELETE", "/subjects/orders-value")[0] == 403
    assert call(url, "ann", "PUT", "/config/orders-value", {"compatibility": "FULL"})[0] == 403
    assert call(url, "ann", "PUT", "/config", {"compatibility": "NONE"})[0] == 403
    assert call(url, "registry", "PUT", "/config/orders-value", {"compatibility": "FULL"}) == \
        (200, {"compatibility": "FULL"})
    # a grant applies at once: no restart, no wait for a refresh period
    for future in admin.create_acls([AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL,
                                                "User:carol", "*", AclOperation.DESCRIBE,
                                                AclPermissionType.ALLOW)]).values():
        future.result(10)
    wait_until(lambda: call(url, "carol", "GET", "/subjects/orders-value/versions") == (200, [1]), 3,
               "carol reads after the grant")  # sooner than REFRESH_S
    assert call(url, "carol", "GET", "/subjects") == (200, ["orders-value"])


def test_the_brokers_registry_needs_basic_auth_to_authorize(tmp_path):
    result = subprocess.run([sys.executable, "-m", "eoslog", "serve", "--data-dir", str(tmp_path / "data"),
                             "--listen", "127.0.0.1:0", "--schema-registry-listen", "127.0.0.1:0",
                             "--set", "eoslog.schema.registry.authorization=true"],
                            check=False, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "eoslog.schema.registry.basic.auth=true" in result.stderr, result.stderr


@pytest.mark.parametrize(("subject", "topic"), [
    ("orders-value", "orders"), ("orders-key", "orders"), ("shop.Payment", "shop.Payment"),
    ("-value", "-value"), ("a-value-key", "a-value"), ("shop/money.proto", "shop/money.proto")])
def test_topic_of(subject, topic):
    assert topic_of(subject) == topic


def test_the_mapping_over_fixed_bindings():
    def binding(resource_type, name, principal, operation, pattern=acl.PatternType.LITERAL,
                permission=acl.AclPermissionType.ALLOW):
        return acl.AclBinding.of(resource_type, name, pattern, principal, "*", operation, permission)

    bindings = [binding(acl.ResourceType.TOPIC, "shop.", "User:ann", acl.AclOperation.ALL, acl.PatternType.PREFIXED),
                binding(acl.ResourceType.TOPIC, "shop.secret", "User:ann", acl.AclOperation.DESCRIBE,
                        permission=acl.AclPermissionType.DENY),
                binding(acl.ResourceType.CLUSTER, acl.CLUSTER_NAME, "User:ops", acl.AclOperation.ALTER_CONFIGS)]
    authorizer = SubjectAuthorizer(KafkaAccess("unused:1"), frozenset({"User:root"}), fetch=lambda: bindings)
    may = authorizer.may
    assert may("User:ann", "10.0.0.1", authorization.REGISTER, "shop.orders-value")
    assert may("User:ann", "10.0.0.1", authorization.DELETE, "shop.orders-value")
    assert not may("User:ann", "10.0.0.1", authorization.READ, "shop.secret-value")  # DENY wins
    assert not may("User:ann", "10.0.0.1", authorization.READ, "orders-value")
    assert not may("User:ann", "10.0.0.1", authorization.CONFIGURE, None)
    assert may("User:ops", "10.0.0.1", authorization.CONFIGURE, None)
    assert may("User:root", "10.0.0.1", authorization.DELETE, "anything-value")
