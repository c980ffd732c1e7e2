"""`eoslog produce` and `eoslog consume`: Kafka's console producer and consumer, on confluent-kafka
(librdkafka) because a consumer group member and a transactional producer are whole client state machines
that eoslog's admin wire code does not have. confluent-kafka comes with the ``console`` extra.

    printf 'k1:hello\\nk2:world\\n' | eoslog produce orders --key-separator :
    echo '{"key": "k", "value": "v", "headers": {"h": "1"}}' | eoslog produce orders --json
    eoslog consume orders --from-beginning --isolation-level read_committed --max-messages 10 --json

``--command-config`` takes the same client properties file as the other tools; its security settings
are handed to librdkafka, which reads the same names (a Java-only truststore path is mapped to its own).
"""

from __future__ import annotations

import base64
import io
import json
import os
import sys
import time
import uuid

import click

from eoslog.tools.common import bootstrap_option, progress

PASSED_THROUGH = ("security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password",
                  "ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
                  "ssl.endpoint.identification.algorithm")
# librdkafka stops fetching a partition for fetch.queue.backoff.ms (default 1 s) whenever its pre-fetch
# queue is full (queued.min.messages, 100,000), so draining a backlog of small records stalled for a
# second at a time (docs/benchmarks.md "Consume at 100 B"). The console consumer prints as fast as it
# can read, so a short back-off is what it wants; a --command-config that sets one wins.
CONSOLE_FETCH_QUEUE_BACKOFF_MS = "20"
CONSUMER_PASSED_THROUGH = ("fetch.queue.backoff.ms",)


def _confluent_kafka():
    # Without the console extra the import fails, and the CLI turns that into its one-line hint
    # (tools/extras.py).
    import confluent_kafka

    return confluent_kafka


def client_config(bootstrap: str, command_config: str | None, consumer: bool = False) -> dict[str, str]:
    """librdkafka settings: the bootstrap list and the security settings of a client properties file;
    for a consumer also its fetch back-off (CONSOLE_FETCH_QUEUE_BACKOFF_MS unless the file sets one)."""
    config = {"bootstrap.servers": bootstrap}
    if consumer:
        config["fetch.queue.backoff.ms"] = CONSOLE_FETCH_QUEUE_BACKOFF_MS
    if command_config is None:
        return config
    from pathlib import Path

    from eoslog.security.client import ClientSecurity, ClientSecurityError
    from eoslog.security.jaas import jaas_option
    from eoslog.security.properties import read_properties

    properties = read_properties(Path(command_config))
    try:
        ClientSecurity.from_properties(properties)  # the same checks, and messages, as the other tools
    except ClientSecurityError as exc:
        raise click.BadParameter(str(exc), param_hint="--command-config") from exc
    passed = PASSED_THROUGH + (CONSUMER_PASSED_THROUGH if consumer else ())
    config.update({k: v for k, v in properties.items() if k in passed})
    if "ssl.truststore.location" in properties and "ssl.ca.location" not in config:
        config["ssl.ca.location"] = properties["ssl.truststore.location"]  # PEM truststores only
    if "ssl.keystore.location" in properties and "ssl.certificate.location" not in config:
        config["ssl.certificate.location"] = properties["ssl.keystore.location"]
    jaas = properties.get("sasl.jaas.config")
    if jaas and "sasl.username" not in config:
        config["sasl.username"], config["sasl.password"] = jaas_option(jaas, "username"), jaas_option(jaas, "password")
    return config


def _command_config_option(command):
    return click.option("--command-config", type=click.Path(exists=True, dir_okay=False), default=None,
                        help="Client properties for a secured listener (security.protocol, sasl.*, ssl.*).")(command)


# ---- produce ------------------------------------------------------------------------------------

