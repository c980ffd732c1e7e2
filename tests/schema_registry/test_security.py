"""The registry over HTTPS with HTTP basic authentication checked against the broker's SCRAM users: a
broker with only a SASL_SSL listener, the registry as ``eoslog schema-registry`` runs it, and
confluent-kafka's SchemaRegistryClient with ``basic.auth.user.info`` and the test CA."""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from click.testing import CliRunner
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from eoslog.schema_registry.security import basic_credentials
from eoslog.testing.certs import make_certs
from eoslog.testing.embedded import EmbeddedBroker
from eoslog.testing.process import free_port
from eoslog.testing.wait import wait_until
from eoslog.tools.users_cli import users_group

pytestmark = pytest.mark.interop
USERS = {"registry": "registry-secret", "ann": "ann-secret"}


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """A broker with a SASL_SSL listener only, SCRAM users, and a registry process in front of it."""
    tmp_path = tmp_path_factory.mktemp("sr-security")
    certs = make_certs(tmp_path / "certs", ())
    data_dir = tmp_path / "data"
    for user, password in USERS.items():
        added = CliRunner().invoke(users_group, ["add", user, "--data-dir", str(data_dir), "--password-file", "-"],
                                   input=password + "\n")
        assert added.exit_code == 0, added.output
    port = free_port()
    properties = {"listeners": f"SASL_SSL://127.0.0.1:{port}",
                  "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
                  "ssl.keystore.location": str(certs.broker)}
    client = tmp_path / "client.properties"
    client.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=registry\n"
                      f"sasl.password={USERS['registry']}\nssl.ca.location={certs.ca}\n")
    port_file = tmp_path / "registry.port"
    with EmbeddedBroker(data_dir=data_dir, properties=properties):
        log = open(tmp_path / "registry.log", "w")  # noqa: SIM115 - closed below
        process = subprocess.Popen(
            [sys.executable, "-m", "eoslog", "schema-registry", "--bootstrap", f"127.0.0.1:{port}",
             "--command-config", str(client), "--listen", "127.0.0.1:0", "--port-file", str(port_file),
             "--ssl-certfile", str(certs.broker), "--ssl-cafile", str(certs.ca), "--basic-auth",
             "--session-timeout-ms", "6000"], stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_until(lambda: port_file.exists() and port_file.read_text().strip(), 30, "the registry serving")
            yield f"https://127.0.0.1:{int(port_file.read_text())}", certs
        finally:
            process.terminate()
            process.wait(15)
            log.close()


def request(url: str, certs, path: str, user: str | None = None, password: str | None = None,
            body: object = None) -> tuple[int, dict, dict]:
    headers = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
    if user is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    data = None if body is None else json.dumps(body).encode()
    context = ssl.create_default_context(cafile=str(certs.ca))
    try:
        with urllib.request.urlopen(urllib.request.Request(url + path, data=data, headers=headers),
                                    timeout=30, context=context) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), json.loads(exc.read())


def test_basic_auth_against_the_brokers_scram_users(secured):
    url, certs = secured
    status, headers, body = request(url, certs, "/subjects")
    assert (status, body["error_code"]) == (401, 401)
    assert headers["www-authenticate"].startswith("Basic ")
    assert request(url, certs, "/subjects", "ann", "wrong")[0] == 401
    assert request(url, certs, "/subjects", "nobody", "ann-secret")[0] == 401
    assert request(url, certs, "/subjects", "ann", USERS["ann"])[0] == 200
    # a login remembered is remembered with its password
    assert request(url, certs, "/subjects", "ann", "wrong")[0] == 401

    client = SchemaRegistryClient({"url": url, "ssl.ca.location": str(certs.ca),
                                   "basic.auth.user.info": f"ann:{USERS['ann']}"})
    schema_id = wait_until(lambda: _register(client, "secured-value", Schema('"string"', "AVRO")), 60,
                           "a registration through HTTPS and basic auth")
    assert client.get_schema(schema_id).schema_str == '"string"'
    anonymous = SchemaRegistryClient({"url": url, "ssl.ca.location": str(certs.ca)})
    with pytest.raises(SchemaRegistryError) as refused:
        anonymous.get_subjects()
    assert refused.value.http_status_code == 401


