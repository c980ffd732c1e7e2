"""Payment transfers, deterministic from a seed, some of them invalid on purpose.

A transfer is JSON ``{"id", "from", "to", "amount", "ts"}`` with ``amount`` in cents (an integer, so the
ledger sums exactly). Invalid ones: a non-positive amount, the same account on both sides, or an
account that does not exist. The verifier regenerates the same sequence instead of trusting the
``payments`` topic, so a record lost *before* Spark would be caught too.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass

PAYMENTS = "payments"
LEDGER = "ledger"
REJECTED = "payments-rejected"


@dataclass(frozen=True)
class Topics:
    """The pipeline's three topics; a prefix lets several runs share one broker."""

    payments: str = PAYMENTS
    ledger: str = LEDGER
    rejected: str = REJECTED

    @classmethod
    def with_prefix(cls, prefix: str) -> Topics:
        return cls(prefix + PAYMENTS, prefix + LEDGER, prefix + REJECTED)

NEGATIVE_AMOUNT = "negative_amount"
SAME_ACCOUNT = "same_account"
UNKNOWN_ACCOUNT = "unknown_account"


def account(n: int) -> str:
    return f"acc-{n:05d}"


@dataclass(frozen=True, slots=True)
class Transfer:
    id: str
    source: str
    target: str
    amount: int
    ts: int
    currency: str | None = None  # set from the Avro run's schema change on (TRANSFER_V2)

    @property
    def reject_reason(self) -> str | None:
        """Why the job must reject this transfer; the order of checks is the job's order too."""
        if self.amount <= 0:
            return NEGATIVE_AMOUNT
        if self.source == self.target:
            return SAME_ACCOUNT
        if not (self.source.startswith("acc-") and self.target.startswith("acc-")):
            return UNKNOWN_ACCOUNT
        return None

    def to_json(self) -> bytes:
        return json.dumps({"id": self.id, "from": self.source, "to": self.target, "amount": self.amount,
                           "ts": self.ts}, separators=(",", ":")).encode()


def transfers(count: int, accounts: int = 1000, seed: int = 7, start_ms: int = 1_700_000_000_000,
              v2_from: int | None = None) -> Iterator[Transfer]:
    """``v2_from``: transfers from this index on carry a currency (the Avro run's second schema version);
    it is chosen by index, not by the random generator, so every other field stays as without it."""
    rng = random.Random(seed)
    for n in range(count):
        source, target = rng.randrange(accounts), rng.randrange(accounts)
        amount = rng.randrange(1, 100_000)
        roll = rng.random()
        source_name, target_name = account(source), account(target)
        if roll < 0.03:
            amount = -amount if roll < 0.02 else 0
        elif roll < 0.05:
            target_name = source_name
        elif roll < 0.07:
            target_name = f"ghost-{target:05d}"
        elif source == target:
            target_name = account((target + 1) % accounts)
        currency = CURRENCIES[n % len(CURRENCIES)] if v2_from is not None and n >= v2_from else None
        yield Transfer(f"tx-{seed}-{n:09d}", source_name, target_name, amount, start_ms + n, currency)


# The Avro run (``eoslog pipeline --avro``): payments in the schema registry's wire format under subject
# ``<payments>-value``; halfway, version 2 adds ``currency`` with a default, a BACKWARD-compatible change.
TRANSFER_V1 = {"type": "record", "name": "Transfer", "namespace": "eoslog.pipeline", "fields": [
    {"name": "id", "type": "string"}, {"name": "from", "type": "string"}, {"name": "to", "type": "string"},
    {"name": "amount", "type": "long"}, {"name": "ts", "type": "long"}]}
DEFAULT_CURRENCY = "EUR"
TRANSFER_V2 = {**TRANSFER_V1, "fields": TRANSFER_V1["fields"] + [
    {"name": "currency", "type": "string", "default": DEFAULT_CURRENCY}]}
CURRENCIES = ("EUR", "USD", "CHF")


def avro_value(t: Transfer) -> dict:
    value = {"id": t.id, "from": t.source, "to": t.target, "amount": t.amount, "ts": t.ts}
    if t.currency is not None:
        value["currency"] = t.currency
    return value


def produce(bootstrap: str, count: int, accounts: int, seed: int, progress=None, topic: str = PAYMENTS,
            first: int = 0, serialize=None, v2_from: int | None = None) -> int:
    """Writes transfers ``first``..``count`` (key = transfer id) with an idempotent producer; returns how
    many. ``serialize(transfer) -> bytes`` replaces the JSON value (the Avro run's serializer)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 10,
                         "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
                         "delivery.report.only.error": True,
                         "on_delivery": lambda err, msg: _raise(err) if err else None})
    sent = 0
    for n, t in enumerate(transfers(count, accounts, seed, v2_from=v2_from)):
        if n < first:
            continue
        while True:
            try:
                producer.produce(topic, t.to_json() if serialize is None else serialize(t), t.id.encode())
                break
            except BufferError:
                producer.poll(0.05)
        sent += 1
        if sent % 10_000 == 0:
            producer.poll(0)
            if progress is not None:
                progress(first + sent)
    if producer.flush(120) != 0:
        raise RuntimeError("payments not all delivered")
    if progress is not None:
        progress(first + sent)
    return sent


def _raise(err) -> None:
    raise RuntimeError(f"payment not delivered: {err}")
