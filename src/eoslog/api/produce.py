"""Produce (key 0): append record batches; acks=0/1/all; responses in request order per connection.

The append itself is synchronous, so batches from one connection land in the order they arrived; only
the acks=all wait (the group-commit fsync, or the ISR on a cluster) is asynchronous.

v13 (KIP-516) names topics by id: each id is resolved to its name on arrival, an unknown one is
answered UNKNOWN_TOPIC_ID per partition, and the response names topics by the ids asked for.

KIP-890 part 1 across brokers: on a cluster, the first transactional batch of a transaction on a
partition whose transactional id is coordinated by another broker is verified with that coordinator
(one DescribeTransactions per request) before it is appended. The connection is held meanwhile, so
the producer's next request cannot overtake it; later batches of the same transaction find it open
in the partition's producer state and need no round trip. A marker that lands on the partition while
the question is out makes the answer stale: the batch is refused with a retriable error and its retry
asks again.

KIP-890 part 2 (transaction version 2): a transactional Produce v12+ comes from a producer that does not
send AddPartitionsToTxn; the first batch of a transaction on a partition adds the partition itself. The
leader asks the coordinator to add it for (producer id, epoch) before appending, holding the connection
meanwhile as above, and the append then verifies in-process as for any transactional batch. A delayed
batch of a finished transaction carries the old epoch: the coordinator refuses to add it, and the
partition's producer state (whose epoch the bumped markers raised) refuses it too. Only where this
broker coordinates the transactional id. When another broker does, the leader asks it with
AddPartitionsToTxn v5 (VerifyOnly false), Kafka's broker-to-coordinator form, in place of the part 1
DescribeTransactions question, with the same hold and the same guard.

v0-v2, which Kafka 4.0 dropped (KIP-896), are served as Kafka 3.9 served them, for clients that still
send them (docs/clients.md): their message sets (magic 0 or 1) are converted up to one v2 batch each on
arrival (records/legacy.py), then take the path every batch takes; a set that does not parse is left as
it came, and the log refuses it as corrupt.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import TYPE_CHECKING, NamedTuple

from eoslog.api import _leader_hints as leader_hints
from eoslog.api._deadlines import deadlines_for
from eoslog.cluster.topics import INTERNAL_TOPICS
from eoslog.coordinator.runtime import Ownership
from eoslog.log.eager_future import EagerFuture
from eoslog.log.record_validation import RecordValidationError
from eoslog.protocol.error_mapping import error_code_for
from eoslog.protocol.errors import (
    ErrorCode,
    InvalidRecordError,
    InvalidRequiredAcksError,
    InvalidTopicError,
    KafkaError,
    UnknownTopicIdError,
    error_for_code,
)
from eoslog.protocol.messages import ProduceResponse
from eoslog.records.header import iter_headers
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import ProduceRequest

API_KEY = 0
MIN_VERSION = 0
MAX_VERSION = 13  # 12 = 11 plus transaction version 2's implicit add; 13 names topics by id (KIP-516)
TOPIC_IDS_SINCE = 13
OLDEST_V2_PRODUCE = 3  # Produce v3 (Kafka 0.11) is the first that carries v2 batches only
IMPLICIT_ADD_SINCE = 12

TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = ProduceResponse.PartitionProduceResponse
RecordError = ProduceResponse.BatchIndexAndErrorMessage
NO_TIMESTAMP = -1
NOTHING_REFUSED: dict = {}  # never written to
REMOTE_VERIFY_TIMEOUT_S = 10.0
# A coordinator that cannot answer yet is put to the producer as NOT_ENOUGH_REPLICAS, the retriable
# error every client retries a Produce on (as for a local coordinator; see the transaction coordinator).
_RETRIABLE_VERIFY_CODES = {ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                           ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS}


def _partition_response(index: int, code: int, base_offset: int = -1, log_append_time: int = NO_TIMESTAMP,
                        log_start_offset: int = -1, message: str | None = None,
                        record_errors: list | None = None) -> PartitionResponse:
    return PartitionResponse(index=index, error_code=code, base_offset=base_offset,
                             log_append_time_ms=log_append_time, log_start_offset=log_start_offset,
                             record_errors=record_errors or [], error_message=message)


def _refusal(index: int, exc: Exception, partition) -> PartitionResponse:
    """A partition's failed append. Records refused one by one (log/record_validation.py, and any
    extension's RecordCheck) are named in KIP-467's ``record_errors`` (v8+; older versions carry only
    the error code), with the log start offset as Kafka answers them."""
    code = error_code_for(exc)
    if isinstance(exc, RecordValidationError):
        return _partition_response(index, code, log_start_offset=partition.log_start_offset, message=str(exc),
                                   record_errors=[RecordError(batch_index=e.batch_index,
                                                              batch_index_error_message=e.message)
                                                  for e in exc.record_errors])
    return _partition_response(index, code, message=str(exc) or None)


def handle(context: RequestContext, request: ProduceRequest):
    # KIP-951 (v10+): refused partitions name their current leader (api/_leader_hints.py).
    return leader_hints.add_to_produce(context, _handle(context, request))


def _resolve_topic_ids(services, request) -> None:
    """v13+: the name of each topic id, into the request (None for an unknown id, answered
    UNKNOWN_TOPIC_ID per partition); the response names topics by the ids asked for."""
    by_id = services.registry.topics.by_id
    for topic_data in request.topic_data:
        info = by_id.get(topic_data.topic_id)
        topic_data.name = info.name if info is not None else None


def _up_convert(request) -> None:
    """Produce v0-v2: message sets of magic 0 or 1 as v2 batches (records/legacy.py)."""
    from eoslog.records.legacy import magic_of, up_convert

    for topic_data in request.topic_data:
        for data in topic_data.partition_data:
            if data.records and magic_of(data.records) in (0, 1):
                try:
                    data.records = up_convert(data.records)
                except Exception:  # left as it came: the log refuses it as corrupt
                    logging.getLogger(__name__).info("an old message set for %s does not parse", topic_data.name,
                                                     exc_info=True)


def _handle(context, request):
    if context.api_version >= TOPIC_IDS_SINCE:
        _resolve_topic_ids(context.services, request)
    if context.api_version < OLDEST_V2_PRODUCE:
        _up_convert(request)
    if request.acks not in (-1, 0, 1):
        raise InvalidRequiredAcksError(f"acks must be -1, 0 or 1, got {request.acks}")
    # Kafka's order: the transactional id first (the whole request), then WRITE per topic.
    if request.transactional_id is not None:
        context.require(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
    refused = _unauthorized(context, request)
    services = context.services
    transactional_id = request.transactional_id
    if transactional_id is None:
        return _append(context, request, refused=refused)
    ownership = services.coordinators.transaction_ownership(transactional_id)
    if context.api_version >= IMPLICIT_ADD_SINCE and ownership is Ownership.OWNED:
        to_add, _ = _needing_verification(services, request, refused)
        if to_add:
            release = context.connection.hold()
            return _add_then_append(context, request, to_add, release, refused)
        return _append(context, request, refused=refused)
    if ownership is Ownership.NOT_COORDINATOR:  # another broker coordinates it: ask there
        to_verify, verified = _needing_verification(services, request, refused)
        if to_verify:
            release = context.connection.hold()
            verification = services.transaction_verification
            # Transaction version 2 asks the coordinator to add the partitions, version 1 to verify them.
            ask = (verification.add_remotely if context.api_version >= IMPLICIT_ADD_SINCE
                   else verification.verify_remotely)
            return _verify_then_append(context, request, to_verify, verified, release, refused, ask)
        return _append(context, request, verified, refused)
    return _append(context, request, refused=refused)


def _unauthorized(context, request):
    """{(topic, index): refusal} for the partitions of topics the principal may not WRITE to."""
    if not context.services.authorizer.keeps_acls:
        return NOTHING_REFUSED  # the hot path without ACLs: nothing to build
    names = {t.name for t in request.topic_data if t.name is not None}
    denied = names - context.authorized_names(AclOperation.WRITE, ResourceType.TOPIC, names)
    if not denied:
        return NOTHING_REFUSED  # the hot path: nothing to build
    return {(t.name, p.index): (ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
            for t in request.topic_data if t.name in denied for p in t.partition_data}


def _needing_verification(services, request, refused):
    """Partitions of a transactional request whose first batch of this transaction must be verified
    with the remote coordinator: {(topic, index): (producer id, epoch, guard)}; and those already open
    in this producer's transaction here (verified when that transaction's first batch was)."""
    to_verify, verified = {}, set()
    for topic_data in request.topic_data:
        for data in topic_data.partition_data:
            key = (topic_data.name, data.index)
            partition = services.registry.partitions.get(key)
            if partition is None or not data.records or key in refused:
                continue  # the append answers for it
            try:
                header = next(iter_headers(data.records, verify_crc=False))
            except (KafkaError, StopIteration, ValueError):
                continue
            if not header.is_transactional:
                continue
            entry = partition.producer_state.get(header.producer_id)
            if entry is not None and entry.producer_epoch == header.producer_epoch and entry.has_open_transaction:
                verified.add(key)
            else:
                to_verify[key] = (header.producer_id, header.producer_epoch, _guard(partition, header.producer_id))
    return to_verify, verified


def _guard(partition, producer_id):
    """What must not change between asking the coordinator and appending: the partition's leadership
    and the producer's entry there (a marker, a truncation or a reload replaces it)."""
    state = partition.producer_state
    return partition.leader_epoch, state, state.get(producer_id)


