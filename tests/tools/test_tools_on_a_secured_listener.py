"""The topic, console and records tools on a SASL_SSL listener, given the same `--command-config` file,
written in the Java client's spelling (sasl.jaas.config, a PEM ssl.truststore.location): the admin tools
read it with eoslog's own client, the console tools hand it to librdkafka; a transactional produce and a
read_committed group consume go through, and without the file the tools say what is missing."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from eoslog.testing.certs import make_certs
from eoslog.testing.embedded import EmbeddedBroker
from eoslog.testing.process import free_port
from eoslog.tools.console_cli import consume_command, produce_command
from eoslog.tools.records_cli import records_group
from eoslog.tools.topics_cli import topics_group
from eoslog.tools.users_cli import users_group

pytestmark = pytest.mark.interop
USER, PASSWORD = "ops", "ops-secret"


def run(command, *args: str, input: str | None = None, code: int = 0):
    result = CliRunner().invoke(command, list(args), input=input)
    assert result.exit_code == code, result.output
    return result


def test_tools_log_in_with_a_client_properties_file(tmp_path):
    certs = make_certs(tmp_path / "certs", ())
    data_dir = tmp_path / "data"
    run(users_group, "add", USER, "--data-dir", str(data_dir), "--password-file", "-", input=PASSWORD + "\n")
    port = free_port()
    properties = {"listeners": f"PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:{port}",
                  "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
                  "ssl.keystore.location": str(certs.broker)}
    client = tmp_path / "client.properties"
    client.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                      f'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required '
                      f'username="{USER}" password="{PASSWORD}";\n'
                      f"ssl.truststore.location={certs.ca}\n")
    with EmbeddedBroker(data_dir=data_dir, properties=properties):
        secured = f"127.0.0.1:{port}"
        run(topics_group, "create", "s", "--partitions", "1", "-b", secured, "--command-config", str(client))
        run(produce_command, "s", "--transactional-id", "secured-tx", "-b", secured, "--command-config", str(client),
            input="one\ntwo\n")
        out = run(consume_command, "s", "--group", "secured", "--from-beginning", "--isolation-level",
                  "read_committed", "--max-messages", "2", "--json", "-b", secured, "--command-config", str(client))
        assert [json.loads(line)["value"] for line in out.stdout.splitlines()] == ["one", "two"]
        deleted = json.loads(run(records_group, "delete-before", "--topic", "s", "--offset", "1", "--json",
                                 "-b", secured, "--command-config", str(client)).output)
        assert deleted == [{"topic": "s", "partition": 0, "requested": 1, "low_watermark": 1, "error": ""}]

        refused = run(topics_group, "list", "-b", secured, code=1)
        assert "give the client settings with --command-config" in refused.output
        bad = tmp_path / "bad.properties"
        bad.write_text("security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\n")
        wrong = run(produce_command, "s", "-b", secured, "--command-config", str(bad), input="x\n", code=2)
        assert "sasl.mechanism=GSSAPI" in wrong.output
