"""docs/security.md's ``<!-- doc-test: security -->`` blocks run against the broker of the page's "Client
configurations" (SSL with client certificates, SASL_SSL and SASL_PLAINTEXT with PLAIN and SCRAM-SHA-512),
started as a reader would: the test CA's files from ``python -m eoslog.testing.certs`` (clients alice and
admin), the users made offline with ``eoslog users add --data-dir`` (alice's password ``alice-secret``,
admin's ``the admin password``, as the page's files have them), and ``eoslog serve --config`` with the
authorizer of the overview (``super.users=User:admin``) and the TLS section's mapping rule, which makes the
admin certificate ``User:admin``. It allows everyone on resources without ACLs, so the client examples
write once the ACL example has removed its ACLs. The page's ports 9093/9094/9095 stand for free ones."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from doc_blocks import blocks
from doc_runner import ROOT, run_blocks, shell_env, with_a_wrong_line

from eoslog.tools.local.process import free_port

pytestmark = pytest.mark.interop
PAGE = ROOT / "docs/security.md"

BROKER_PROPERTIES = """\
log.dirs=data
listeners=SSL://127.0.0.1:{ssl},SASL_SSL://127.0.0.1:{sasl_ssl},SASL_PLAINTEXT://127.0.0.1:{sasl_plaintext}
ssl.keystore.location=certs/broker.pem
ssl.truststore.location=certs/ca.pem
listener.name.ssl.ssl.client.auth=required
listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512
ssl.principal.mapping.rules=RULE:^CN=([^,]+),.*$/$1/L,DEFAULT
authorizer.class.name=kafka.security.authorizer.AclAuthorizer
super.users=User:admin
allow.everyone.if.no.acl.found=true
"""


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    directory = tmp_path_factory.mktemp("doc-security")
    env = shell_env(tmp_path_factory.mktemp("doc-bin"), "unused")

    def run(*args: str, stdin: str | None = None) -> None:
        subprocess.run([sys.executable, "-m", *args], cwd=directory, env=env, input=stdin, text=True,
                       check=True, capture_output=True)

    run("eoslog.testing.certs", "certs", "--client", "alice", "--client", "admin")
    run("eoslog", "users", "add", "admin", "--mechanism", "SCRAM-SHA-512", "--data-dir", "data", "--password-file",
        "-", stdin="the admin password\n")
    run("eoslog", "users", "add", "alice", "--data-dir", "data", "--password-file", "-", stdin="alice-secret\n")
    ports = {"ssl": free_port(), "sasl_ssl": free_port(), "sasl_plaintext": free_port()}
    (directory / "broker.properties").write_text(BROKER_PROPERTIES.format(**ports))
    port_file = directory / "port"
    with open(directory / "broker.log", "wb") as log:
        broker = subprocess.Popen([sys.executable, "-m", "eoslog", "serve", "--config", "broker.properties",
                                   "--port-file", str(port_file)], cwd=directory, env=env, stdout=log,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not port_file.exists():
            assert broker.poll() is None and time.monotonic() < deadline, (directory / "broker.log").read_text()
            time.sleep(0.05)
        swaps = {f"127.0.0.1:{page}": f"127.0.0.1:{ports[name]}"
                 for page, name in ((9093, "ssl"), (9094, "sasl_ssl"), (9095, "sasl_plaintext"))}
        yield directory, {**env, "EOSLOG_DOC_TEST_BOOTSTRAP": f"127.0.0.1:{ports['ssl']}"}, swaps
    finally:
        broker.terminate()
        broker.wait(timeout=60)


def test_the_security_page_runs_as_written(secured):
    """One test, so one broker; it first shows it can fail (a block with a line changed)."""
    directory, env, swaps = secured
    page = blocks(PAGE, "security")
    drifted = with_a_wrong_line(next(block for block in page if block.language != "python"))
    with pytest.raises(AssertionError, match=r"security\.md:\d+: `printf 'bob-secret"):
        run_blocks([drifted], env, directory, swaps)
    run_blocks(page, env, directory, swaps)