async def _verify_then_append(context, request, to_verify, verified, release, refused, ask):
    """``ask(transactional_id, producer_id, epoch, keys)`` is the coordinator's answer per partition:
    None when the partition is in that producer's ongoing transaction, else the error to refuse with."""
    refused = dict(refused)
    try:
        by_producer = {}
        for key, (producer_id, producer_epoch, _) in to_verify.items():
            by_producer.setdefault((producer_id, producer_epoch), []).append(key)
        answers = await asyncio.gather(*(
            asyncio.wait_for(ask(request.transactional_id, pid, epoch, keys), REMOTE_VERIFY_TIMEOUT_S)
            for (pid, epoch), keys in by_producer.items()), return_exceptions=True)
        for keys, answer in zip(by_producer.values(), answers):
            for key in keys:
                error = answer if isinstance(answer, BaseException) else answer[key]
                if isinstance(error, asyncio.CancelledError):
                    raise error
                if error is None:
                    partition = context.services.registry.partitions.get(key)
                    if partition is not None and _guard(partition, to_verify[key][0]) == to_verify[key][2]:
                        verified.add(key)
                        continue
                    error = error_for_code(ErrorCode.NOT_ENOUGH_REPLICAS)(f"{key[0]}-{key[1]} changed while the transaction was "
                                                   f"verified; retry")
                code = ErrorCode.REQUEST_TIMED_OUT if isinstance(error, TimeoutError) else error_code_for(error)
                if code in _RETRIABLE_VERIFY_CODES or code is ErrorCode.REQUEST_TIMED_OUT:
                    code = ErrorCode.NOT_ENOUGH_REPLICAS
                refused[key] = (code, str(error) or type(error).__name__)
        result = _append(context, request, verified, refused)
    finally:
        release()
    return await result if inspect.isawaitable(result) else result  # a coroutine or _await_durability's future


