"""Option parsing: Spark's Kafka connector names, case-insensitive."""

import pytest

from eoslog.spark.options import OptionError, SinkOptions, SourceOptions, TypedValueOptions


def test_source_options_like_sparks_kafka_connector():
    o = SourceOptions.parse({"kafka.bootstrap.servers": "h:1", "subscribe": "a, b", "maxOffsetsPerTrigger": "1000",
                             "failOnDataLoss": "false", "includeHeaders": "true",
                             "kafka.key.deserializer": "org.apache.kafka.common.serialization.ByteArrayDeserializer",
                             "kafka.client.id": "me"})
    assert o.topics == ("a", "b")
    assert o.client == {"bootstrap.servers": "h:1", "client.id": "me"}  # Java-only settings dropped
    assert o.max_offsets_per_trigger == 1000
    assert o.isolation_level == "read_committed"  # the default, unlike Kafka's
    assert (o.fail_on_data_loss, o.include_headers) == (False, True)
    assert o.starting == "latest" and o.ending == "latest"


def test_batch_defaults_to_earliest_and_refuses_latest_start():
    assert SourceOptions.parse_batch({"kafka.bootstrap.servers": "h:1", "subscribe": "a"}).starting == "earliest"
    with pytest.raises(OptionError):
        SourceOptions.parse_batch({"kafka.bootstrap.servers": "h:1", "subscribe": "a", "startingOffsets": "latest"})


@pytest.mark.parametrize("bad", [
    {"subscribe": "a"},
    {"kafka.bootstrap.servers": "h:1"},
    {"kafka.bootstrap.servers": "h:1", "subscribe": "a", "maxOffsetsPerTrigger": "0"},
    {"kafka.bootstrap.servers": "h:1", "subscribe": "a", "kafka.isolation.level": "dirty"},
    {"kafka.bootstrap.servers": "h:1", "subscribePattern": "a.*"},
    {"kafka.bootstrap.servers": "h:1", "subscribe": "a", "endingOffsets": "earliest"},
])
def test_source_option_errors(bad):
    with pytest.raises(OptionError):
        SourceOptions.parse(bad)


def test_sink_options():
    o = SinkOptions.parse({"KAFKA.BOOTSTRAP.SERVERS": "h:1", "topic": "out", "kafka.transaction.timeout.ms": "9000"})
    assert o.client == {"bootstrap.servers": "h:1"}
    assert (o.topic, o.transaction_timeout_ms, o.sink_id, o.require_exactly_once) == ("out", 9000, "0", True)
    with pytest.raises(OptionError):
        SinkOptions.parse({"kafka.bootstrap.servers": "h:1", "sinkId": "a-b"})


def test_writer_option_chooses_the_task_writer():
    base = {"kafka.bootstrap.servers": "h:1", "topic": "t"}
    assert SinkOptions.parse(base).writer == "native"
    assert SinkOptions.parse({**base, "eoslog.writer": "LibRdKafka"}).writer == "librdkafka"
    assert "eoslog.writer" not in SinkOptions.parse({**base, "eoslog.writer": "native"}).client
    with pytest.raises(OptionError, match="eoslog.writer"):
        SinkOptions.parse({**base, "eoslog.writer": "fast"})


def test_reader_option_chooses_the_read_path():
    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    assert SourceOptions.parse(base).reader == "auto"
    assert SourceOptions.parse({**base, "eoslog.reader": "LIBRDKAFKA"}).reader == "librdkafka"
    with pytest.raises(OptionError, match="eoslog.reader"):
        SourceOptions.parse({**base, "eoslog.reader": "fast"})


def test_typed_value_options():
    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "pay"}
    assert SourceOptions.parse(base).typed_value is None
    o = SourceOptions.parse({**base, "schema.registry.url": "http://r:8081",
                             "schema.registry.basic.auth.user.info": "ann:pw", "avro.mode": "permissive"})
    assert o.typed_value == TypedValueOptions({"url": "http://r:8081", "basic.auth.user.info": "ann:pw"},
                                              "pay-value", "PERMISSIVE")
    assert o.client == {"bootstrap.servers": "h:1"}  # registry settings are not librdkafka's
    two = {**base, "subscribe": "a,b", "schema.registry.url": "http://r:8081", "value.subject": "shop.Payment"}
    assert SourceOptions.parse(two).typed_value.subject == "shop.Payment"
    sink = SinkOptions.parse({"kafka.bootstrap.servers": "h:1", "topic": "out", "schema.registry.url": "http://r"})
    assert sink.typed_value == TypedValueOptions({"url": "http://r"}, "out-value")


@pytest.mark.parametrize("bad, says", [
    ({"subscribe": "a,b", "schema.registry.url": "http://r"}, "value.subject is required"),
    ({"schema.registry.url": "http://r", "avro.mode": "lenient"}, "FAILFAST or PERMISSIVE"),
    ({"value.subject": "a-value"}, "value.subject needs schema.registry.url"),
])
def test_typed_value_option_errors(bad, says):
    with pytest.raises(OptionError, match=says):
        SourceOptions.parse({"kafka.bootstrap.servers": "h:1", "subscribe": "a", **bad})