def test_plain_http_and_an_untrusted_certificate_are_refused(secured):
    url, _ = secured
    with pytest.raises(OSError):
        urllib.request.urlopen(url.replace("https://", "http://") + "/subjects", timeout=10).read()
    with pytest.raises(urllib.error.URLError) as untrusted:
        urllib.request.urlopen(url + "/subjects", timeout=10)  # the system's CAs do not know the test CA
    assert "CERTIFICATE_VERIFY_FAILED" in str(untrusted.value)


def test_the_broker_serves_its_registry_over_https_with_its_own_tls_settings(tmp_path):
    """eoslog.schema.registry.listen=https://...: the certificate of the broker's SASL_SSL listener, and
    basic authentication against its SCRAM users."""
    certs = make_certs(tmp_path / "certs", ())
    data_dir = tmp_path / "data"
    for user, password in USERS.items():
        CliRunner().invoke(users_group, ["add", user, "--data-dir", str(data_dir), "--password-file", "-"],
                           input=password + "\n")
    client_properties = tmp_path / "registry.properties"
    client_properties.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=registry\n"
                                 f"sasl.password={USERS['registry']}\nssl.ca.location={certs.ca}\n")
    registry_port = free_port()
    properties = {"listeners": f"SASL_SSL://127.0.0.1:{free_port()}",
                  "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
                  "ssl.keystore.location": str(certs.broker),
                  "eoslog.schema.registry.listen": f"https://127.0.0.1:{registry_port}",
                  "eoslog.schema.registry.basic.auth": "true",
                  "eoslog.schema.registry.command.config": str(client_properties)}
    with EmbeddedBroker(data_dir=data_dir, properties=properties):
        url = f"https://127.0.0.1:{registry_port}"
        assert request(url, certs, "/subjects")[0] == 401
        # elected before the client's first write: it backs off for seconds after a 50004
        wait_until(lambda: request(url, certs, "/eoslog/writer", "ann", USERS["ann"])[2].get("writer"), 60,
                   "the registry elected its writer")
        client = SchemaRegistryClient({"url": url, "ssl.ca.location": str(certs.ca),
                                       "basic.auth.user.info": f"ann:{USERS['ann']}"})
        schema_id = wait_until(lambda: _register(client, "served-value", Schema('"long"', "AVRO")), 60,
                               "a registration with the broker's registry")
        assert request(url, certs, f"/schemas/ids/{schema_id}", "ann", USERS["ann"])[2] == {"schema": '"long"'}


def test_https_needs_a_tls_listener(tmp_path):
    result = subprocess.run([sys.executable, "-m", "eoslog", "serve", "--data-dir", str(tmp_path / "data"),
                             "--listen", "127.0.0.1:0", "--schema-registry-listen", "https://127.0.0.1:0"],
                            check=False, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "SSL or SASL_SSL listener" in result.stderr, result.stderr


def _register(client, subject, schema):
    try:
        return client.register_schema(subject, schema)
    except SchemaRegistryError as exc:
        if exc.http_status_code == 401:
            raise
        return None


@pytest.mark.parametrize(("header", "expected"), [
    (b"Basic " + base64.b64encode(b"ann:p:w"), ("ann", "p:w")),  # the password may hold a colon
    (b"basic " + base64.b64encode(b"ann:"), ("ann", "")),
    (b"Basic " + base64.b64encode(b"ann"), None),
    (b"Basic " + base64.b64encode(b":pw"), None),
    (b"Basic not-base64!", None),
    (b"Bearer abc", None),
    (None, None),
])
def test_basic_credentials(header, expected):
    assert basic_credentials(header) == expected