async def _add_then_append(context, request, to_add, release, refused):
    """Transaction version 2: the partitions opening the producer's transaction here are added to it by
    the coordinator (one __transaction_state record per producer identity in the request), then
    everything is appended. A refused add refuses those partitions' batches; the append's own
    verification catches a transaction that ended in between."""
    refused = dict(refused)
    try:
        by_producer: dict[tuple[int, int], list[tuple[str, int]]] = {}
        for key, (producer_id, producer_epoch, _) in to_add.items():
            by_producer.setdefault((producer_id, producer_epoch), []).append(key)
        coordinator = context.services.coordinators.transactions
        for (producer_id, producer_epoch), keys in by_producer.items():
            try:
                await coordinator.add_partitions_for_produce(request.transactional_id, producer_id, producer_epoch,
                                                             keys)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - those partitions' answer, mapped in one place
                refused.update({key: (error_code_for(error), str(error)) for key in keys})
        result = _append(context, request, refused=refused)
    finally:
        release()
    return await result if inspect.isawaitable(result) else result  # a coroutine or _await_durability's future


def _append(context, request, verified=frozenset(), refused=None):
    services = context.services
    replicas = services.replicas
    responses = []
    waits: list[_Wait] = []
    deferred: list[_Deferred] = []
    for topic_data in request.topic_data:
        partition_responses = []
        responses.append(TopicResponse(name=topic_data.name, topic_id=topic_data.topic_id,
                                       partition_responses=partition_responses))
        for data in topic_data.partition_data:
            if refused and (topic_data.name, data.index) in refused:
                code, message = refused[(topic_data.name, data.index)]
                partition_responses.append(_partition_response(data.index, int(code), message=message))
                continue
            response, wait, catch_up = _append_partition(request, topic_data, data, verified, replicas, True)
            if catch_up is not None:
                deferred.append(_Deferred(topic_data, data, partition_responses, len(partition_responses), catch_up))
            partition_responses.append(response)
            if wait is not None:
                waits.append(wait)
    if deferred:
        release = context.connection.hold()
        return _catch_up_then_append(request, verified, replicas, responses, waits, deferred, release)
    return _answer(request, responses, waits, replicas)


