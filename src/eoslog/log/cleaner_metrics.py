"""Log-cleaner metrics (telemetry.Family values), computed on the event loop at scrape time: each
compacted log's dirty ratio and first dirty offset (the cleaner's progress), Kafka's
LogCleanerManager max-dirty-percent, and the passes done so far."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.log.telemetry import COUNTER, GAUGE, Family

if TYPE_CHECKING:
    from eoslog.log.cleaner import LogCleaner

_TP = ("topic", "partition")


def cleaner_families(cleaner: LogCleaner, now_ms: int) -> list[Family]:
    ratio = Family("eoslog_log_cleaner_dirty_ratio", GAUGE,
                   "Dirty bytes / (clean + dirty) bytes of the cleanable section (min.cleanable.dirty.ratio "
                   "is the threshold)", _TP)
    first_dirty = Family("eoslog_log_cleaner_first_dirty_offset", GAUGE,
                         "Where the next pass starts: the cleaner's progress through the log", _TP)
    max_dirty = Family("kafka_log_logcleanermanager_max_dirty_percent", GAUGE,
                       "The highest dirty ratio of any compacted log, in percent")
    passes = Family("eoslog_log_cleaner_passes", COUNTER, "Cleaning passes completed")
    reclaimed = Family("eoslog_log_cleaner_reclaimed_bytes", COUNTER, "Bytes the cleaning passes removed")
    highest = 0.0
    for target, found in cleaner.cleanable_ranges(now_ms):
        topic, index = target.topic_partition
        ratio.add(found.dirty_ratio, topic, index)
        first_dirty.add(found.first_dirty_offset, topic, index)
        highest = max(highest, found.dirty_ratio)
    max_dirty.add(highest * 100)
    passes.add(cleaner.passes_completed)
    reclaimed.add(cleaner.bytes_reclaimed)
    return [ratio, first_dirty, max_dirty, passes, reclaimed]