def parse_line(line: str, as_json: bool, key_separator: str | None):
    """(key, value, headers, partition) of one input line."""
    if as_json:
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise click.ClickException(f"not a JSON object: {line!r} ({exc})") from None
        if not isinstance(record, dict):
            raise click.ClickException(f"not a JSON object: {line!r}")
        headers = record.get("headers") or {}
        return (record.get("key"), record.get("value"), [(str(k), None if v is None else str(v))
                                                          for k, v in headers.items()], record.get("partition"))
    if key_separator is not None:
        key, sep, value = line.partition(key_separator)
        if not sep:
            raise click.ClickException(f"no key separator {key_separator!r} in {line!r}")
        return key, value, [], None
    return None, line, [], None


@click.command("produce")
@click.argument("topic")
@click.option("--key-separator", default=None, help="Each line is KEY<SEP>VALUE.")
@click.option("--json", "as_json", is_flag=True,
              help='Each line is {"key", "value", "headers": {...}, "partition"} (all but value optional).')
@click.option("--header", "headers", multiple=True, metavar="NAME=VALUE", help="Added to every record (repeatable).")
@click.option("--partition", type=int, default=None, help="Write every record to this partition.")
@click.option("--acks", type=click.Choice(["0", "1", "all"]), default="all", show_default=True)
@click.option("--transactional-id", default=None, help="Write all the input in one transaction, committed at the end.")
@click.option("--input", "input_file", type=click.File("r"), default="-", show_default=True, help="Read lines from here.")
@bootstrap_option
@_command_config_option
def produce_command(topic, key_separator, as_json, headers, partition, acks, transactional_id, input_file, bootstrap,
                    command_config) -> None:
    """Write each line of the input to TOPIC as one record."""
    ck = _confluent_kafka()
    fixed_headers = []
    for item in headers:
        name, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"expected NAME=VALUE, got {item!r}", param_hint="--header")
        fixed_headers.append((name, value))
    config = client_config(bootstrap, command_config) | {"acks": acks, "enable.idempotence": acks == "all"}
    if transactional_id:
        config["transactional.id"] = transactional_id
    failures: list[str] = []

    def delivered(err, _msg) -> None:
        if err is not None:
            failures.append(str(err))

    producer = ck.Producer(config)
    bar, task = progress(None, f"producing to {topic}")
    try:
        if transactional_id:
            producer.init_transactions(30)
            producer.begin_transaction()
        count = 0
        with bar:
            for line in input_file:
                line = line.rstrip("\r\n")
                if not line:
                    continue
                key, value, line_headers, line_partition = parse_line(line, as_json, key_separator)
                target = line_partition if line_partition is not None else partition
                extra = {} if target is None else {"partition": target}
                while True:
                    try:
                        producer.produce(topic, value=value, key=key, headers=fixed_headers + line_headers,
                                         on_delivery=delivered, **extra)
                        break
                    except BufferError:  # the local queue is full: let deliveries drain it
                        producer.poll(0.1)
                producer.poll(0)
                count += 1
                bar.advance(task)
        if transactional_id:
            producer.commit_transaction(60)
        elif producer.flush(60):
            failures.append("timed out waiting for deliveries")
    except ck.KafkaException as exc:
        raise click.ClickException(f"produce to {topic}: {exc.args[0]}") from None
    if failures:
        raise click.ClickException(f"{len(failures)} records not written to {topic}: {failures[0]}")
    click.echo(f"wrote {count} record{'' if count == 1 else 's'} to {topic}"
               + (f" in a transaction ({transactional_id})" if transactional_id else ""), err=True)


# ---- consume ------------------------------------------------------------------------------------

def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "backslashreplace")


def record_json(message) -> dict:
    """One JSON line: bytes that are not UTF-8 are given as base64 under ``key_base64``/``value_base64``."""
    out = {"topic": message.topic(), "partition": message.partition(), "offset": message.offset(),
           "timestamp": message.timestamp()[1]}
    for name, data in (("key", message.key()), ("value", message.value())):
        try:
            out[name] = None if data is None else data.decode("utf-8")
        except UnicodeDecodeError:
            out[f"{name}_base64"] = base64.b64encode(data).decode()
    out["headers"] = [[k, _text(v)] for k, v in (message.headers() or [])]
    return out


