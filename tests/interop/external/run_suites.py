"""Run a Kafka client's own integration suite against eoslog (issue 41; results in docs/clients.md,
"External suites"). Not part of eoslog's suite: each run takes minutes.

    python tests/interop/external/run_suites.py confluent-kafka --source CHECKOUT [--work DIR] [-- TESTS]
    python tests/interop/external/run_suites.py aiokafka --source CHECKOUT [--work DIR] [-- TESTS]

(TESTS, pytest's paths or node ids, replace the default selection.)

CHECKOUT is the client's repository at the tag of the installed release (``git clone --depth 1 --branch
v2.16.1 https://github.com/confluentinc/confluent-kafka-python``, ``... --branch v0.14.0
https://github.com/aio-libs/aiokafka``); the tests run against the installed client, never its sources.
The script copies the tests into the work directory, appends this directory's conftest additions (which
point the suite's fixtures at eoslog instead of trivup's or Docker's Kafka), installs the suite's
test-only packages there with pip (``--target``, so this interpreter's environment is untouched), starts
the eoslog brokers the suite expects and runs pytest:

- confluent-kafka: ``tests/integration`` without ``schema_registry`` (it needs Confluent's registry
  server), with ``BROKERS`` (the suite's own external-cluster switch) naming a plain broker with an
  authorizer that allows what no ACL covers, and ``EOSLOG_SASL_BROKERS`` a SASL_PLAINTEXT/PLAIN one; run
  it once more with ``TEST_CONSUMER_GROUP_PROTOCOL=consumer`` in the environment for KIP-848;
- aiokafka: ``tests`` without ``test_sasl.py`` (its fixtures run kafka-acls.sh, kafka-configs.sh and a
  KDC inside the Docker container), against a broker with ``num.partitions=2`` as the suite's image has,
  a PLAINTEXT listener and an SSL one with client certificates from eoslog's test CA.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]

SUITES = {
    "confluent-kafka": {
        "copy": ["tests"],
        "conftest": "tests/integration/conftest.py",
        "addition": "confluent_kafka_conftest.py",
        # trivup is imported by the suite's fixtures even for an external cluster; it needs pkg_resources
        "packages": [["--no-deps", "trivup", "setuptools<81", "python_jwt"], ["jwcrypto"]],
        "paths": ["tests/integration"],
        "pytest": ["--ignore", "tests/integration/schema_registry", "--timeout", "120"],
    },
    "aiokafka": {
        "copy": ["tests", "pyproject.toml"],
        "conftest": "tests/conftest.py",
        "addition": "aiokafka_conftest.py",
        "packages": [["--no-deps", "pytest-asyncio==1.3.0", "pytest-mock", "docker"]],
        "paths": ["tests"],
        "pytest": ["--ignore", "tests/test_sasl.py", "--docker-image",
                   "eoslog:2.13_4.0.0", "-o", "asyncio_default_fixture_loop_scope=function", "--timeout", "120"],
    },
}

# What the suites' own test brokers are given: an authorizer that allows what no ACL covers (confluent-kafka's
# trivup cluster), aiokafka's num.partitions=2, and confluent-kafka's broker_conf (tests/common): a 1 s share
# lock so its redelivery tests wait 1 s, not 30 (the replication factors it sets are eoslog's defaults on a
# single node).
SUITE_BROKER = ["--set", "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
                "--set", "allow.everyone.if.no.acl.found=true", "--set", "group.initial.rebalance.delay.ms=0",
                "--set", "group.share.record.lock.duration.ms=1000",
                "--set", "group.share.min.record.lock.duration.ms=1000"]
PLAIN_BROKER = [*SUITE_BROKER, "--set", "super.users=User:ANONYMOUS", "--set", "num.partitions=2"]


def _free_port() -> int:
    sys.path.insert(0, str(ROOT / "src"))
    from eoslog.tools.local.process import free_port

    return free_port()


def _eoslog(*args: str, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen([sys.executable, "-m", "eoslog", *args], env=env, **kwargs)


def _serve(work: Path, name: str, protocols: list[str], extra: list[str]) -> tuple[subprocess.Popen, list[str]]:
    """One broker with a listener per protocol (named as the protocol), started and listening."""
    data, port_file = work / f"{name}-data", work / f"{name}.port"
    addresses = [f"127.0.0.1:{_free_port()}" for _ in protocols]
    listeners = ",".join(f"{protocol}://{address}" for protocol, address in zip(protocols, addresses))
    with open(work / f"{name}.log", "wb") as log:
        process = _eoslog("serve", "--data-dir", str(data), "--set", f"listeners={listeners}",
                          "--port-file", str(port_file), *extra, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while not port_file.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the {name} broker did not start: see {work / f'{name}.log'}")
        time.sleep(0.05)
    return process, addresses


def _test_certificates(work: Path) -> tuple[Path, list[str]]:
    """aiokafka's SSL tests read ssl_cert/ca.crt, client.crt and client.key (made by its gen-ssl-certs.sh
    in Docker); eoslog's test CA makes the same kind of files. The broker side: its listener settings."""
    made = work / "certs"
    subprocess.run([sys.executable, "-m", "eoslog.testing.certs", str(made), "--client", "client"], check=True,
                   capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    folder = work / "ssl_cert"
    folder.mkdir()
    for source, target in (("ca.pem", "ca.crt"), ("client.pem", "client.crt"), ("client.key", "client.key")):
        shutil.copy(made / source, folder / target)
    return folder, ["--set", f"ssl.keystore.location={made / 'broker.pem'}",
                    "--set", f"ssl.truststore.location={made / 'ca.pem'}", "--set", "ssl.client.auth=required"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("suite", choices=sorted(SUITES))
    parser.add_argument("--source", type=Path, required=True, help="the client's repository at its release tag")
    parser.add_argument("--work", type=Path, default=None, help="default: /tmp/eoslog-external-SUITE")
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    options = parser.parse_args(argv[:len(argv) - len(extra) - (1 if "--" in argv else 0)])
    suite = SUITES[options.suite]
    work = (options.work or Path(f"/tmp/eoslog-external-{options.suite}")).resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    for part in suite["copy"]:
        source = options.source / part
        (shutil.copytree if source.is_dir() else shutil.copy)(source, work / part)
    with open(work / suite["conftest"], "a") as conftest:
        conftest.write("\n\n" + (HERE / suite["addition"]).read_text())
    site = work / "site"
    for packages in suite["packages"]:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", str(site), *packages], check=True)

    brokers: list[subprocess.Popen] = []
    try:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(work)])}
        if options.suite == "aiokafka":
            folder, tls = _test_certificates(work)
            plain, (bootstrap, ssl_address) = _serve(work, "plain", ["PLAINTEXT", "SSL"], PLAIN_BROKER + tls)
            env.update(EOSLOG_SSL_FOLDER=str(folder), EOSLOG_SSL_PORT=ssl_address.rsplit(":", 1)[1])
        else:
            plain, (bootstrap,) = _serve(work, "plain", ["PLAINTEXT"], PLAIN_BROKER)
        brokers.append(plain)
        env.update(BROKERS=bootstrap, EOSLOG_BOOTSTRAP=bootstrap)
        if options.suite == "confluent-kafka":
            users = _eoslog("users", "add", "sasl_user", "--data-dir", str(work / "sasl-data"), "--password-file", "-",
                            stdin=subprocess.PIPE)
            users.communicate(b"sasl_user\n")
            sasl, (env["EOSLOG_SASL_BROKERS"],) = _serve(work, "sasl", ["SASL_PLAINTEXT"], [
                *SUITE_BROKER, "--set", "sasl.enabled.mechanisms=PLAIN"])
            brokers.append(sasl)
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:warnings", "-q", "-rfEs",
                   *suite["pytest"], *(extra or suite["paths"])]
        print(f"eoslog at {bootstrap}; running {' '.join(command[1:])} in {work}", flush=True)
        return subprocess.run(command, cwd=work, env=env, check=False).returncode
    finally:
        for process in brokers:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)


if __name__ == "__main__":
    sys.exit(main())
