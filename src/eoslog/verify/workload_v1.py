"""The verifier's raw transaction version 1 client: workload_v2's worker speaking version 1 (KIP-98 with
KIP-890 part 1's broker-side checks only), to show that the checker finds the late-write anomalies KIP-890
part 2 exists to prevent (KAFKA-17754), as issue 38's known-bug check asks.

confluent-kafka cannot show them: librdkafka never gives up on an EndTxn, it waits and retries on the
same connection, so a held EndTxn only delays it and a run with ``proxy-replay`` stays VALID
(docs/reliability.md). This producer, like workload_v2's (whose request handling it shares), gives up on a
request unanswered after REQUEST_TIMEOUT_S and sends it again on a new connection, leaving the old one to
the request; then it goes on to the next transaction *in the same producer epoch*, as version 1 allows:
EndTxn v3 does not bump the epoch, and sequence numbers simply go on. So the original request, held by
the fault proxy and forwarded later (``proxy-replay-endtxn``), arrives carrying an identity the
coordinator still accepts: it ends whatever transaction of this producer is open when it lands.

- A late EndTxn(commit) commits the open transaction T's writes so far. T's own read_committed polls
  may then return its own sends (``precommitted-read``); a later send of T to a partition it had added
  is refused (INVALID_TXN_STATE) and T ends indefinite, but a send to a new partition opens a new
  transaction on the coordinator, and if T then aborts, readers hold values of an aborted transaction
  (``G1a``).
- A late EndTxn(abort) drops T's writes so far; if T then commits what it sent after, its first values
  are gone from a committed transaction (``lost-write`` / ``unseen``).

Found on 2026-11-29 (docs/reliability.md, "The known-bug check"): G1a and precommitted-read under version
1, none under version 2, where the EndTxn that ended T1 bumped the epoch and the late one is fenced.

The test (tests/verify/test_verify_txn_v1.py) runs workload_v2's forced schedule with this worker:
each late EndTxn released into the next transaction once it holds a write, which then decides the
other way, so the check finds both cases without chance.

Per transaction, the requests are those of a Java producer of transaction version 1: AddPartitionsToTxn
v3 before the first send to a partition, Produce v9 (acks=all), AddOffsetsToTxn + TxnOffsetCommit,
EndTxn v3. Outcomes follow workload.py's rules. Usage: as workload.py, with ``--transaction-version 1
--client eoslog`` (run.py starts it; one broker only).
"""

from __future__ import annotations

from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.verify.workload import transactional_id
from eoslog.verify.workload_v2 import TransactionFailed, V2Worker

ADD_PARTITIONS_TO_TXN = 24


class V1Worker(V2Worker):
    """workload_v2.V2Worker with a transaction version 1 producer (the module docstring): the same sends and
    EndTxn with version 1's request versions, an AddPartitionsToTxn before a partition's first send, and
    after EndTxn the same epoch and sequences."""

    CLIENT_ID = "eoslog-verify-tv1"
    PRODUCE_VERSION, END_TXN_VERSION = 9, 3  # transaction version 1's requests
    ADD_PARTITIONS_VERSION = 3

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.added: set[int] = set()  # partitions added to the open transaction

    def _new_producer(self) -> None:
        self.added.clear()
        super()._new_producer()

    def _add_partition(self, partition: int) -> None:
        if partition in self.added:
            return
        Topic = messages.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
        request = messages.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=transactional_id(self.slot), v3_and_below_producer_id=self.producer_id,
            v3_and_below_producer_epoch=self.producer_epoch,
            v3_and_below_topics=[Topic(name=self.topic, partitions=[partition])])

        def send() -> int:
            response = self._request(ADD_PARTITIONS_TO_TXN, self.ADD_PARTITIONS_VERSION, request)
            codes = [p.partition_error_code for t in response.results_by_topic_v3_and_below
                     for p in t.results_by_partition if p.partition_error_code]
            return codes[0] if codes else response.error_code

        code = self._until_answered("add_partitions", send)
        if code is not ErrorCode.NONE:
            raise TransactionFailed(f"add_partitions: {code.name}")
        self.added.add(partition)

    def _ended(self, code: ErrorCode, response) -> None:
        """EndTxn v3 leaves the epoch, and so the sequences: version 1's next transaction goes on under the
        same identity (what lets a late EndTxn land in it). Partitions are added again, answer or not."""
        self.added.clear()
