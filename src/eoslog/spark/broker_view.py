"""What the driver asks the broker: which partitions exist, and where each one starts and ends.

"Ends" depends on the isolation level: for read_committed it is the last stable offset (ListOffsets
with isolation read_committed answers the LSO), so a micro-batch never ends inside an undecided
transaction and a replay of it reads exactly the same committed records.
"""

from __future__ import annotations

from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from eoslog.spark.options import READ_COMMITTED

REQUEST_TIMEOUT_S = 30.0


class BrokerView:
    """One AdminClient, driver-side only (it is never pickled into tasks)."""

    def __init__(self, client_config: dict[str, str], isolation_level: str) -> None:
        self._admin = AdminClient(dict(client_config))
        self._isolation = (IsolationLevel.READ_COMMITTED if isolation_level == READ_COMMITTED
                           else IsolationLevel.READ_UNCOMMITTED)

    def partitions(self, topics: tuple[str, ...]) -> list[tuple[str, int]]:
        """Every (topic, partition) of ``topics`` the broker knows; a missing topic has none."""
        found: list[tuple[str, int]] = []
        metadata = self._admin.list_topics(timeout=REQUEST_TIMEOUT_S)
        for topic in topics:
            described = metadata.topics.get(topic)
            if described is None or described.error is not None:
                continue
            found.extend((topic, p) for p in described.partitions)
        return sorted(found)

    def _list(self, tps: list[tuple[str, int]], spec: OffsetSpec) -> dict[tuple[str, int], int]:
        if not tps:
            return {}
        request = {TopicPartition(t, p): spec for t, p in tps}
        futures = self._admin.list_offsets(request, isolation_level=self._isolation,
                                           request_timeout=REQUEST_TIMEOUT_S)
        result = {}
        for tp, future in futures.items():
            try:
                result[(tp.topic, tp.partition)] = future.result(timeout=REQUEST_TIMEOUT_S).offset
            except KafkaException as exc:
                raise RuntimeError(f"ListOffsets for {tp.topic}-{tp.partition} failed: {exc}") from exc
        return result

    def earliest(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        return self._list(tps, OffsetSpec.earliest())

    def latest(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The LSO under read_committed, the high watermark under read_uncommitted."""
        return self._list(tps, OffsetSpec.latest())
