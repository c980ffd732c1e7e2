"""``eoslog schemas`` against a real registry (conftest.py): subjects, versions, show, register, check
compatibility, config and delete, with the registry's own messages and a failing exit status when a
schema is refused."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from eoslog.schema_registry.schemas_cli import schemas_group

pytestmark = pytest.mark.interop

V1 = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]}
V2 = {**V1, "fields": V1["fields"] + [{"name": "note", "type": "string", "default": ""}]}
BROKEN = {**V1, "fields": [{"name": "id", "type": "int"}]}


@pytest.fixture
def schemas(registry, tmp_path):
    for name, schema in (("v1", V1), ("v2", V2), ("broken", BROKEN)):
        (tmp_path / f"{name}.avsc").write_text(json.dumps(schema))
    (tmp_path / "money.proto").write_text('syntax = "proto3";\npackage shop;\nmessage Money { int64 units = 1; }\n')
    (tmp_path / "invoice.proto").write_text('syntax = "proto3";\npackage shop;\nimport "shop/money.proto";\n'
                                            "message Invoice { shop.Money total = 1; }\n")

    def run(*args: str):
        result = CliRunner().invoke(schemas_group, ["--url", registry.url, *args], catch_exceptions=False)
        return result.exit_code, result.output
    return run, tmp_path


def test_register_evolve_check_and_delete(schemas):
    run, files = schemas
    code, first = run("register", "cli-orders-value", str(files / "v1.avsc"))
    assert code == 0 and first.strip().isdigit()
    assert run("register", "cli-orders-value", str(files / "v1.avsc")) == (0, first)  # the same id again
    assert run("check", "cli-orders-value", str(files / "v2.avsc")) == (0, "compatible\n")
    code, output = run("check", "cli-orders-value", str(files / "broken.avsc"))
    assert code == 1 and output.startswith("incompatible:") and "TYPE_MISMATCH" in output
    code, refused = run("register", "cli-orders-value", str(files / "broken.avsc"))
    assert code == 1 and "HTTP 409" in refused and "error code 409" in refused
    assert run("register", "cli-orders-value", str(files / "v2.avsc"))[0] == 0
    assert run("versions", "cli-orders-value") == (0, "1\n2\n")
    assert "cli-orders-value" in run("subjects", "--prefix", "cli-")[1].split()
    code, shown = run("show", "cli-orders-value", "1")
    assert code == 0 and json.loads(json.loads(shown)["schema"]) == V1
    assert run("config", "cli-orders-value", "--set", "full") == (0, "FULL\n")
    assert run("config", "cli-orders-value") == (0, "FULL\n")
    assert run("delete", "cli-orders-value", "--version", "1") == (0, "deleted cli-orders-value version(s) 1\n")
    assert run("versions", "cli-orders-value") == (0, "2\n")
    assert run("delete", "cli-orders-value") == (0, "deleted cli-orders-value version(s) 2\n")
    code, missing = run("versions", "cli-orders-value")
    assert code == 1 and "error code 40401" in missing
    assert run("delete", "cli-orders-value", "--permanent")[0] == 0


def test_protobuf_with_a_reference_under_a_subject_holding_a_slash(schemas):
    run, files = schemas
    assert run("register", "shop/money.proto", str(files / "money.proto"))[0] == 0
    code, output = run("register", "cli-invoices-value", str(files / "invoice.proto"),
                       "--reference", "shop/money.proto=shop/money.proto:1")
    assert code == 0, output
    shown = json.loads(run("show", "cli-invoices-value")[1])
    assert shown["schemaType"] == "PROTOBUF"
    assert shown["references"] == [{"name": "shop/money.proto", "subject": "shop/money.proto", "version": 1}]
    code, output = run("register", "x-value", str(files / "invoice.proto"), "--reference", "no-version")
    assert code == 2 and "NAME=SUBJECT:VERSION" in output


def test_the_command_is_registered(registry):
    result = subprocess.run([sys.executable, "-m", "eoslog", "schemas", "--url", registry.url, "subjects"],
                            check=False, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    unreachable = subprocess.run([sys.executable, "-m", "eoslog", "schemas", "--url", "http://127.0.0.1:1",
                                  "subjects"], check=False, capture_output=True, text=True, timeout=60)
    assert unreachable.returncode == 1 and "cannot reach the schema registry" in unreachable.stderr
