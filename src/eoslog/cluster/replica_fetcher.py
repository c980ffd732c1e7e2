"""A follower's fetcher: one task per leader broker, fetching every partition this broker follows there.

Per partition: first truncate by leader epoch (OffsetForLeaderEpoch, KIP-101/279), then fetch from the
log end offset with the current leader epoch (KIP-320), append what comes exactly as the leader has it,
make it durable when the topic fsyncs on acknowledgement (so the offset we report next — which the
leader counts towards its high watermark — is on disk here), and take the leader's high watermark.
A partition whose fetch fails with an epoch or leadership error waits for the next ZooKeeper view.

Fetches carry this broker's epoch (its registration's czxid) in ReplicaState (v15, KIP-903), so the leader
notices a restart the controller may have missed; v15 names topics by id, so a fetch that includes a
topic without one (made by a tool that wrote no id) goes as v11, without the epoch.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from eoslog.cluster.broker_client import BrokerClient, BrokerConnectionError
from eoslog.log.leader_epoch import divergence_offset
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import FetchRequest, OffsetForLeaderEpochRequest

if TYPE_CHECKING:
    from eoslog.cluster.partition import Partition
    from eoslog.cluster.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

FETCH_KEY, FETCH_VERSION = 1, 15  # v15: ReplicaState with the broker epoch (KIP-903), topics by id
FETCH_VERSION_BY_NAME = 11  # v9+ carries current_leader_epoch; v11 is the last naming topics without ids
EPOCH_KEY, EPOCH_VERSION = 23, 3  # v3 carries the replica id
UNDEFINED_EPOCH = -1
_NO_TOPIC_ID = uuid.UUID(int=0)
# Errors after which a partition waits for the controller's next decision rather than retrying at once.
_WAIT_FOR_METADATA = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE,
}


@dataclass
class FetchState:
    partition: Partition
    leader_epoch: int
    truncating: bool = True
    delayed_until: float = 0.0


class ReplicaFetcher:
    def __init__(self, manager: ReplicaManager, leader: int, host: str, port: int) -> None:
        self.manager = manager
        self.leader = leader
        self.partitions: dict[tuple[str, int], FetchState] = {}
        self._client = BrokerClient(host, port, f"eoslog-replica-{manager.broker_id}", manager.config.link)
        self._task: asyncio.Task | None = None
        self._wake = asyncio.Event()
        self._stopping = False

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        # The flag as well as the cancel: Python 3.11's asyncio.wait_for can swallow a cancellation that
        # arrives as its inner request fails (fixed in 3.12), and the loop would then go on retrying a
        # leader forever while the broker's shutdown waits for it (seen after a SIGTERM in a verify run).
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - stopping
                pass
        self._client.close()

    def set_address(self, host: str, port: int) -> None:
        if (host, port) != (self._client.host, self._client.port):
            self._client.close()
            self._client.host, self._client.port = host, port

    def add_partition(self, tp, partition: Partition, leader_epoch: int) -> None:
        self.partitions[tp] = FetchState(partition, leader_epoch)
        self._wake.set()

    def remove_partition(self, tp) -> None:
        self.partitions.pop(tp, None)

    # ---- the loop ---------------------------------------------------------------------------------------

    async def _run(self) -> None:
        backoff = self.manager.config.replica_fetch_backoff_ms / 1000
        while not self._stopping:
            ready = {tp: s for tp, s in self.partitions.items() if s.delayed_until <= time.monotonic()}
            if not ready or not self._client.port:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), backoff if self.partitions else None)
                except TimeoutError:
                    pass
                continue
            try:
                truncating = {tp: s for tp, s in ready.items() if s.truncating}
                if truncating:
                    await self._truncate(truncating)
                fetching = {tp: s for tp, s in ready.items() if not s.truncating and self.partitions.get(tp) is s}
                if fetching:
                    await self._fetch(fetching)
            except BrokerConnectionError as exc:
                log.info("replica fetcher for broker %d: %s; retrying in %.1f s", self.leader, exc, backoff)
                await asyncio.sleep(backoff)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("replica fetcher for broker %d failed; retrying in %.1f s", self.leader, backoff)
                await asyncio.sleep(backoff)

    async def _truncate(self, states: dict) -> None:
        """KIP-279: ask the leader where our latest epoch ends there, truncate to the divergence point."""
        topics: dict[str, list] = {}
        asked: dict[tuple[str, int], int | None] = {}
        for (topic, index), state in states.items():
            latest = state.partition.leader_epochs.latest_epoch
            asked[(topic, index)] = latest
            if latest is None:
                continue
            topics.setdefault(topic, []).append(OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                partition=index, current_leader_epoch=state.leader_epoch, leader_epoch=latest))
        answers: dict[tuple[str, int], tuple[int, int, int]] = {}
        if topics:
            request = OffsetForLeaderEpochRequest(replica_id=self.manager.broker_id, topics=[
                OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=t, partitions=p) for t, p in topics.items()])
            response = await self._client.request(EPOCH_KEY, EPOCH_VERSION, request, 30)
            for topic in response.topics:
                for p in topic.partitions:
                    answers[(topic.topic, p.partition)] = (p.error_code, p.leader_epoch, p.end_offset)
        for tp, state in states.items():
            if self.partitions.get(tp) is not state:
                continue  # the role changed while we asked
            partition = state.partition
            end = partition.log_end_offset
            if asked[tp] is None:
                target = min(partition.high_watermark, end)  # no epochs: Kafka's fallback, the HW
            else:
                error, epoch, leader_end = answers.get(tp, (int(ErrorCode.UNKNOWN_SERVER_ERROR), -1, -1))
                if error:
                    self._delay(state, ErrorCode(error), "OffsetForLeaderEpoch")
                    continue
                target = divergence_offset(partition.leader_epochs, end, epoch, leader_end)
                if target is None:
                    target = min(partition.high_watermark, end)
            if target < end:
                log.info("%s: truncating from %d to %d (leader %d, epoch %d)", partition.name, end, target,
                         self.leader, state.leader_epoch)
                partition.truncate_to(target)
            state.truncating = False

    async def _fetch(self, states: dict) -> None:
        config = self.manager.config
        topics: dict[str, list] = {}
        sent: dict[tuple[str, int], tuple[FetchState, int]] = {}
        for (topic, index), state in states.items():
            partition = state.partition
            offset = partition.log_end_offset
            sent[(topic, index)] = (state, offset)
            topics.setdefault(topic, []).append(FetchRequest.FetchPartition(
                partition=index, current_leader_epoch=state.leader_epoch, fetch_offset=offset,
                log_start_offset=partition.log_start_offset, partition_max_bytes=config.replica_fetch_max_bytes))
        view_topics = self.manager.view.topics
        ids = {t: a.topic_id if (a := view_topics.get(t)) is not None else _NO_TOPIC_ID for t in topics}
        by_id = _NO_TOPIC_ID not in ids.values()
        request = FetchRequest(
            replica_id=self.manager.broker_id, max_wait_ms=config.replica_fetch_wait_max_ms, min_bytes=1,
            max_bytes=config.replica_fetch_response_max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
            topics=[FetchRequest.FetchTopic(topic=t, topic_id=ids[t], partitions=p) for t, p in topics.items()],
            forgotten_topics_data=[], rack_id="",
            replica_state=FetchRequest.ReplicaState(replica_id=self.manager.broker_id,
                                                    replica_epoch=self.manager.broker_epoch()))
        response = await self._client.request(FETCH_KEY, FETCH_VERSION if by_id else FETCH_VERSION_BY_NAME,
                                              request, config.replica_fetch_wait_max_ms / 1000 + 30)
        if response.error_code:
            raise BrokerConnectionError(f"fetch refused: {ErrorCode(response.error_code).name}")
        names = {topic_id: t for t, topic_id in ids.items()}
        flushes = []
        for topic in response.responses:
            name = names.get(topic.topic_id) if by_id else topic.topic
            for data in topic.partitions:
                tp = (name, data.partition_index)
                state, offset = sent.get(tp, (None, 0))
                if state is None or self.partitions.get(tp) is not state:
                    continue  # no longer following there
                partition = state.partition
                if data.error_code:
                    code = ErrorCode(data.error_code)
                    if code == ErrorCode.OFFSET_OUT_OF_RANGE:
                        self._out_of_range(state, offset, data)
                    else:
                        self._delay(state, code, "Fetch")
                    continue
                if partition.log_end_offset != offset:
                    continue  # truncated meanwhile: this data no longer lines up
                records = data.records
                if records is not None and len(records):
                    partition.append_as_follower(records)
                    if partition.log.config.fsync_on_ack:
                        flushes.append(partition)
                if data.log_start_offset > partition.log_start_offset:
                    partition.log.delete_records_before(min(data.log_start_offset, partition.log_end_offset))
                partition.set_follower_high_watermark(data.high_watermark)
        for partition in flushes:
            # What we report at the next fetch counts towards the leader's high watermark: make it durable.
            await partition.flush_now()

    def _out_of_range(self, state: FetchState, offset: int, data) -> None:
        partition = state.partition
        if 0 <= data.log_start_offset and offset < data.log_start_offset:
            log.info("%s: the leader's log starts at %d, past our %d: starting over there", partition.name,
                     data.log_start_offset, offset)
            partition.truncate_fully_and_start_at(data.log_start_offset)
        else:
            state.truncating = True  # we are ahead of the leader: find the divergence again

    def _delay(self, state: FetchState, code: ErrorCode, what: str) -> None:
        log.info("%s: %s from broker %d answered %s; waiting for the next leader decision",
                 state.partition.name, what, self.leader, code.name)
        # The leader may simply not have read the same ZooKeeper view yet: look again soon, not after
        # the full back-off, so a failover is not stretched by a race between two watches.
        backoff = self.manager.config.replica_fetch_backoff_ms / 1000
        state.delayed_until = time.monotonic() + (min(backoff, 0.2) if code in _WAIT_FOR_METADATA else backoff)
        state.truncating = True