def _append_partition(request, topic_data, data, verified, replicas, may_defer: bool):
    """One partition's append: its response, its acks=all wait (or None), and, when ``may_defer`` and its
    records were refused by a check whose knowledge may lag (a schema id the broker's copy of the registry
    has not read yet), the awaitable after which the batch is worth appending again (else None)."""
    partition = None
    try:
        if topic_data.name is None:
            raise UnknownTopicIdError(f"no topic has the id {topic_data.topic_id}")
        if topic_data.name in INTERNAL_TOPICS:
            raise InvalidTopicError(f"clients may not produce to the internal topic {topic_data.name}")
        partition = replicas.leader_partition(topic_data.name, data.index)
        if data.records is None or len(data.records) == 0:
            raise InvalidRecordError("the produce request carries no record batches")
        if request.acks == -1:
            replicas.check_enough_replicas(partition)  # NOT_ENOUGH_REPLICAS: nothing written
        info = partition.append(data.records, transactional_id=request.transactional_id,
                                verified=(topic_data.name, data.index) in verified)
    except Exception as exc:  # noqa: BLE001 - per-partition outcome, mapped in one place
        catch_up = _catch_up(exc, partition) if may_defer else None
        return _refusal(data.index, exc, partition), None, catch_up
    response = _partition_response(data.index, 0, info.first_offset, info.log_append_time, partition.log_start_offset)
    # Duplicates wait too: the retried original may itself still be waiting for its fsync. A
    # partition whose high watermark already covers the batch (no fsync on ack, so append made it
    # durable under the flush policy) has nothing to wait for, unless followers are involved:
    # then every acks=all answer goes through _outcomes (min.insync.replicas after append).
    if request.acks == -1 and (partition.high_watermark <= info.last_offset or replicas.replicated(partition)):
        return response, _Wait(partition, response, info.last_offset + 1), None
    return response, None, None


def _catch_up(exc: Exception, partition):
    """The awaitable a refusing RecordCheck offers (``catch_up(refusal)``, schema_registry/validation.py),
    or None."""
    if not isinstance(exc, RecordValidationError) or partition is None:
        return None
    for check in partition.record_checks:
        offer = getattr(check, "catch_up", None)
        awaitable = offer(exc) if offer is not None else None
        if awaitable is not None:
            return awaitable
    return None


class _Deferred(NamedTuple):
    """A partition whose batch waits for a check to catch up, and where its response goes."""

    topic_data: object
    data: object
    responses: list
    position: int
    catch_up: object


async def _catch_up_then_append(request, verified, replicas, responses, waits, deferred, release):
    """The refused batches are appended again once their checks caught up (with a deadline: the
    request's timeout), the connection held meanwhile so that the producer's next request cannot overtake
    them (as for KIP-890's verification above). A batch still refused is answered with that refusal."""
    try:
        pending = {asyncio.ensure_future(d.catch_up) for d in deferred}
        await asyncio.wait(pending, timeout=max(0.0, request.timeout_ms / 1000))
        for d in deferred:
            response, wait, _ = _append_partition(request, d.topic_data, d.data, verified, replicas, False)
            d.responses[d.position] = response
            if wait is not None:
                waits.append(wait)
        result = _answer(request, responses, waits, replicas)
    finally:
        release()
    return await result if inspect.isawaitable(result) else result  # None (acks=0), a response or a future


