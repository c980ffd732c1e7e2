"""A tiny stand-in for the coordinator's I/O shell: a cache, a __transaction_state list, a pid counter.

It carries Decisions out exactly as decisions.py's docstring says, so tests exercise that protocol too.
"""

from __future__ import annotations

from eoslog.coordinator.transaction import decisions as d
from eoslog.coordinator.transaction.log_format import encode_key, encode_value
from eoslog.coordinator.transaction.metadata import TopicPartition, TransactionResult
from eoslog.coordinator.transaction.state import TransactionState

CONFIG = d.TransactionConfig(transaction_max_timeout_ms=900_000, transactional_id_expiration_ms=3_600_000,
                             offsets_topic_num_partitions=50)


class Harness:
    def __init__(self) -> None:
        self.states = {}
        self.log: list[tuple[bytes, bytes | None]] = []
        self.next_producer_id = 1000
        self.now = 1_000_000
        self.config = CONFIG

    def allocate(self) -> int:
        pid = self.next_producer_id
        self.next_producer_id += 1
        return pid

    def carry_out(self, tid: str, decision: d.Decision, *, append_fails: bool = False) -> d.Decision:
        if decision.new_metadata is not None:
            assert tid not in self.states or self.states[tid].state is TransactionState.DEAD
            self.states[tid] = decision.new_metadata
        if decision.transit is not None:
            metadata = self.states[tid]
            assert metadata.pending_transit is decision.transit
            if append_fails:
                metadata.abort_transition()
                if decision.new_metadata is not None:
                    del self.states[tid]  # never logged, never handed out
                return decision
            self.log.append((encode_key(tid), encode_value(decision.transit)))
            metadata.complete_transition(decision.transit)
            if metadata.state is TransactionState.DEAD:
                del self.states[tid]
        else:
            assert decision.write_markers is None
        return decision

    # One method per request, each returning the Decision after carrying it out.
    def init(self, tid, timeout_ms=60_000, producer_id=-1, producer_epoch=-1, **kw):
        return self.carry_out(tid, d.init_producer_id(self.states.get(tid), tid, timeout_ms, self.now,
                                                      self.config, self.allocate, producer_id=producer_id,
                                                      producer_epoch=producer_epoch), **kw)

    def add(self, tid, pid, epoch, *partitions, **kw):
        tps = [TopicPartition(*p) for p in partitions] or [TopicPartition("t", 0)]
        return self.carry_out(tid, d.add_partitions_to_txn(self.states.get(tid), tid, pid, epoch, tps, self.now),
                              **kw)

    def add_offsets(self, tid, pid, epoch, group, **kw):
        return self.carry_out(tid, d.add_offsets_to_txn(self.states.get(tid), tid, pid, epoch, group, self.now,
                                                        self.config), **kw)

    def end(self, tid, pid, epoch, result=TransactionResult.COMMIT, **kw):
        return self.carry_out(tid, d.end_txn(self.states.get(tid), tid, pid, epoch, result, self.now), **kw)

    def markers_done(self, tid, markers, **kw):
        return self.carry_out(tid, d.markers_written(self.states.get(tid), markers, self.now), **kw)

    def state(self, tid):
        return self.states[tid].state

    def epoch(self, tid):
        return self.states[tid].producer_epoch

    def pid(self, tid):
        return self.states[tid].producer_id
