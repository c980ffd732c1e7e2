"""Helpers shared by the group API modules (JoinGroup ... OffsetDelete): the group service, the wire
code of a group error, the client host as Kafka reports it."""

from __future__ import annotations

import inspect
from typing import Any

from eoslog.coordinator.group.errors import Errors
from eoslog.protocol.errors import CoordinatorNotAvailableError, ErrorCode


def service(context: Any):
    group_service = getattr(context.broker, "group_service", None)
    if group_service is None:
        raise CoordinatorNotAvailableError("the group coordinator is not running")
    return group_service


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
