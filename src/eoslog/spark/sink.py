"""The sink of ``format("eoslog")``: exactly-once micro-batches through transaction groups.

Tasks (executors) prepare one Kafka transaction each (:mod:`task_writer`); the driver's
``commit(messages, batchId)`` asks the broker, in one atomic CommitTransactionGroup, to commit them all
unless batch ``batchId`` of this (sink, query) is already committed — then they are aborted. A replayed
batch is therefore never published twice, and a micro-batch becomes visible all at once. Everything
else under the query's transactional-id prefix is aborted by name in the same request; ``abort()``
aborts the batch's prefix by name (Spark may hand it ``None`` messages). See docs/spark.md.

Where things run: ``write()`` in executor tasks on a pickled writer; ``commit``/``abort`` in a fresh
driver-side process with a freshly built streaming writer, so nothing may be remembered between them
except through the commit messages and the broker. The query id is taken from the messages, or from
the checkpoint's ``metadata`` file when no task wrote anything.

Without the broker extension the sink refuses to commit (``requireExactlyOnce``, default true). With
``requireExactlyOnce=false`` it commits each task's transaction on its own with EndTxn: every task's
rows appear all-or-nothing, but a batch replayed after its commit is written again (at-least-once).
"""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path
from urllib.parse import urlparse

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter

from eoslog.client.txn_groups import TxnGroupClient, TxnMember, Unsupported
from eoslog.security.client import ClientSecurityError
from eoslog.spark import faults
from eoslog.spark.options import OptionError, SinkOptions
from eoslog.spark.task_writer import (
    SinkCommitMessage,
    colocated_transactional_id,
    group_name,
    transactional_id,
    write_transaction,
)

log = logging.getLogger(__name__)


def _check_schema(schema, options: SinkOptions) -> None:
    from pyspark.sql.types import StructType

    names = {f.name for f in schema.fields}
    if "value" not in names:
        raise OptionError("the eoslog sink needs a 'value' column (binary or string)")
    if options.topic is None and "topic" not in names:
        raise OptionError("the eoslog sink needs a 'topic' option or a 'topic' column")
    typed = isinstance(schema["value"].dataType, StructType)
    if typed and options.typed_value is None:
        raise OptionError("a struct 'value' column needs schema.registry.url (and value.subject unless the topic "
                          "option names the subject <topic>-value) to be encoded; or write binary or string")
    if options.typed_value is not None and not typed:
        raise OptionError("with schema.registry.url the sink's 'value' column must be a struct to encode")


def _value_schema(options: SinkOptions):
    """The subject's latest version, asked on the driver once per writer: every task of a batch encodes
    under the same schema id."""
    typed = options.typed_value
    if typed is None:
        return None
    from eoslog.spark.avro_values import registered

    value_schema, _ = registered(typed.registry, typed.subject, typed.mode)
    return value_schema


def _encoded(iterator, value_schema):
    """The task's Arrow batches with the struct ``value`` column encoded to the registry's wire format."""
    if value_schema is None:
        yield from iterator
        return
    import pyarrow as pa

    from eoslog.spark.avro_values import encode

    for batch in iterator:
        index = batch.schema.get_field_index("value")
        yield batch.set_column(index, "value", pa.array(encode(value_schema, batch.column(index)), pa.binary()))


def _members(messages) -> list[TxnMember]:
    return [TxnMember(m.transactional_id, m.producer_id, m.producer_epoch)
            for m in messages if isinstance(m, SinkCommitMessage) and m.transactional_id is not None]


def _groups(messages) -> set[str]:
    return {m.group_name for m in messages if isinstance(m, SinkCommitMessage)}


def query_id_from_checkpoint(checkpoint_location: str | None) -> str | None:
    """The query id Spark keeps in ``<checkpoint>/metadata`` (a local or file: checkpoint only)."""
    if not checkpoint_location:
        return None
    parsed = urlparse(checkpoint_location)
    path = Path(parsed.path if parsed.scheme in ("file", "") else "")
    try:
        first = (path / "metadata").read_text().splitlines()[0]
        return json.loads(first)["id"]
    except (OSError, IndexError, KeyError, ValueError):
        return None


_TRANSACTION_STATE_WAIT_S = 30


def _transaction_state_partitions(options: SinkOptions, group: str) -> int | None:
    """Asked on the driver, pickled into the tasks (see colocated_transactional_id). Spark builds the
    streaming writer again for every micro-batch, so this runs at every batch, a broker kill included:
    the client asks any broker, and None here means no broker answered for the whole wait."""
    try:
        with TxnGroupClient(options.client["bootstrap.servers"], timeout_s=_TRANSACTION_STATE_WAIT_S,
                            security=options.security()) as client:
            if not client.supported():
                return None
            partitions = client.transaction_state_partitions(group)
            if partitions is None:  # on a cluster, group commits then fail for members coordinated elsewhere
                log.warning("eoslog sink: the broker named no partitions of __transaction_state within %d s; "
                            "task transactional ids are not colocated with their group", _TRANSACTION_STATE_WAIT_S)
            return partitions
    except ClientSecurityError:
        raise  # a wrong password or certificate fails the query here, before any task waits on it
    except Exception:
        log.warning("eoslog sink: cannot learn __transaction_state's partitions", exc_info=True)
        return None


