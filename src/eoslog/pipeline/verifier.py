"""Checks the pipeline's output against the transfers the generator produced (regenerated from the seed).

Verified, each as its own named check in the report:
- every valid transfer has exactly two ledger entries: a debit of ``from`` and a credit of ``to``, with
  amounts -a and +a;
- every invalid transfer appears exactly once in ``payments-rejected``, with the expected reason, and
  never in the ledger;
- nothing in the output names a transfer that was never generated;
- money is conserved: the ledger sums to zero, and per account it equals the expected balance;
- in the Avro run (``v2_from``), every ledger entry carries its transfer's currency: the one a v2 transfer
  was written with, and v2's default for a v1 transfer.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from eoslog.pipeline.generator import DEFAULT_CURRENCY, Topics, transfers


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


@dataclass
class Report:
    transfers: int = 0
    valid: int = 0
    invalid: int = 0
    ledger_entries: int = 0
    rejects: int = 0
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def add(self, name: str, ok: bool, detail: str) -> None:
        self.checks.append(Check(name, ok, detail))


def read_topic(bootstrap: str, topic: str, timeout_s: float = 60.0) -> list[bytes]:
    """Every value of ``topic`` a read_committed consumer sees, up to the partitions' current ends."""
    import time

    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "eoslog-pipeline-verifier",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                         "fetch.max.bytes": 52_428_800})
    try:
        metadata = consumer.list_topics(topic, timeout=30)
        parts = sorted(metadata.topics[topic].partitions) if topic in metadata.topics else []
        if not parts or metadata.topics[topic].error is not None:
            return []
        consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        at_eof, values = set(), []
        deadline = time.monotonic() + timeout_s
        while len(at_eof) < len(parts):
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic}: partitions {set(parts) - at_eof} did not reach their end")
            for m in consumer.consume(50_000, 0.5):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        at_eof.add(m.partition())
                        continue
                    raise RuntimeError(m.error().str())
                at_eof.discard(m.partition())
                values.append(m.value())
        return values
    finally:
        consumer.close()


def verify(bootstrap: str, count: int, accounts: int, seed: int, topics: Topics | None = None,
           v2_from: int | None = None) -> Report:
    topics = topics or Topics()
    ledger = [json.loads(v) for v in read_topic(bootstrap, topics.ledger)]
    rejects = [json.loads(v) for v in read_topic(bootstrap, topics.rejected)]
    return check(list(transfers(count, accounts, seed, v2_from=v2_from)), ledger, rejects,
                 currencies=v2_from is not None)


def check(expected, ledger: list[dict], rejects: list[dict], currencies: bool = False) -> Report:
    report = Report(transfers=len(expected), ledger_entries=len(ledger), rejects=len(rejects))
    by_id = {t.id: t for t in expected}
    entries = defaultdict(list)
    for e in ledger:
        entries[e["transfer"]].append(e)
    reject_counts = Counter(r["transfer"] for r in rejects)
    reject_reason = {r["transfer"]: r["reason"] for r in rejects}

    bad_ledger, bad_rejects, missing, duplicated = [], [], 0, 0
    expected_balance: Counter = Counter()
    for t in expected:
        reason = t.reject_reason
        if reason is None:
            report.valid += 1
            expected_balance[t.source] -= t.amount
            expected_balance[t.target] += t.amount
            got = sorted((e["entry"], e["account"], e["amount"]) for e in entries.get(t.id, []))
            want = [("credit", t.target, t.amount), ("debit", t.source, -t.amount)]
            if got != want:
                missing += len(got) < 2
                duplicated += len(got) > 2
                bad_ledger.append((t.id, got))
            if reject_counts.get(t.id):
                bad_rejects.append((t.id, "valid transfer rejected"))
        else:
            report.invalid += 1
            n = reject_counts.get(t.id, 0)
            if n != 1 or reject_reason.get(t.id) != reason:
                missing += n == 0
                duplicated += n > 1
                bad_rejects.append((t.id, f"{n} rejects, reason {reject_reason.get(t.id)!r}, want {reason!r}"))
            if t.id in entries:
                bad_ledger.append((t.id, "invalid transfer in the ledger"))
    strangers = (set(entries) | set(reject_counts)) - set(by_id)

    report.add("valid transfers: exactly 2 ledger entries each (debit + credit)", not bad_ledger,
               f"{report.valid} valid, {len(bad_ledger)} wrong" + (f", e.g. {bad_ledger[0]}" if bad_ledger else ""))
    report.add("invalid transfers: exactly 1 reject each, with the right reason", not bad_rejects,
               f"{report.invalid} invalid, {len(bad_rejects)} wrong" + (f", e.g. {bad_rejects[0]}" if bad_rejects else ""))
    report.add("no lost and no duplicated transfers", missing == 0 and duplicated == 0,
               f"{missing} missing, {duplicated} duplicated")
    report.add("no output for transfers never generated", not strangers, f"{len(strangers)} unknown ids")
    total = sum(e["amount"] for e in ledger)
    report.add("money is conserved: the ledger sums to zero", total == 0, f"sum = {total}")
    balances: Counter = Counter()
    for e in ledger:
        balances[e["account"]] += e["amount"]
    wrong_accounts = [a for a in set(balances) | set(expected_balance) if balances[a] != expected_balance[a]]
    report.add("every account's balance is as expected", not wrong_accounts,
               f"{len(expected_balance)} accounts, {len(wrong_accounts)} wrong")
    if currencies:
        wrong = [(e["transfer"], e.get("currency")) for e in ledger if e["transfer"] in by_id
                 and e.get("currency") != (by_id[e["transfer"]].currency or DEFAULT_CURRENCY)]
        v2 = sum(1 for t in expected if t.currency is not None)
        report.add("schema change: every ledger entry has its transfer's currency (v1 transfers: v2's default)",
                   not wrong, f"{len(expected) - v2} v1 and {v2} v2 transfers, {len(wrong)} entries wrong"
                   + (f", e.g. {wrong[0]}" if wrong else ""))
    return report
