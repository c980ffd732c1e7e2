"""High watermarks of partitions wherever they are led (Kafka's PartitionMetadataClient), for answers that
one broker gives about partitions of the whole cluster: DescribeShareGroupOffsets' lag is asked of the
share group's coordinator, which leads only some of the group's partitions.

Contract
- A partition led here answers from its replica; one led elsewhere by a ListOffsets (latest,
  read_uncommitted: the high watermark) to its leader by this broker's view, over the broker's shared
  connections (cluster/broker_clients.py), one request per leader.
- A partition with no leader, an unreachable leader or an error answer is None (unknown): the caller
  answers -1, as Kafka does when its look-up fails. Nothing is retried; the next request asks again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from eoslog.cluster.broker_client import BrokerConnectionError

API_LIST_OFFSETS = 2
LIST_OFFSETS_VERSION = 4  # current_leader_epoch, no tagged fields
LATEST = -1  # ListOffsets' timestamp for the end of the log; under read_uncommitted, the high watermark
REQUEST_TIMEOUT_S = 5.0
CONSUMER_REPLICA_ID = -1  # asked as a client: only the leader answers


class PartitionOffsets:
    def __init__(self, replicas: Any, clients: Any | None, timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        """``replicas``: the replica manager (who leads what by this broker's view, and the local
        replicas); ``clients``: cluster/broker_clients.py's BrokerClients, or None on a sole broker."""
        self._replicas = replicas
        self._clients = clients
        self._timeout_s = timeout_s

    async def high_watermarks(self, topic: str, partitions: Iterable[int]) -> dict[int, int | None]:
        out: dict[int, int | None] = {}
        remote: dict[int, list[int]] = {}
        for index in partitions:
            try:
                out[index] = self._replicas.leader_partition(topic, index).high_watermark
                continue
            except Exception:  # noqa: BLE001 - not led here (or gone): its leader is asked below
                out[index] = None
            leader = self._replicas.leader_of(topic, index)
            if leader is not None and leader >= 0 and leader != getattr(self._replicas, "broker_id", None):
                remote.setdefault(leader, []).append(index)
        answers = await asyncio.gather(*(self._ask(leader, topic, indexes) for leader, indexes in remote.items()))
        for answer in answers:
            out.update(answer)
        return out

    async def _ask(self, leader: int, topic: str, indexes: list[int]) -> dict[int, int | None]:
        client = self._clients.client_for(leader) if self._clients is not None else None
        if client is None:
            return {}
        from eoslog.protocol import messages  # loaded after the broker's port opens, not with this module

        Request = messages.ListOffsetsRequest
        request = Request(replica_id=CONSUMER_REPLICA_ID, isolation_level=0, timeout_ms=0, topics=[
            Request.ListOffsetsTopic(name=topic, partitions=[
                Request.ListOffsetsPartition(partition_index=i, current_leader_epoch=-1, timestamp=LATEST,
                                             max_num_offsets=1) for i in indexes])])
        try:
            response = await client.request(API_LIST_OFFSETS, LIST_OFFSETS_VERSION, request, self._timeout_s)
        except BrokerConnectionError:
            return {}
        return {p.partition_index: p.offset for t in response.topics if t.name == topic
                for p in t.partitions if p.error_code == 0 and p.offset >= 0}


__all__ = ["PartitionOffsets"]
