"""format("eoslog") over SASL_SSL, with real PySpark and a real broker process (issue 15).

The job carries its security the way a Spark Kafka job does, as ``kafka.*`` options; the source's
consumers, the sink's transactional producers and the driver's own transaction-group connection (the
exactly-once commit) all authenticate with SCRAM-SHA-512 over TLS. The broker has no other listener.
"""

from __future__ import annotations

import subprocess
import sys

import confluent_kafka
import confluent_kafka.admin
import pytest

from eoslog.testing.certs import make_certs
from eoslog.testing.process import BrokerProcess, free_port
from tests.interop.clients import poll_values

USER, PASSWORD = "spark-job", "spark-secret"
COUNT = 3000


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    root = tmp_path_factory.mktemp("spark-sasl")
    certs = make_certs(root / "certs", ())
    data_dir = root / "data"
    done = subprocess.run([sys.executable, "-m", "eoslog", "users", "add", USER, "--data-dir", str(data_dir),
                           "--mechanism", "SCRAM-SHA-512", "--password-file", "-"], input=PASSWORD + "\n",
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    port = free_port()
    properties = {"listeners": f"SASL_SSL://127.0.0.1:{port}",  # the only one
                  "sasl.enabled.mechanisms": "SCRAM-SHA-512", "ssl.keystore.location": str(certs.broker)}
    with BrokerProcess(data_dir=data_dir, port=port, properties=properties) as broker:
        yield broker, port, {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_SSL",
                             "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": USER, "sasl.password": PASSWORD,
                             "ssl.ca.location": str(certs.ca)}


@pytest.mark.parametrize("writer", ["native", "librdkafka"])
def test_source_and_exactly_once_sink_over_sasl_ssl(spark, secured, writer):
    _, _, client = secured
    source_topic, target_topic = f"sasl-in-{writer}", f"sasl-out-{writer}"
    admin = confluent_kafka.admin.AdminClient(client)
    for future in admin.create_topics([confluent_kafka.admin.NewTopic(t, 3)
                                       for t in (source_topic, target_topic)]).values():
        future.result(30)
    producer = confluent_kafka.Producer({**client, "transactional.id": f"seed-{writer}"})
    producer.init_transactions(30)
    for commit, prefix in ((False, "aborted"), (True, "committed")):
        producer.begin_transaction()
        for i in range(COUNT):
            producer.produce(source_topic, f"{prefix}-{i}".encode(), key=str(i).encode())
        producer.commit_transaction(30) if commit else producer.abort_transaction(30)

    options = {f"kafka.{k}": v for k, v in client.items()}
    source = spark.read.format("eoslog").options(**options).option("subscribe", source_topic).load()
    rows = source.select("key", "value")
    assert rows.count() == COUNT  # read_committed by default: the aborted half is not there
    # requireExactlyOnce=true: the commit must go through the broker's transaction groups, so the
    # driver's own connection to the coordinator authenticated too (and, with the native writer, the
    # tasks' own connections to the coordinator and the partition leaders).
    (rows.repartition(4).write.format("eoslog").options(**options).option("topic", target_topic)
     .option("requireExactlyOnce", "true").option("eoslog.writer", writer).mode("append").save())

    got = poll_values(client, target_topic, COUNT)
    assert sorted(got) == sorted(f"committed-{i}".encode() for i in range(COUNT))


@pytest.mark.parametrize("writer", ["native", "librdkafka"])
def test_a_job_with_a_wrong_password_fails_clearly(spark, secured, writer):
    _, _, client = secured
    options = {f"kafka.{k}": v for k, v in client.items()}
    options["kafka.sasl.password"] = "wrong"
    options["kafka.socket.timeout.ms"] = "5000"
    with pytest.raises(Exception, match="(?i)authentication"):
        (spark.createDataFrame([("v",)], "value string").write.format("eoslog").options(**options)
         .option("eoslog.writer", writer).option("topic", "sasl-out").option("requireExactlyOnce", "true")
         .mode("append").save())
