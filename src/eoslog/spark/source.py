"""The source of ``format("eoslog")``: batch and micro-batch readers, driver side.

Where things run (PySpark 4.3): every method here except ``read()`` runs in one long-lived Python
process on the driver; ``read()`` runs in executor tasks on a pickled copy of the reader, so it only
uses the :class:`OffsetRange` it is handed. The broker connection (:class:`BrokerView`) is therefore
created lazily and dropped when the reader is pickled.

Micro-batches end at the last stable offset under read_committed (the high watermark otherwise), cut
down by ``maxOffsetsPerTrigger`` through :func:`offsets.admit`; ``trigger(availableNow=True)`` caps every
batch at the offsets seen when the query started.
"""

from __future__ import annotations

import logging

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from eoslog.spark import offsets
from eoslog.spark.avro_values import SCHEMA_ID_METADATA, ValueSchema, registered
from eoslog.spark.broker_view import BrokerView
from eoslog.spark.errors import DataLossError
from eoslog.spark.options import OptionError, SourceOptions
from eoslog.spark.partition_reader import OffsetRange, read_range

log = logging.getLogger(__name__)


def typed_value(options: SourceOptions, schema) -> tuple[ValueSchema | None, str | None]:
    """The tasks' decoding instructions: the reader schema is the version the declared ``value`` column was
    built from (its field metadata), so the plan and the decoded rows agree even if a newer version is
    registered between the two; a schema given with ``.schema(...)`` uses the latest version."""
    typed = options.typed_value
    if typed is None:
        return None, None
    value = schema["value"] if schema is not None and "value" in schema.names else None
    if value is None or not isinstance(value.dataType, StructType):
        raise OptionError("with schema.registry.url the source's value column is a struct; a schema given with "
                          ".schema(...) must keep it so")
    schema_id = (value.metadata or {}).get(SCHEMA_ID_METADATA)
    if schema_id is None:
        declared, _ = registered(typed.registry, typed.subject, typed.mode)
        schema_id = declared.schema_id
    return (ValueSchema(tuple(sorted(typed.registry.items())), typed.subject, int(schema_id), typed.mode),
            schema.json())


class _BrokerAccess:
    """The lazily opened, never pickled broker view shared by both readers."""

    options: SourceOptions
    _view: BrokerView | None = None
    _typed: tuple[ValueSchema | None, str | None] = (None, None)

    @property
    def view(self) -> BrokerView:
        if self._view is None:
            self._view = BrokerView(self.options.client, self.options.isolation_level)
        return self._view

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_view"] = None
        return state

    def _range(self, topic: str, partition: int, first: int, until: int) -> OffsetRange:
        o = self.options
        return OffsetRange(client=o.client, topic=topic, partition=partition, from_offset=first,
                           until_offset=until, isolation_level=o.isolation_level,
                           fail_on_data_loss=o.fail_on_data_loss, include_headers=o.include_headers,
                           poll_timeout_ms=o.poll_timeout_ms, reader=o.reader,
                           typed_value=self._typed[0], schema_json=self._typed[1])


class EoslogBatchReader(_BrokerAccess, DataSourceReader):
    """``spark.read.format("eoslog")``: startingOffsets (default earliest) to endingOffsets (default latest)."""

    def __init__(self, options: SourceOptions, schema=None) -> None:
        self.options = options
        self._typed = typed_value(options, schema)

    def partitions(self):
        view = self.view
        tps = view.partitions(self.options.topics)
        earliest, latest = view.earliest(tps), view.latest(tps)
        start = offsets.resolve(self.options.starting, tps, earliest, latest, "startingOffsets")
        end = offsets.resolve(self.options.ending, tps, earliest, latest, "endingOffsets")
        for tp in tps:
            if start[tp] < earliest[tp]:
                if self.options.fail_on_data_loss:
                    raise DataLossError(f"startingOffsets {start[tp]} for {tp[0]}-{tp[1]} is before the log "
                                        f"start offset {earliest[tp]}")
                start[tp] = earliest[tp]
        return [self._range(*r) for r in offsets.ranges(start, end)] or [self._range("", 0, 0, 0)]

    def read(self, partition: OffsetRange):
        return read_range(partition)


class EoslogStreamReader(_BrokerAccess, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("eoslog")``."""

    def __init__(self, options: SourceOptions, schema=None) -> None:
        self.options = options
        self._typed = typed_value(options, schema)
        self._target: offsets.PartitionOffsets | None = None  # the availableNow end

    # ---- offsets (driver) ----------------------------------------------------------------------------

    def _latest(self) -> offsets.PartitionOffsets:
        tps = self.view.partitions(self.options.topics)
        return offsets.cap(self.view.latest(tps), self._target)

    def initialOffset(self) -> dict:
        view = self.view
        tps = view.partitions(self.options.topics)
        start = offsets.resolve(self.options.starting, tps, view.earliest(tps), view.latest(tps),
                                "startingOffsets")
        return offsets.canonical(start)

    def getDefaultReadLimit(self):
        limit = self.options.max_offsets_per_trigger
        return ReadMaxRows(limit) if limit is not None else ReadAllAvailable()

    def latestOffset(self, start: dict, limit) -> dict:
        begin = offsets.flatten(start)
        latest = self._latest()
        if self.options.fail_on_data_loss:
            for tp, offset in begin.items():
                if tp in latest and latest[tp] < offset and self._target is None:
                    raise DataLossError(f"{tp[0]}-{tp[1]}: the log ends at {latest[tp]}, before the "
                                        f"checkpointed offset {offset} (was the topic re-created?)")
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return offsets.canonical(offsets.admit(begin, latest, max_rows))

    def reportLatestOffset(self):
        return offsets.canonical(self._latest())

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self.view.partitions(self.options.topics)
        self._target = self.view.latest(tps)

    def partitions(self, start: dict, end: dict):
        begin, finish = offsets.flatten(start), offsets.flatten(end)
        return [self._range(*r) for r in offsets.ranges(begin, finish)]

    def commit(self, end: dict) -> None:
        """Advisory only (Spark skips it for the last batch before a stop); positions live in the checkpoint."""

    def stop(self) -> None:
        self._view = None

    # ---- data (executors) ----------------------------------------------------------------------------

    def read(self, partition: OffsetRange):
        return read_range(partition)
