"""KIP-890 on the produce path: is a partition part of the producer's ongoing transaction? (Kafka's
AddPartitionsToTxnManager.)

Two places ask. A partition checks every transactional batch it appends (:meth:`check_append`, given to
each partition when it is made): the transaction coordinator of this broker answers from its cache. A
partition leader whose transactional ids are coordinated by *another* broker asks that broker before
the append, once per transaction and partition (api/produce.py holds the connection meanwhile):
:meth:`verify_remotely` (transaction version 1: one DescribeTransactions) or :meth:`add_remotely`
(transaction version 2: one AddPartitionsToTxn v5 with VerifyOnly false, Kafka's broker-to-coordinator
form, which adds the partitions to the transaction).

Contract
- Only the broker's event loop calls it. The local coordinator and the way to find another one are
  given once at start-up (:meth:`bind`); remote questions share the broker's connections to the others
  (cluster/broker_clients.py).
- Remote answers map to what a Produce answers with: None where the partition is in the transaction
  of exactly this (producer id, epoch), else the exception to refuse the batch with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from eoslog.cluster.broker_client import BrokerConnectionError
from eoslog.protocol.errors import ErrorCode, error_for_code

API_ADD_PARTITIONS_TO_TXN, API_DESCRIBE_TRANSACTIONS = 24, 65
ADD_PARTITIONS_BROKER_VERSION = 5  # AddPartitionsToTxn v4+ is the broker-to-coordinator form
REQUEST_TIMEOUT_S = 30
ONGOING = "Ongoing"  # DescribeTransactions' name of the state

# (transactional id, producer id, epoch, topic, partition): raises unless the partition is in the
# producer's ongoing transaction (the transaction coordinator's verify_partition_in_transaction).
LocalCheck = Callable[[str | None, int, int, str, int], None]
TopicPartitions = Iterable[tuple[str, int]]


class TransactionVerification:
    def __init__(self) -> None:
        self._local: LocalCheck | None = None
        self._clients: Any = None
        self._coordinator_of: Callable[[str], int | None] = lambda transactional_id: None

    def bind(self, local: LocalCheck, clients: Any = None,
             coordinator_of: Callable[[str], int | None] | None = None) -> None:
        """``local``: this broker's coordinator's check; ``clients``: the connections to the other brokers
        (cluster/broker_clients.py); ``coordinator_of(transactional_id)``: the broker that coordinates
        it, by this broker's cluster view (None when none does right now)."""
        self._local = local
        self._clients = clients
        if coordinator_of is not None:
            self._coordinator_of = coordinator_of

    def check_append(self, transactional_id: str | None, producer_id: int, producer_epoch: int, topic: str,
                     partition: int) -> None:
        """For Partition.append: raises unless the partition is in the producer's ongoing transaction."""
        if self._local is not None:
            self._local(transactional_id, producer_id, producer_epoch, topic, partition)

    # ---- asking another broker -------------------------------------------------------------------

    async def verify_remotely(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              partitions: TopicPartitions) -> dict[tuple[str, int], Exception | None]:
        """Transaction version 1: one DescribeTransactions to the id's coordinator; for each partition None
        when it is in the producer's Ongoing transaction (this producer id and epoch)."""
        tps = list(partitions)
        try:
            described = await self._describe(transactional_id)
        except Exception as exc:  # noqa: BLE001 - every partition gets the same answer
            return {tp: exc for tp in tps}
        if (described.producer_id, described.producer_epoch) != (producer_id, producer_epoch):
            error = error_for_code(ErrorCode.INVALID_PRODUCER_EPOCH)(
                f"{transactional_id!r} is producer {described.producer_id} epoch {described.producer_epoch} now, "
                f"not producer {producer_id} epoch {producer_epoch}")
            return {tp: error for tp in tps}
        ongoing = described.transaction_state == ONGOING
        in_txn = {(t.topic, p) for t in described.topics for p in t.partitions}
        return {tp: None if ongoing and tp in in_txn else error_for_code(ErrorCode.INVALID_TXN_STATE)(
                    f"{tp[0]}-{tp[1]} is not in the ongoing transaction of {transactional_id!r} "
                    f"({described.transaction_state})")
                for tp in tps}

    async def verify_one_remotely(self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str,
                                  partition: int) -> None:
        """:meth:`verify_remotely` for one partition, raising its refusal (TxnOffsetCommit's question)."""
        error = (await self.verify_remotely(transactional_id, producer_id, producer_epoch,
                                            [(topic, partition)]))[(topic, partition)]
        if error is not None:
            raise error

    async def add_remotely(self, transactional_id: str, producer_id: int, producer_epoch: int,
                           partitions: TopicPartitions) -> dict[tuple[str, int], Exception | None]:
        """Transaction version 2: one AddPartitionsToTxn v5 (VerifyOnly false) to the id's coordinator; for
        each partition None when it is now in the producer's ongoing transaction."""
        tps = list(partitions)
        client = self._client_of(transactional_id)
        if client is None:
            error = error_for_code(ErrorCode.COORDINATOR_NOT_AVAILABLE)(f"no coordinator for {transactional_id!r} now")
            return {tp: error for tp in tps}
        by_topic: dict[str, list[int]] = {}
        for topic, index in tps:
            by_topic.setdefault(topic, []).append(index)
        from eoslog.protocol import messages  # only a cluster asks remotely: not loaded before the port opens

        Request = messages.AddPartitionsToTxnRequest
        Transaction = Request.AddPartitionsToTxnTransaction
        Topic = Request.AddPartitionsToTxnTopic
        request = Request(transactions=[Transaction(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
            verify_only=False, topics=[Topic(name=name, partitions=ids) for name, ids in by_topic.items()])])
        try:
            response = await client.request(API_ADD_PARTITIONS_TO_TXN, ADD_PARTITIONS_BROKER_VERSION, request,
                                            REQUEST_TIMEOUT_S)
        except BrokerConnectionError as exc:
            error = error_for_code(ErrorCode.COORDINATOR_NOT_AVAILABLE)(str(exc))
            return {tp: error for tp in tps}
        codes: dict[tuple[str, int], int] = {}
        if response.error_code:
            codes = {tp: response.error_code for tp in tps}
        else:
            for result in response.results_by_transaction:
                for topic in result.topic_results:
                    for partition in topic.results_by_partition:
                        codes[(topic.name, partition.partition_index)] = partition.partition_error_code
        out: dict[tuple[str, int], Exception | None] = {}
        for tp in tps:
            code = ErrorCode(codes.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR))
            if code is ErrorCode.NONE:
                out[tp] = None
                continue
            if code is ErrorCode.PRODUCER_FENCED:
                code = ErrorCode.INVALID_PRODUCER_EPOCH  # the Produce spelling of a fence
            out[tp] = error_for_code(code)(f"{tp[0]}-{tp[1]} could not join the transaction of "
                                           f"{transactional_id!r} (producer {producer_id}, epoch "
                                           f"{producer_epoch}): {code.name}")
        return out

    def _client_of(self, transactional_id: str):
        coordinator = self._coordinator_of(transactional_id)
        if coordinator is None or self._clients is None:
            return None
        return self._clients.client_for(coordinator)

    async def _describe(self, transactional_id: str):
        """The DescribeTransactions answer of the broker that coordinates ``transactional_id``."""
        client = self._client_of(transactional_id)
        if client is None:
            raise error_for_code(ErrorCode.COORDINATOR_NOT_AVAILABLE)(
                f"no coordinator for {transactional_id!r} right now")
        from eoslog.protocol import messages

        try:
            response = await client.request(API_DESCRIBE_TRANSACTIONS, 0, messages.DescribeTransactionsRequest(
                transactional_ids=[transactional_id]), REQUEST_TIMEOUT_S)
        except BrokerConnectionError as exc:
            raise error_for_code(ErrorCode.COORDINATOR_NOT_AVAILABLE)(str(exc)) from exc
        described = response.transaction_states[0]
        if described.error_code:
            raise error_for_code(described.error_code)(f"coordinator of {transactional_id!r} answered "
                                                       f"{ErrorCode(described.error_code).name}")
        return described