def _answer(request, responses, waits, replicas):
    if request.acks == 0:
        return None
    result = ProduceResponse(responses=responses, throttle_time_ms=0)
    if not waits:
        return result
    if all(wait.done for wait in waits):
        # Already acknowledged everywhere: answer now, no task and no wait per request.
        return _outcomes(result, waits, False, replicas)
    return _await_durability(result, waits, request.timeout_ms, replicas)


class _Wait:
    """One partition's acks=all wait: done once the high watermark reached ``target`` (``error`` set when
    the wait failed instead)."""

    __slots__ = ("done", "error", "partition", "response", "target")

    def __init__(self, partition, response: PartitionResponse, target: int) -> None:
        self.partition = partition
        self.response = response
        self.target = target
        self.done = partition.high_watermark >= target
        self.error: BaseException | None = None


def _await_durability(result, waits: list[_Wait], timeout_ms: int, replicas) -> asyncio.Future:
    """A future of the response, done when every partition's wait ended or at the request's timeout.
    Callbacks on the partitions and a shared deadline queue rather than a coroutine around
    ``asyncio.wait``, a future per partition or a timer per request: with 1,000 partitions nearly every
    acks=all request waits, and each of those showed in the loop's profile (docs/benchmarks.md, "One
    syncfs per round" and "Broker CPU per produced record")."""
    answer = EagerFuture()  # the dispatcher encodes the response as soon as it is settled
    remaining = sum(1 for wait in waits if not wait.done)
    deadline = None

    def settle(timed_out: bool) -> None:
        # Nothing to do once the answer is done: the connection closed meanwhile (the answer was
        # cancelled; its deadline and the partitions' callbacks then find it done), or the deadline and
        # the last wait raced.
        if answer.done():
            return
        deadline.cancel()
        try:
            answer.set_result(_outcomes(result, waits, timed_out, replicas))
        except Exception as exc:  # noqa: BLE001 - the dispatcher maps it, as it would a handler's
            answer.set_exception(exc)

    def watch(wait: _Wait):
        def finished(exc: BaseException | None) -> None:  # called by the partition, once
            nonlocal remaining
            wait.done, wait.error = True, exc
            remaining -= 1
            if remaining == 0:
                settle(False)
        return finished

    deadline = deadlines_for(answer.get_loop()).add(timeout_ms, lambda: settle(True))
    for wait in waits:
        if not wait.done:
            wait.partition.on_high_watermark(wait.target, watch(wait))
    return answer


def _outcomes(result, waits: list[_Wait], timed_out: bool, replicas):
    """Each partition's answer once its wait ended: timed out, failed, or acknowledged."""
    for wait in waits:
        response = wait.response
        if not wait.done:
            if timed_out:
                response.error_code = int(ErrorCode.REQUEST_TIMED_OUT)
        elif wait.error is not None:
            response.error_code = int(error_code_for(wait.error))
            response.error_message = str(wait.error)
        else:
            # The ISR has it; Kafka still refuses the acknowledgement when the ISR shrank below
            # min.insync.replicas meanwhile (NOT_ENOUGH_REPLICAS_AFTER_APPEND, retriable).
            try:
                replicas.check_enough_replicas_after_append(wait.partition)
            except Exception as exc:  # noqa: BLE001 - mapped in one place
                response.error_code = int(error_code_for(exc))
                response.error_message = str(exc)
    return result



def error_response(context: RequestContext, request: ProduceRequest, code: ErrorCode):
    return ProduceResponse(
        responses=[
            TopicResponse(name=t.name, topic_id=t.topic_id,
                          partition_responses=[_partition_response(p.index, int(code)) for p in t.partition_data])
            for t in request.topic_data
        ],
        throttle_time_ms=0,
    )
