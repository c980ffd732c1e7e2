"""The source's direct read path: Fetch requests over one TCP connection, decoded straight into Arrow.

Used by :func:`partition_reader.read_range` for plain-text connections (the client configuration names
nothing but servers and a client id); anything else — TLS, SASL — goes through librdkafka. Per record
this costs ~0.6 us of Python and numpy against ~3 us for librdkafka's Message objects (docs/benchmarks.md).

The loop: find the partition's leader (Metadata), then Fetch at ``next_offset`` with the range's
isolation level until :class:`record_columns.FetchDecoder` says the range is done. Under read_committed
the broker answers only up to the last stable offset, with the aborted transactions of what it returns;
the decoder drops their batches and every control batch. The next Fetch is sent before the decoded batch
is handed to Spark, so the broker reads while Spark serialises.

Failures: OFFSET_OUT_OF_RANGE is data loss (``failOnDataLoss``) or, with it false, a jump to the log
start; leadership errors and lost connections are retried with fresh metadata; no progress for
``poll_timeout_ms`` is an error, as with the librdkafka path.
"""

from __future__ import annotations

import time

from eoslog.client.connection import BrokerConnection, bootstrap_servers
from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.spark.errors import DataLossError
from eoslog.spark.record_columns import FetchDecoder

METADATA, METADATA_VERSION = 3, 4
FETCH, FETCH_VERSION = 1, 11  # the last version that names topics (v13+ uses topic ids)
LIST_OFFSETS, LIST_OFFSETS_VERSION = 2, 2
EARLIEST = -2
CLIENT_ID = "eoslog-spark-source"
MAX_WAIT_MS = 500
PARTITION_MAX_BYTES = 8 * 1024 * 1024
RESPONSE_MAX_BYTES = 52_428_800
RETRY_BACKOFF_S = 0.1

# Client settings the direct path understands; any other means "let librdkafka do it" (TLS, SASL, ...).
DIRECT_SETTINGS = frozenset({"bootstrap.servers", "client.id"})


class Retry(Exception):
    """A condition worth retrying with fresh metadata (leadership moved, connection lost)."""


def can_read_directly(client: dict[str, str]) -> bool:
    return set(client) <= DIRECT_SETTINGS