def _commit(ck, consumer, topic: str, printed: dict[int, int]) -> None:
    """Commits the offsets after what was printed, not the consumer's position (it may have been handed a
    record the pipe no longer took)."""
    try:
        consumer.commit(offsets=[ck.TopicPartition(topic, p, o) for p, o in sorted(printed.items())],
                        asynchronous=False)
    except ck.KafkaException as exc:
        raise click.ClickException(f"committing the group's offsets: {exc.args[0]}") from None


def _silence_stdout() -> None:
    """After the reader of a pipe left, point stdout at /dev/null, so that the interpreter's last flush at
    exit does not fail again with a traceback."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        pass  # not a real file descriptor (a test runner's buffer): nothing left to flush


@click.command("consume")
@click.argument("topic")
@click.option("--group", default=None,
              help="Consume as a member of this group and commit what was printed; without it, read every "
                   "partition with no group and commit nothing.")
@click.option("--from-beginning", is_flag=True, help="Start at the log start where nothing is committed.")
@click.option("--isolation-level", type=click.Choice(["read_committed", "read_uncommitted"]),
              default="read_uncommitted", show_default=True)
@click.option("--max-messages", type=int, default=None, help="Stop after this many records.")
@click.option("--timeout-ms", type=int, default=None, help="Stop when no record arrives for this long.")
@click.option("--print-key", is_flag=True, help="KEY<TAB>VALUE instead of VALUE.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object a line: topic, partition, offset, "
              "timestamp, key, value, headers.")
@bootstrap_option
@_command_config_option
def consume_command(topic, group, from_beginning, isolation_level, max_messages, timeout_ms, print_key, as_json,
                    bootstrap, command_config) -> None:
    """Print TOPIC's records, one a line."""
    ck = _confluent_kafka()
    config = client_config(bootstrap, command_config, consumer=True) | {
        "group.id": group or f"eoslog-console-{uuid.uuid4().hex[:12]}", "enable.auto.commit": False,
        "isolation.level": isolation_level, "auto.offset.reset": "earliest" if from_beginning else "latest",
        "enable.partition.eof": False}
    try:
        consumer = ck.Consumer(config)
    except ck.KafkaException as exc:  # a value librdkafka refuses, e.g. from --command-config
        raise click.ClickException(f"consumer settings: {exc.args[0].str()}") from None
    count, last_seen = 0, time.monotonic()
    printed: dict[int, int] = {}  # partition -> the offset after the last record printed: what a group commits
    try:
        if group:
            consumer.subscribe([topic])
        else:
            partitions = consumer.list_topics(topic, timeout=30).topics[topic]
            if partitions.error is not None:
                raise click.ClickException(f"topic {topic}: {partitions.error.str()}")
            start = ck.OFFSET_BEGINNING if from_beginning else ck.OFFSET_END
            consumer.assign([ck.TopicPartition(topic, p, start) for p in sorted(partitions.partitions)])
        while max_messages is None or count < max_messages:
            message = consumer.poll(0.2)
            if message is None:
                if timeout_ms is not None and (time.monotonic() - last_seen) * 1000 >= timeout_ms:
                    break
                continue
            if message.error():
                if message.error().fatal() or not message.error().retriable():
                    raise click.ClickException(f"consume {topic}: {message.error().str()}")
                continue
            last_seen = time.monotonic()
            if as_json:
                line = json.dumps(record_json(message))
            elif print_key:
                line = f"{_text(message.key())}\t{_text(message.value())}"
            else:
                line = _text(message.value()) or ""
            try:
                click.echo(line)
            except BrokenPipeError:  # `eoslog consume ... | head`: the reader has what it wanted
                _silence_stdout()
                break
            count += 1
            printed[message.partition()] = message.offset() + 1
            if group and count % 1000 == 0:
                _commit(ck, consumer, topic, printed)
    except KeyboardInterrupt:
        pass
    finally:
        if group and printed:
            _commit(ck, consumer, topic, printed)
        consumer.close()
    click.echo(f"processed {count} record{'' if count == 1 else 's'}", err=True)