class _Committer:
    """The driver half, shared by batch and streaming writers."""

    options: SinkOptions

    def _client(self) -> TxnGroupClient:
        return TxnGroupClient(self.options.client["bootstrap.servers"], security=self.options.security())

    def _commit(self, group: str | None, sequence: int, messages) -> None:
        members = _members(messages)
        if len(_groups(messages)) > 1:
            raise RuntimeError(f"commit messages of several queries: {_groups(messages)}")
        if group is None:
            return  # no task ran to completion with data, and no query id to clean up under
        with self._client() as client:
            if client.supported():
                faults.reached("commit-before", sequence)
                response = client.commit(group, sequence, members, abort_prefix=f"{group}-")
                faults.reached("commit-after", sequence)
                log.info("eoslog sink: %s batch %d: %s (%d members, %d aborted by prefix)", group, sequence,
                         "already committed" if response.already_committed else "committed",
                         len(members), response.aborted_by_prefix)
                return
            if self.options.require_exactly_once:
                raise Unsupported(f"the broker at {client.bootstrap} lacks the transaction-group APIs "
                                  "(docs/spark.md); set requireExactlyOnce=false for per-task commits",
                                  35)
        from eoslog.spark.end_txn import end_transaction

        faults.reached("commit-before", sequence)
        for member in members:
            end_transaction(self.options.client["bootstrap.servers"], member, commit=True,
                                security=self.options.security())
        faults.reached("commit-after", sequence)

    def _abort(self, prefix: str | None, messages, group: str | None = None) -> None:
        with self._client() as client:
            if client.supported():
                if prefix is not None:
                    client.abort_by_prefix(prefix, coordinator_key=group)
                return
        from eoslog.spark.end_txn import end_transaction

        for member in _members(messages):
            try:
                end_transaction(self.options.client["bootstrap.servers"], member, commit=False,
                                    security=self.options.security())
            except Exception:
                log.warning("eoslog sink: could not abort %s", member.transactional_id, exc_info=True)


class EoslogStreamWriter(_Committer, DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions, schema, checkpoint_location: str | None = None) -> None:
        _check_schema(schema, options)
        self.options = options
        self.checkpoint_location = checkpoint_location
        self.value_schema = _value_schema(options)
        self.transaction_state_partitions = _transaction_state_partitions(options, f"eoslog-sink-{options.sink_id}")

    def write(self, iterator):
        from pyspark import TaskContext

        ctx = TaskContext.get()
        batch_id = int(ctx.getLocalProperty("streaming.sql.batchId"))
        query_id = ctx.getLocalProperty("sql.streaming.queryId")
        o = self.options
        return write_transaction(
            _encoded(iterator, self.value_schema), client=o.client, topic_option=o.topic,
            txn_id=colocated_transactional_id(transactional_id(o.sink_id, query_id, batch_id, ctx.partitionId()),
                                              group_name(o.sink_id, query_id), self.transaction_state_partitions),
            group=group_name(o.sink_id, query_id), partition_id=ctx.partitionId(),
            attempt=ctx.attemptNumber(), transaction_timeout_ms=o.transaction_timeout_ms, batch_id=batch_id,
            writer=o.writer, security=o.security())

    def _group(self, messages) -> str | None:
        groups = _groups(messages)
        if groups:
            return next(iter(groups))
        query_id = query_id_from_checkpoint(self.checkpoint_location)
        return group_name(self.options.sink_id, query_id) if query_id else None

    def commit(self, messages, batchId: int) -> None:
        self._commit(self._group(messages), batchId, messages)

    def abort(self, messages, batchId: int) -> None:
        group = self._group(messages)
        self._abort(f"{group}-{batchId}-" if group else None, messages, group)


class EoslogBatchWriter(_Committer, DataSourceArrowWriter):
    """``df.write.format("eoslog")``: one transaction group per write job, sequence 0."""

    def __init__(self, options: SinkOptions, schema) -> None:
        _check_schema(schema, options)
        self.options = options
        # Created on the driver and pickled into the tasks and into commit(): one id per job.
        self.job_id = uuid.uuid4().hex
        self.value_schema = _value_schema(options)
        self.transaction_state_partitions = _transaction_state_partitions(options, group_name(options.sink_id,
                                                                                               self.job_id))

    def write(self, iterator):
        from pyspark import TaskContext

        ctx = TaskContext.get()
        o = self.options
        return write_transaction(
            _encoded(iterator, self.value_schema), client=o.client, topic_option=o.topic,
            txn_id=colocated_transactional_id(transactional_id(o.sink_id, self.job_id, 0, ctx.partitionId()),
                                              group_name(o.sink_id, self.job_id), self.transaction_state_partitions),
            group=group_name(o.sink_id, self.job_id), partition_id=ctx.partitionId(),
            attempt=ctx.attemptNumber(), transaction_timeout_ms=o.transaction_timeout_ms,
            writer=o.writer, security=o.security())

    def commit(self, messages) -> None:
        self._commit(group_name(self.options.sink_id, self.job_id), 0, messages)

    def abort(self, messages) -> None:
        group = group_name(self.options.sink_id, self.job_id)
        self._abort(f"{group}-", messages, group)
