"""Transaction markers: a decided transaction's COMMIT or ABORT control batch written on every partition
of it, each made durable (after Kafka's TransactionMarkerChannelManager).

Contract
- Only the broker's event loop calls it. A marker for a partition this broker leads is appended here
  (``Partition.append_control``) and waited on until the high watermark passes it; one led by another
  broker goes there as WriteTxnMarkers v1 over the broker's shared connections
  (cluster/broker_clients.py), and follows the leadership until some leader takes it: giving up while
  the topic exists would leave the transaction open there.
- Storage errors and unreachable leaders are retried with a backoff (50 ms doubling to 1 s), as Kafka
  retries markers: the decision is durable and must complete. A partition that refuses the marker (its
  producer state saw a newer epoch or a newer coordinator: TRANSACTION_COORDINATOR_FENCED) or no
  longer exists is reported and skipped.
- Every marker carries the coordinator epoch it is given (the epoch of the id's ``__transaction_state``
  partition when this broker loaded it).
- ``offsets_marker_listeners`` are called as ``listener(partition, producer_id, committed)`` once a
  marker on ``__consumer_offsets``-``partition`` is durable: the group coordinator publishes or drops
  that producer's pending transactional offsets there. ``share_state_marker_listeners`` are called as
  ``listener(partition, producer_id, producer_epoch, committed)`` once a marker on
  ``__share_group_state``-``partition`` is durable: the share coordinator decides that producer's pending
  transactional acknowledgements there (docs/share-groups.md, "Step 6").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

from eoslog.cluster.broker_client import BrokerConnectionError
from eoslog.cluster.topics import CONSUMER_OFFSETS, SHARE_GROUP_STATE
from eoslog.coordinator.transaction.metadata import TopicPartition, TransactionResult
from eoslog.log.producer_state import ProducerStateError
from eoslog.protocol.errors import ErrorCode, NotLeaderOrFollowerError
from eoslog.protocol.messages import WriteTxnMarkersRequest
from eoslog.records.control import ControlType, build_control_batch

log = logging.getLogger(__name__)

MARKER_RETRY_BACKOFF_S = (0.05, 1.0)
WRITE_TXN_MARKERS_KEY = 27
REQUEST_TIMEOUT_S = 30


class TransactionMarkerChannel:
    def __init__(self, node_id: int, partitions: Any, replicas: Any, clients: Any,
                 ensure_offsets_topic: Callable[[], None]) -> None:
        """``partitions``: the local partitions and topics (cluster/registry.py); ``replicas``: who leads
        what (cluster/replica_manager.py, ``leader_of``); ``clients``: connections to the other brokers;
        ``ensure_offsets_topic()``: ``__consumer_offsets`` created on first use (a marker may be its
        first write)."""
        self.node_id = node_id
        self._partitions = partitions
        self._replicas = replicas
        self._clients = clients
        self._ensure_offsets_topic = ensure_offsets_topic
        self.offsets_marker_listeners: list[Callable[[int, int, bool], None]] = []
        self.share_state_marker_listeners: list[Callable[[int, int, int, bool], None]] = []
        self.stopping = False

    async def write(self, producer_id: int, producer_epoch: int, result: TransactionResult,
                    partitions: Iterable[tuple[str, int]], coordinator_epoch: int, *,
                    follow_leaders: bool = True) -> dict[TopicPartition, ErrorCode]:
        """Writes a ``result`` marker on every partition and waits until each is durable. Also serves the
        WriteTxnMarkers API (``follow_leaders=False``: a partition not led here answers
        NOT_LEADER_OR_FOLLOWER instead of being sent on)."""
        tps = [TopicPartition(tp[0], tp[1]) for tp in partitions]
        outcomes = await asyncio.gather(*(self._write_one(tp, producer_id, producer_epoch, result, coordinator_epoch,
                                                          follow_leaders) for tp in tps))
        return dict(zip(tps, outcomes))

    async def _write_one(self, tp: TopicPartition, producer_id: int, producer_epoch: int, result: TransactionResult,
                         coordinator_epoch: int, follow_leaders: bool) -> ErrorCode:
        delay = MARKER_RETRY_BACKOFF_S[0]
        while True:
            if not self._replicas.sole_broker and self._partitions.topics.get(tp.topic) is not None:
                leader = self._replicas.leader_of(tp.topic, tp.partition)
                if leader != self.node_id:
                    if not follow_leaders:
                        return ErrorCode.NOT_LEADER_OR_FOLLOWER
                    code = await self._write_remote(leader, tp, producer_id, producer_epoch, result, coordinator_epoch)
                    # A leader that has not opened the partition yet (its view lags ours) is asked again.
                    if code is not None and code not in (ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                                         ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                        return code
                    if self.stopping:
                        raise asyncio.CancelledError()
                    await asyncio.sleep(delay)  # no leader yet, or it moved: ask the view again
                    delay = min(delay * 2, MARKER_RETRY_BACKOFF_S[1])
                    continue
            partition = self._partitions.partitions.get((tp.topic, tp.partition))
            if partition is None and tp.topic == CONSUMER_OFFSETS:
                self._ensure_offsets_topic()
                partition = self._partitions.partitions.get((tp.topic, tp.partition))
            if partition is None:
                log.warning("no marker for %s-%d (producer %d): the partition is gone", tp.topic, tp.partition,
                            producer_id)
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            batch = build_control_batch(ControlType(result.value), producer_id, producer_epoch, coordinator_epoch)
            try:
                appended = partition.append_control(batch)
                await partition.wait_for_high_watermark(appended.last_offset + 1)
            except ProducerStateError as exc:
                log.warning("%s-%d refused the %s marker of producer %d: %s", tp.topic, tp.partition,
                            result.name, producer_id, exc)
                return ErrorCode[exc.error_name]
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if self.stopping:
                    raise
                if not follow_leaders and isinstance(exc, NotLeaderOrFollowerError):
                    return ErrorCode.NOT_LEADER_OR_FOLLOWER
                log.warning("marker for %s-%d failed, retrying: %s", tp.topic, tp.partition, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, MARKER_RETRY_BACKOFF_S[1])
                continue
            if tp.topic == CONSUMER_OFFSETS:
                for listener in self.offsets_marker_listeners:
                    try:
                        listener(tp.partition, producer_id, result is TransactionResult.COMMIT)
                    except Exception:
                        log.exception("offsets marker listener failed")
            elif tp.topic == SHARE_GROUP_STATE:
                for share_listener in self.share_state_marker_listeners:
                    try:
                        share_listener(tp.partition, producer_id, producer_epoch, result is TransactionResult.COMMIT)
                    except Exception:
                        log.exception("share state marker listener failed")
            return ErrorCode.NONE

    async def _write_remote(self, leader: int, tp: TopicPartition, producer_id: int, producer_epoch: int,
                            result: TransactionResult, coordinator_epoch: int) -> ErrorCode | None:
        """WriteTxnMarkers v1 to the partition's leader; None when it cannot be reached (retry)."""
        client = self._clients.client_for(leader)
        if client is None:
            return None
        Marker = WriteTxnMarkersRequest.WritableTxnMarker
        request = WriteTxnMarkersRequest(markers=[Marker(
            producer_id=producer_id, producer_epoch=producer_epoch,
            transaction_result=result is TransactionResult.COMMIT, coordinator_epoch=coordinator_epoch,
            topics=[Marker.WritableTxnMarkerTopic(name=tp.topic, partition_indexes=[tp.partition])])])
        try:
            response = await client.request(WRITE_TXN_MARKERS_KEY, 1, request, REQUEST_TIMEOUT_S)
        except BrokerConnectionError as exc:
            log.warning("marker for %s-%d: broker %d unreachable (%s), retrying", tp.topic, tp.partition, leader, exc)
            return None
        return ErrorCode(response.markers[0].topics[0].partitions[0].error_code)