class PartitionFetcher:
    """Reads one partition's [from_offset, until_offset) as :class:`Columns`, in offset order."""

    def __init__(self, bootstrap: str, topic: str, partition: int, from_offset: int, until_offset: int,
                 read_committed: bool, fail_on_data_loss: bool, poll_timeout_ms: int,
                 client_id: str = CLIENT_ID) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partition = partition
        self.read_committed = read_committed
        self.fail_on_data_loss = fail_on_data_loss
        self.poll_timeout_s = poll_timeout_ms / 1000
        self.client_id = client_id
        self.decoder = FetchDecoder(from_offset, until_offset, read_committed)
        self._conn: BrokerConnection | None = None

    # ---- connections -------------------------------------------------------------------------------

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _connect(self) -> BrokerConnection:
        """A connection to the partition's leader, found through any bootstrap server."""
        last: Exception | None = None
        for host, port in bootstrap_servers(self.bootstrap):
            try:
                conn = BrokerConnection(host, port, client_id=self.client_id, timeout_s=self.poll_timeout_s)
            except OSError as exc:
                last = exc
                continue
            try:
                leader = self._leader(conn)
            except (OSError, ConnectionError, Retry) as exc:
                conn.close()
                last = exc
                continue
            if leader == (host, port):
                return conn
            conn.close()
            return BrokerConnection(*leader, client_id=self.client_id, timeout_s=self.poll_timeout_s)
        raise Retry(f"no broker reachable for {self.topic}-{self.partition}: {last}")

    def _leader(self, conn: BrokerConnection) -> tuple[str, int]:
        M = messages.MetadataRequest
        response = conn.request(METADATA, METADATA_VERSION, M(
            topics=[M.MetadataRequestTopic(name=self.topic)], allow_auto_topic_creation=False))
        brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        for t in response.topics:
            if t.name != self.topic:
                continue
            if t.error_code:
                raise Retry(f"metadata for {self.topic}: {_name(t.error_code)}")
            for p in t.partitions:
                if p.partition_index == self.partition and p.leader_id in brokers:
                    return brokers[p.leader_id]
        raise Retry(f"no leader for {self.topic}-{self.partition}")

    # ---- the fetch loop -----------------------------------------------------------------------------

    def _fetch_request(self, offset: int):
        F = messages.FetchRequest
        return F(replica_id=-1, max_wait_ms=MAX_WAIT_MS, min_bytes=1, max_bytes=RESPONSE_MAX_BYTES,
                 isolation_level=1 if self.read_committed else 0, session_id=0, session_epoch=-1,
                 topics=[F.FetchTopic(topic=self.topic, partitions=[F.FetchPartition(
                     partition=self.partition, current_leader_epoch=-1, fetch_offset=offset,
                     log_start_offset=-1, partition_max_bytes=PARTITION_MAX_BYTES)])],
                 forgotten_topics_data=[], rack_id="")

    def columns(self):
        """Yields :class:`record_columns.Columns` until the range is done; closes the connection at the end."""
        decoder = self.decoder
        deadline = time.monotonic() + self.poll_timeout_s
        in_flight = False
        try:
            while not decoder.done:
                try:
                    if self._conn is None:
                        self._conn = self._connect()
                        in_flight = False
                    if not in_flight:
                        self._conn.send(FETCH, FETCH_VERSION, self._fetch_request(decoder.next_offset))
                    in_flight = False
                    part = self._partition_data(self._conn.receive())
                    before = decoder.next_offset
                    found = decoder.decode(part.records or b"",
                                           [(a.producer_id, a.first_offset) for a in part.aborted_transactions or ()])
                    if not decoder.done:
                        # Pipelining: the broker prepares the next response while Spark takes this one.
                        self._conn.send(FETCH, FETCH_VERSION, self._fetch_request(decoder.next_offset))
                        in_flight = True
                    if decoder.next_offset > before:
                        deadline = time.monotonic() + self.poll_timeout_s
                    if found is not None:
                        yield found
                except (Retry, OSError, ConnectionError) as exc:
                    self.close()
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"{self.topic}-{self.partition}: no progress towards offset "
                                           f"{decoder.until_offset} for {self.poll_timeout_s:.0f} s: {exc}") from exc
                    time.sleep(RETRY_BACKOFF_S)
                    continue
                if decoder.next_offset == before and time.monotonic() > deadline:
                    raise TimeoutError(f"{self.topic}-{self.partition}: no progress towards offset "
                                       f"{decoder.until_offset} for {self.poll_timeout_s:.0f} s "
                                       f"(at {decoder.next_offset})")
        finally:
            self.close()

    def _partition_data(self, response):
        if response.error_code:
            raise Retry(f"fetch: {_name(response.error_code)}")
        for t in response.responses:
            for p in t.partitions:
                if t.topic == self.topic and p.partition_index == self.partition:
                    return self._check(p)
        raise Retry(f"fetch answered without {self.topic}-{self.partition}")

    def _check(self, part):
        code = part.error_code
        if code == ErrorCode.NONE:
            return part
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            self._out_of_range()
            raise Retry("offset out of range; fetching from the log start")
        if code in ErrorCode._value2member_map_ and ErrorCode(code).retriable:
            raise Retry(f"fetch {self.topic}-{self.partition}: {_name(code)}")
        raise RuntimeError(f"reading {self.topic}-{self.partition}: {_name(code)}")

    def _out_of_range(self) -> None:

        decoder = self.decoder
        if self.fail_on_data_loss:
            raise DataLossError(f"{self.topic}-{self.partition}: offset {decoder.next_offset} is no longer in "
                                "the log; set failOnDataLoss=false to skip the lost offsets")
        L = messages.ListOffsetsRequest
        response = self._conn.request(LIST_OFFSETS, LIST_OFFSETS_VERSION, L(
            replica_id=-1, isolation_level=1 if self.read_committed else 0, topics=[L.ListOffsetsTopic(
                name=self.topic, partitions=[L.ListOffsetsPartition(partition_index=self.partition,
                                                                    timestamp=EARLIEST)])]))
        start = response.topics[0].partitions[0].offset
        if start <= decoder.next_offset:
            raise RuntimeError(f"{self.topic}-{self.partition}: offset {decoder.next_offset} out of range, "
                               f"yet the log starts at {start}")
        decoder.next_offset = decoder.from_offset = start  # records before it may share its batch


def _name(code: int) -> str:
    return ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)
