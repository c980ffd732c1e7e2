"""The transaction coordinator's APIs: what the handlers of InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, DescribeTransactions and ListTransactions call, and the produce path's KIP-890
questions to this coordinator. A mixin over :class:`TransactionShard`'s state (shard.py): each API checks
ownership and the extensions' guards, asks the pure core (decisions.py) and carries its decision out.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterable

from eoslog.coordinator.runtime import now_ms
from eoslog.coordinator.transaction import decisions as d
from eoslog.coordinator.transaction.decisions import TxnError
from eoslog.coordinator.transaction.metadata import (
    TRANSACTION_VERSION_1,
    TRANSACTION_VERSION_2,
    TopicPartition,
    TransactionMetadata,
    TransactionResult,
)
from eoslog.coordinator.transaction.state import TransactionState
from eoslog.protocol.errors import ErrorCode, error_for_code

log = logging.getLogger(__name__)

# EndTxn answers once the Complete record is logged (so the client's next AddPartitionsToTxn does not
# meet CONCURRENT_TRANSACTIONS), but never waits longer than this: the decision is already durable.
END_TXN_COMPLETION_WAIT_S = 5.0
API_INIT_PRODUCER_ID, API_ADD_PARTITIONS, API_ADD_OFFSETS, API_END_TXN = 22, 24, 25, 26
END_TXN_V2_SINCE = 5  # EndTxn v5+ speaks transaction version 2 (KIP-890 part 2)

# KIP-890 part 1 on the produce path: how a failed verification is put to the producer. Transient
# coordinator states become NOT_ENOUGH_REPLICAS, the one retriable error every client has always
# retried on Produce (Kafka does the same); a fence is INVALID_PRODUCER_EPOCH, the Produce spelling.
_PRODUCE_VERIFY_ERRORS = {
    TxnError.CONCURRENT_TRANSACTIONS: ErrorCode.NOT_ENOUGH_REPLICAS,
    TxnError.COORDINATOR_LOAD_IN_PROGRESS: ErrorCode.NOT_ENOUGH_REPLICAS,
    TxnError.COORDINATOR_NOT_AVAILABLE: ErrorCode.NOT_ENOUGH_REPLICAS,
    TxnError.NOT_COORDINATOR: ErrorCode.NOT_ENOUGH_REPLICAS,
    TxnError.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH,
}


class TransactionDescription:
    """What DescribeTransactions / ListTransactions / the CLI show of one transactional id."""

    def __init__(self, metadata: TransactionMetadata) -> None:
        self.transactional_id = metadata.transactional_id
        self.state = metadata.state
        self.producer_id = metadata.producer_id
        self.producer_epoch = metadata.producer_epoch
        self.txn_timeout_ms = metadata.txn_timeout_ms
        self.txn_start_timestamp = metadata.txn_start_timestamp
        self.topic_partitions = sorted(metadata.topic_partitions)


class TransactionApis:
    """The APIs, over the shard's cache and machinery (``get``, ``owns``, ``_carry_out``, ...)."""

    async def init_producer_id(self, transactional_id: str | None, transaction_timeout_ms: int,
                               producer_id: int, producer_epoch: int, api_version: int) -> tuple[ErrorCode, int, int]:
        """InitProducerId: (error, producer id, epoch)."""
        if transactional_id is None:
            return ErrorCode.NONE, self.producer_ids.allocate(), 0
        if not self.owns(transactional_id):
            return _wire(self._not_owned_error(transactional_id), API_INIT_PRODUCER_ID, api_version), -1, -1
        refusal = self._guard_refusal(transactional_id)
        if refusal is not None:
            return _wire(refusal, API_INIT_PRODUCER_ID, api_version), -1, -1
        metadata = self.get(transactional_id) if transactional_id else None
        decision = d.init_producer_id(metadata, transactional_id, transaction_timeout_ms, now_ms(), self.config,
                                      self.producer_ids.allocate, producer_id=producer_id,
                                      producer_epoch=producer_epoch)
        error = await self._carry_out(transactional_id, metadata, decision)
        if error is TxnError.CONCURRENT_TRANSACTIONS and decision.write_markers is not None:
            # An open transaction was just aborted under a bumped epoch (a new instance fencing the old
            # one). The abort completes locally in milliseconds: wait for it and decide again, sparing
            # the client a retry round.
            completion = self.completion(transactional_id)
            if completion is not None:
                try:
                    await asyncio.wait_for(asyncio.shield(completion), END_TXN_COMPLETION_WAIT_S)
                except TimeoutError:
                    pass
                else:
                    return await self.init_producer_id(transactional_id, transaction_timeout_ms, producer_id,
                                                       producer_epoch, api_version)
        code = _wire(error, API_INIT_PRODUCER_ID, api_version)
        if code is not ErrorCode.NONE:
            return code, -1, -1
        return code, decision.producer_id, decision.producer_epoch

    async def add_partitions_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                    partitions: Iterable[TopicPartition], api_version: int
                                    ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v0-3: one error per partition. Unknown partitions fail the whole request
        with UNKNOWN_TOPIC_OR_PARTITION for them and OPERATION_NOT_ATTEMPTED for the rest, as Kafka."""
        tps = [TopicPartition(tp[0], tp[1]) for tp in partitions]
        if not self.owns(transactional_id):
            return {tp: _wire(self._not_owned_error(transactional_id), API_ADD_PARTITIONS, api_version) for tp in tps}
        unknown = [tp for tp in tps if not self.exists(tp.topic, tp.partition)]
        if unknown:
            return {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                    for tp in tps}
        refusal = self._guard_refusal(transactional_id)
        if refusal is not None:
            return {tp: _wire(refusal, API_ADD_PARTITIONS, api_version) for tp in tps}
        metadata = self.get(transactional_id) if transactional_id else None
        decision = d.add_partitions_to_txn(metadata, transactional_id, producer_id, producer_epoch, tps, now_ms())
        code = _wire(await self._carry_out(transactional_id, metadata, decision), API_ADD_PARTITIONS, api_version)
        return {tp: code for tp in tps}

    async def add_partitions_for_produce(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                         partitions: Iterable[tuple[str, int]]) -> None:
        """Transaction version 2 (KIP-890 part 2): a Produce v12+ adds its partitions to the producer's
        transaction itself; the partition leader asks here before appending. Raises, with the error the
        Produce answers, unless the partitions are now in the ongoing transaction of exactly this
        (producer id, epoch): a delayed Produce of a finished transaction carries the old epoch and is
        refused here, so it can never start or join the next one."""
        tps = [TopicPartition(topic, index) for topic, index in partitions]
        error = self.admit(transactional_id)
        if error is None:
            metadata = self.get(transactional_id) if transactional_id else None
            decision = d.add_partitions_to_txn(metadata, transactional_id, producer_id, producer_epoch, tps,
                                               now_ms(), transaction_version=TRANSACTION_VERSION_2)
            error = await self._carry_out(transactional_id, metadata, decision)
        if error is TxnError.NONE:
            return
        code = _PRODUCE_VERIFY_ERRORS.get(error, ErrorCode[error.value])
        raise error_for_code(code)(
            f"{', '.join(f'{tp.topic}-{tp.partition}' for tp in tps)} could not join the transaction of "
            f"{transactional_id!r} "
            f"(producer {producer_id}, epoch {producer_epoch}): {error.value}")

    async def add_partitions_for_broker(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                        partitions: Iterable[TopicPartition], verify_only: bool,
                                        api_version: int) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4+ (a partition leader asking for one transaction, KIP-890): verify that
        the partitions are in the producer's ongoing transaction (``verify_only``, part 1), or add them
        for a Produce v12+ (part 2). One error per partition, Kafka's codes: the leader maps them."""
        tps = [TopicPartition(tp[0], tp[1]) for tp in partitions]
        if not self.owns(transactional_id):
            return {tp: _wire(self._not_owned_error(transactional_id), API_ADD_PARTITIONS, api_version) for tp in tps}
        refusal = self._guard_refusal(transactional_id)
        if refusal is not None:
            return {tp: _wire(refusal, API_ADD_PARTITIONS, api_version) for tp in tps}
        metadata = self.get(transactional_id) if transactional_id else None
        if verify_only:
            decision = d.verify_partitions_in_txn(metadata, transactional_id, producer_id, producer_epoch, tps)
            return {tp: _wire(decision.partition_errors[tp], API_ADD_PARTITIONS, api_version) for tp in tps}
        unknown = [tp for tp in tps if not self.exists(tp.topic, tp.partition)]
        if unknown:
            return {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                    for tp in tps}
        decision = d.add_partitions_to_txn(metadata, transactional_id, producer_id, producer_epoch, tps, now_ms(),
                                           transaction_version=TRANSACTION_VERSION_2)
        code = _wire(await self._carry_out(transactional_id, metadata, decision), API_ADD_PARTITIONS, api_version)
        return {tp: code for tp in tps}

    async def add_offsets_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                 group_id: str, api_version: int) -> ErrorCode:
        if not self.owns(transactional_id):
            return _wire(self._not_owned_error(transactional_id), API_ADD_OFFSETS, api_version)
        refusal = self._guard_refusal(transactional_id)
        if refusal is not None:
            return _wire(refusal, API_ADD_OFFSETS, api_version)
        metadata = self.get(transactional_id) if transactional_id else None
        decision = d.add_offsets_to_txn(metadata, transactional_id, producer_id, producer_epoch, group_id,
                                        now_ms(), self.config)
        return _wire(await self._carry_out(transactional_id, metadata, decision), API_ADD_OFFSETS, api_version)

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool,
                      api_version: int) -> ErrorCode:
        return (await self.end_txn_and_identity(transactional_id, producer_id, producer_epoch, committed,
                                                api_version))[0]

    async def end_txn_and_identity(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                   committed: bool, api_version: int) -> tuple[ErrorCode, int, int]:
        """EndTxn: (error, producer id, epoch). v5+ is transaction version 2: the answer carries the
        identity the producer continues with (epoch + 1); earlier versions answer (-1, -1)."""
        code = await self._end_txn(transactional_id, producer_id, producer_epoch, committed, api_version)
        if isinstance(code, tuple):
            return code
        return code, -1, -1

    async def _end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool,
                       api_version: int) -> ErrorCode | tuple[ErrorCode, int, int]:
        if not self.owns(transactional_id):
            return _wire(self._not_owned_error(transactional_id), API_END_TXN, api_version)
        refusal = self._guard_refusal(transactional_id)
        if refusal is not None:
            return _wire(refusal, API_END_TXN, api_version)
        metadata = self.get(transactional_id) if transactional_id else None
        result = TransactionResult.COMMIT if committed else TransactionResult.ABORT
        version = TRANSACTION_VERSION_2 if api_version >= END_TXN_V2_SINCE else TRANSACTION_VERSION_1
        decision = d.end_txn(metadata, transactional_id, producer_id, producer_epoch, result, now_ms(),
                             transaction_version=version, allocate_producer_id=self.producer_ids.allocate)
        error = await self._carry_out(transactional_id, metadata, decision)
        if error is TxnError.NONE and decision.write_markers is not None:
            completion = self.completion(transactional_id)
            if completion is not None:
                try:
                    await asyncio.wait_for(asyncio.shield(completion), END_TXN_COMPLETION_WAIT_S)
                except TimeoutError:
                    log.warning("EndTxn of %r answered before its markers were all written", transactional_id)
        code = _wire(error, API_END_TXN, api_version)
        if version >= TRANSACTION_VERSION_2 and code is ErrorCode.NONE:
            return code, decision.producer_id, decision.producer_epoch
        return code

    def verify_partition_in_transaction(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
                                        topic: str, partition: int) -> None:
        """KIP-890 part 1, for Partition.append: raises unless the partition is in the producer's ongoing
        transaction. A transaction being widened (AddPartitionsToTxn pending) still accepts batches for
        the partitions it already has."""
        tp = TopicPartition(topic, partition)
        refusal = self.admit(transactional_id) if transactional_id else None
        if refusal is not None:
            # Not coordinated here yet (its partition loading), or held by an extension (a group commit
            # holds this transaction: a write now would race its markers).
            raise error_for_code(_PRODUCE_VERIFY_ERRORS.get(refusal, ErrorCode[refusal.value]))(
                f"the transaction of {transactional_id!r} cannot take {topic}-{partition} now: {refusal.value}")
        metadata = self.get(transactional_id) if transactional_id else None
        if (metadata is not None and metadata.state is TransactionState.ONGOING
                and metadata.pending_state in (None, TransactionState.ONGOING)
                and (metadata.producer_id, metadata.producer_epoch) == (producer_id, producer_epoch)
                and tp in metadata.topic_partitions):
            return
        decision = d.verify_partitions_in_txn(metadata, transactional_id or "", producer_id, producer_epoch, [tp])
        error = decision.partition_errors.get(tp, TxnError.INVALID_TXN_STATE)
        if error is TxnError.NONE:
            return
        code = _PRODUCE_VERIFY_ERRORS.get(error, ErrorCode[error.value])
        raise error_for_code(code)(
            f"{topic}-{partition} is not in the ongoing transaction of {transactional_id!r} "
            f"(producer {producer_id}, epoch {producer_epoch}): {error.value}")

    # ---- admin: ListTransactions / DescribeTransactions --------------------------------------------

    def describe(self, transactional_id: str) -> TransactionDescription | None:
        metadata = self.get(transactional_id)
        if metadata is None or metadata.state is TransactionState.DEAD:
            return None
        return TransactionDescription(metadata)

    def list_transactions(self, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
                          min_duration_ms: int = -1, pattern: str | None = None) -> list[TransactionDescription]:
        """ListTransactions' filters: Kafka state names, producer ids, running longer than
        ``min_duration_ms`` (KIP-994), transactional id regex (full match)."""
        wanted_states = set(states)
        wanted_pids = set(producer_ids)
        regex = re.compile(pattern) if pattern else None
        now = now_ms()
        out = []
        for metadata in self.all_metadata():
            if metadata.state is TransactionState.DEAD:
                continue
            if wanted_states and metadata.state.kafka_name not in wanted_states:
                continue
            if wanted_pids and metadata.producer_id not in wanted_pids:
                continue
            if min_duration_ms >= 0 and (metadata.state not in (TransactionState.ONGOING, TransactionState.CHECKING)
                                         or now - metadata.txn_start_timestamp < min_duration_ms):
                continue
            if regex is not None and not regex.fullmatch(metadata.transactional_id):
                continue
            out.append(TransactionDescription(metadata))
        return sorted(out, key=lambda t: t.transactional_id)


def _wire(error: TxnError, api_key: int, api_version: int) -> ErrorCode:
    return ErrorCode[d.error_for_version(error, api_key, api_version).value]
