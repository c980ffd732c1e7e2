"""Shared fixtures for the Spark tests: one SparkSession and one embedded broker per module.

A SparkSession costs 6-8 s and ~1.2 GB, so it is created once per test session, lazily, and only for
the modules that ask for it.
"""

from __future__ import annotations

import os
import sys
import uuid

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from . import kafka_helpers


@pytest.fixture(scope="session")
def spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import eoslog.spark
    from eoslog.spark.daemon import SESSION_CONFIG

    # local[2,3]: two cores, and up to 3 attempts per task so retry tests can fail a first attempt.
    builder = (SparkSession.builder.master("local[2,3]").appName("eoslog-tests")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.memory", "1g"))
    for key, value in SESSION_CONFIG.items():  # as users get it: workers import pyspark's cached bytecode
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    eoslog.spark.register(session)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def broker():
    from eoslog.testing.embedded import EmbeddedBroker

    with EmbeddedBroker() as b:
        yield b


@pytest.fixture
def topic_name():
    return f"t-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def kafka(broker):
    return kafka_helpers.Kafka(broker.bootstrap)


@pytest.fixture(scope="module")
def registry(broker):
    """The schema registry in front of the module's broker, as ``eoslog schema-registry --bootstrap`` runs it
    (typed columns, spark/avro_values.py); tests use subjects of their own."""
    pytest.importorskip("fastavro")
    from eoslog.schema_registry.kafka_access import KafkaAccess
    from eoslog.schema_registry.server import RegistryServer
    from eoslog.testing.wait import wait_until

    server = RegistryServer(KafkaAccess(broker.bootstrap), "127.0.0.1:0", session_timeout_ms=6000).start()
    wait_until(lambda: server.registry.is_writer and server.registry._writer is not None, 30,
               "the only registry instance elected itself writer")
    yield server
    server.stop()
