"""`eoslog console --command-config FILE` on a SASL_SSL listener: the console logs in as the configured
principal with the admin tools' client; without the file its pages say what is missing."""

from __future__ import annotations

import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Self

import pytest
from click.testing import CliRunner

from eoslog.testing.certs import make_certs
from eoslog.testing.embedded import EmbeddedBroker
from eoslog.testing.process import free_port
from eoslog.testing.wait import wait_until
from eoslog.tools.topics_cli import topics_group
from eoslog.tools.users_cli import users_group

pytestmark = pytest.mark.interop
USER, PASSWORD = "ops", "ops-secret"


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


class Console:
    def __init__(self, tmp_path: Path, *args: str) -> None:
        port_file = tmp_path / f"port-{len(list(tmp_path.glob('port-*')))}"
        self.process = subprocess.Popen([sys.executable, "-m", "eoslog", "console", "--listen", "127.0.0.1:0",
                                         "--port-file", str(port_file), *args], stderr=subprocess.DEVNULL)
        wait_until(lambda: port_file.exists() and port_file.read_text().strip(), 15, "the console binds")
        self.url = f"http://127.0.0.1:{port_file.read_text().strip()}"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.process.terminate()
        self.process.wait(10)


def test_the_console_logs_in_with_a_client_properties_file(tmp_path):
    certs = make_certs(tmp_path / "certs", ())
    data_dir = tmp_path / "data"
    result = CliRunner().invoke(users_group, ["add", USER, "--data-dir", str(data_dir), "--password-file", "-"],
                                input=PASSWORD + "\n")
    assert result.exit_code == 0, result.output
    port = free_port()
    properties = {"listeners": f"SASL_SSL://127.0.0.1:{port}",
                  "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
                  "ssl.keystore.location": str(certs.broker)}
    client = tmp_path / "client.properties"
    client.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                      f'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required '
                      f'username="{USER}" password="{PASSWORD}";\n'
                      f"ssl.truststore.location={certs.ca}\n")
    with EmbeddedBroker(data_dir=data_dir, properties=properties):
        secured = f"127.0.0.1:{port}"
        created = CliRunner().invoke(topics_group, ["create", "guarded", "--partitions", "2", "-b", secured,
                                                    "--command-config", str(client)])
        assert created.exit_code == 0, created.output
        with Console(tmp_path, "--bootstrap", secured, "--command-config", str(client)) as console:
            status, body = get(console.url + "/topics")
            assert status == 200 and 'data-topic="guarded"' in body
            status, body = get(console.url + "/topics/guarded")
            assert status == 200 and body.count("data-partition=") == 2
        with Console(tmp_path, "--bootstrap", secured) as console:
            status, body = get(console.url + "/topics")
            assert status == 502 and "--command-config" in body
