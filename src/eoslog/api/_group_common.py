"""Helpers shared by the group API modules (JoinGroup ... OffsetDelete): the group coordinator, the wire
code of a group error, the client host as Kafka reports it."""

from __future__ import annotations

import inspect
from typing import Any

from eoslog.coordinator.group.errors import Errors
from eoslog.protocol.errors import ErrorCode


def group_coordinator(context: Any):
    """The group coordinator (coordinator/group/shard.py), built on its first request."""
    return context.services.coordinators.groups


def code(error: Errors) -> int:
    """The core answers with Kafka's error *names*; the numbers live in protocol/errors.py only."""
    return int(ErrorCode[error.value])


def client_host(context: Any) -> str:
    # Kafka reports the peer's InetAddress.toString(): "/127.0.0.1".
    peer = context.connection.peer
    return "/" + peer.rsplit(":", 1)[0] if peer and peer != "?" else ""


async def resolve(answer: Any) -> Any:
    """The core's answer, awaited if it comes later."""
    return await answer if inspect.isawaitable(answer) else answer


def commit_response(response_cls: Any, request: Any, errors: dict[tuple[str, int], int], default: int = 0) -> Any:
    """An OffsetCommit / TxnOffsetCommit response: one entry per requested partition, in request order,
    with its error code (``default`` when none was recorded). Both responses have the same shape."""
    topic_cls = getattr(response_cls, response_cls.__name__ + "Topic")
    partition_cls = getattr(response_cls, response_cls.__name__ + "Partition")
    return response_cls(throttle_time_ms=0, topics=[
        topic_cls(name=t.name, partitions=[
            partition_cls(partition_index=p.partition_index,
                          error_code=errors.get((t.name, p.partition_index), default))
            for p in t.partitions])
        for t in request.topics])


async def respond_to_commit(response_cls: Any, request: Any, answer: Any, errors: dict[tuple[str, int], int]) -> Any:
    """Waits for the core's answer to a commit (if any) and builds the response from it."""
    if answer is not None:
        resp = await resolve(answer)
        for result in resp.partitions:
            errors[(result.topic, result.partition)] = code(result.error)
    return commit_response(response_cls, request, errors)
