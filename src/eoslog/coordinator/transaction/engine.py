"""What an extension of the transaction coordinator may use of it, and what it offers back.

eoslog's extensions over Kafka's transactions -- transaction groups (coordinator/transaction_groups/) and
check-back transactions (coordinator/check_back/) -- move transactional ids only through the pure core's
decisions (decisions.py) carried out by the coordinator, so prepare -> log -> apply and the marker
machinery stay in one place. This module is the whole contract between them: an extension is built
with a :class:`TransactionEngine` and registered with it (server/broker.py), and touches nothing else of
the coordinator. A new extension is one package, written against these two protocols, plus that
registration.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Any, Protocol

from eoslog.coordinator.transaction.decisions import Decision, TransactionConfig, TxnError
from eoslog.coordinator.transaction.metadata import TransactionMetadata, TxnTransitMetadata, WriteTxnMarkers
from eoslog.protocol.errors import ErrorCode

# A transactional id's transit into Checking was logged: (transactional id, transit, why).
CheckingListener = Callable[[str, TxnTransitMetadata, str], None]


class TransactionEngine(Protocol):
    """The transaction coordinator, as its extensions see it. Only the broker's event loop calls it."""

    config: TransactionConfig
    test_faults: dict[str, Any]  # eoslog.test.* broker properties (server/config.py)

    # ---- the cache ----------------------------------------------------------------------------------
    def get(self, transactional_id: str) -> TransactionMetadata | None:
        """The id's metadata, None if this broker knows no such id."""

    def all_metadata(self) -> Iterator[TransactionMetadata]:
        """Every transactional id coordinated here."""

    def partition_states(self) -> list[dict[str, TransactionMetadata]]:
        """The cache, one dict per ``__transaction_state`` partition coordinated here."""

    @staticmethod
    def now_ms() -> int: ...

    # ---- ownership ----------------------------------------------------------------------------------
    def partition_for(self, key: str) -> int:
        """The ``__transaction_state`` partition of a transactional id (or of any key hashed as one)."""

    def owns(self, key: str) -> bool:
        """Whether this broker coordinates the key's partition now."""

    def ownership_error(self, key: str) -> ErrorCode | None:
        """None when owned; else NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS."""

    def coordinated_together(self, a: str, b: str) -> bool:
        """Whether two keys always share a coordinator (every key on a sole broker; one partition's on a
        cluster)."""

    def admit(self, transactional_id: str) -> TxnError | None:
        """Why a request may not move ``transactional_id`` now (not coordinated here, or held by an
        extension's guard), or None."""

    def ensure_state_topic(self) -> None:
        """``__transaction_state`` created on first use."""

    # ---- carrying out ---------------------------------------------------------------------------------
    async def carry_out(self, transactional_id: str, metadata: TransactionMetadata | None,
                        decision: Decision) -> TxnError:
        """Logs and applies ``decision``'s transit, then starts its markers; the error to answer."""

    def complete(self, markers: WriteTxnMarkers) -> asyncio.Task:
        """The task writing ``markers`` and the Complete record of an id whose decision is logged: the
        running one, or a new one when none runs."""

    def completion(self, transactional_id: str) -> asyncio.Task | None:
        """The task completing the id's decided transaction, if one runs."""

    async def wait_for_completion(self, transactional_id: str, timeout_s: float) -> bool:
        """Waits (at most ``timeout_s``) for the running completion of the id; False if it took longer."""

    def write_durably(self, key: str, batch: bytes) -> Awaitable[Any]:
        """Appends ``batch`` (records of the extension's own, under its own key version) to the key's
        ``__transaction_state`` partition; done once durable, in append order."""

    def spawn(self, coroutine: Coroutine[Any, Any, Any]) -> asyncio.Task:
        """Runs ``coroutine`` as a task the coordinator cancels when it stops or gives the work up."""

    def add_checking_listener(self, listener: CheckingListener) -> None:
        """Called whenever a transit into Checking was logged by the coordinator's own timer."""


class TransactionExtension(Protocol):
    """What the coordinator calls on each registered extension."""

    def load(self, index: int, records: list[tuple[bytes, bytes | None]]) -> None:
        """A ``__transaction_state`` partition was read: its (key, value) records, in log order (the
        extension takes its own key versions and skips the rest)."""

    def unload(self, index: int) -> None:
        """The partition is coordinated elsewhere now: forget what came from it."""

    def recover(self, index: int) -> int:
        """After every partition of a load is read and the core's own recovery started: resume what the
        partition says was decided; returns how many things it resumed."""

    def admit(self, transactional_id: str) -> TxnError | None:
        """The extension's admission guard: why no request (nor the timer) may move the id now, or None."""

    async def on_timer(self, now_ms: int, expiration_due: bool) -> None:
        """The coordinator's periodic work (transaction.abort.timed.out.transaction.cleanup.interval.ms);
        ``expiration_due`` when transactional ids were just expired (hourly, as Kafka)."""
