"""Produce (key 0): append record batches; acks=0/1/all; responses in request order per connection.

The append itself is synchronous, so batches from one connection land in the order they arrived; only
the acks=all wait (the group-commit fsync) is asynchronous.
"""

from __future__ import annotations

import asyncio

from eoslog.cluster.topics import INTERNAL_TOPICS
from eoslog.protocol.errors import ErrorCode, InvalidRecordError, InvalidRequiredAcksError, InvalidTopicError
from eoslog.protocol.messages import ProduceResponse
from eoslog.server.errors import error_code_for

API_KEY = 0
MIN_VERSION = 3
MAX_VERSION = 11

TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = ProduceResponse.PartitionProduceResponse
NO_TIMESTAMP = -1


def _partition_response(index: int, code: int, base_offset: int = -1, log_append_time: int = NO_TIMESTAMP,
                        log_start_offset: int = -1, message: str | None = None) -> PartitionResponse:
    return PartitionResponse(index=index, error_code=code, base_offset=base_offset,
                             log_append_time_ms=log_append_time, log_start_offset=log_start_offset,
                             record_errors=[], error_message=message)


def handle(context, request):
    broker = context.broker
    replicas = broker.cluster.replicas if broker.cluster is not None else None
    acks = request.acks
    if acks not in (-1, 0, 1):
        raise InvalidRequiredAcksError(f"acks must be -1, 0 or 1, got {acks}")
    responses = []
    waits: list[tuple[asyncio.Future, PartitionResponse, int]] = []
    for topic_data in request.topic_data:
        partition_responses = []
        responses.append(TopicResponse(name=topic_data.name, partition_responses=partition_responses))
        for data in topic_data.partition_data:
            try:
                if topic_data.name in INTERNAL_TOPICS:
                    raise InvalidTopicError(f"clients may not produce to the internal topic {topic_data.name}")
                partition = broker.registry.leader_partition(topic_data.name, data.index)
                if data.records is None or len(data.records) == 0:
                    raise InvalidRecordError("the produce request carries no record batches")
                if acks == -1 and replicas is not None:
                    replicas.check_enough_replicas(partition)  # NOT_ENOUGH_REPLICAS: nothing written
                info = partition.append(data.records, transactional_id=request.transactional_id)
            except Exception as exc:  # noqa: BLE001 - per-partition outcome, mapped in one place
                code = error_code_for(exc)
                partition_responses.append(_partition_response(data.index, code, message=str(exc) or None))
                continue
            response = _partition_response(
                data.index, 0, info.first_offset, info.log_append_time, partition.log_start_offset
            )
            partition_responses.append(response)
            if acks == -1:
                # Duplicates wait too: the retried original may itself still be waiting for its fsync.
                waits.append((partition.wait_for_high_watermark(info.last_offset + 1), response, partition))
    if acks == 0:
        return None
    result = ProduceResponse(responses=responses, throttle_time_ms=0)
    if not waits:
        return result
    return _await_durability(result, waits, request.timeout_ms, replicas)


async def _await_durability(result, waits, timeout_ms: int, replicas):
    futures = [future for future, _, _ in waits]
    done, pending = await asyncio.wait(futures, timeout=max(timeout_ms, 0) / 1000)
    for future, response, partition in waits:
        if future in pending:
            future.cancel()
            response.error_code = int(ErrorCode.REQUEST_TIMED_OUT)
        elif future.exception() is not None:
            response.error_code = int(error_code_for(future.exception()))
            response.error_message = str(future.exception())
        elif replicas is not None:
            # The ISR has it; Kafka still refuses the acknowledgement when the ISR shrank below
            # min.insync.replicas meanwhile (NOT_ENOUGH_REPLICAS_AFTER_APPEND, retriable).
            try:
                replicas.check_enough_replicas_after_append(partition)
            except Exception as exc:  # noqa: BLE001 - mapped in one place
                response.error_code = int(error_code_for(exc))
                response.error_message = str(exc)
    return result



def error_response(context, request, code):
    return ProduceResponse(
        responses=[
            TopicResponse(name=t.name, partition_responses=[_partition_response(p.index, int(code)) for p in t.partition_data])
            for t in request.topic_data
        ],
        throttle_time_ms=0,
    )
