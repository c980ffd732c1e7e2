"""The cyclic garbage collector in the broker's own process: its thresholds, and how long it pauses.

Why the defaults do not fit a broker: CPython collects its youngest generation every 700 new container
objects, and an object that survives two such collections moves to the oldest one. Under load the broker
allocates about two hundred thousand container objects a second, and many of them live for the length of a
request that waits: a Produce waiting for its fsync round, a Fetch in its long poll, and every
producer-state entry (one per producer per partition, replaced on each batch). So they are promoted, and
once the promotions reach a quarter of the oldest generation CPython walks *all* of it. With 1,000
partitions and 50 idempotent producers that generation holds ~200,000 objects, and the walk ran two to
three times a second, 45-225 ms each, with the event loop stopped: a quarter to a third of the broker's
time, and the largest single cause of its 1,000-partition latency (docs/benchmarks.md, "The garbage
collector at 1,000 partitions").

What :func:`tune` changes, for the broker's process only (an application embedding a broker keeps its own
settings, as with run.tune_allocator):
- the youngest generation is collected every YOUNG_THRESHOLD new objects instead of 700. A request's
  objects then mostly die (by reference counting) before a collection sees them, so far fewer reach the
  oldest generation, and full walks become rare; a young collection costs more each time but far less in
  total;
- the objects alive after start-up (modules, classes, functions, the configuration: ~20,000 objects that
  live as long as the process) are frozen (``gc.freeze``), so no collection walks them again.
Nothing is switched off: reference cycles are still found and freed, only later.

:func:`install_pause_metrics` times every collection per generation (``eoslog_gc_pause_seconds``), so an
operator sees what the collector costs instead of guessing (server/metrics.py exports it).
"""

from __future__ import annotations

import gc
import logging
import time

from eoslog.log.telemetry import Histogram

# 10,000: measured against 700 on the 1,000-partition benchmark (one probe run each), full collections went
# from 38 per run to none, the broker's CPU from 18.9 to 12.9 s and the paced delivery p99 from 5.0 s to
# 0.18 s; a young collection takes ~4-5 ms instead of ~0.1 ms (docs/benchmarks.md).
YOUNG_THRESHOLD = 10_000

log = logging.getLogger(__name__)

GENERATIONS = (0, 1, 2)
PAUSES = {generation: Histogram() for generation in GENERATIONS}
_started: list[float] = [0.0]


def tune() -> None:
    """Raises the young generation's threshold, freezes what is alive now and makes sure the collector runs
    (call once, after imports)."""
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, oldest)
    gc.freeze()
    # The command's entry point may have switched the collector off for start-up (eoslog/__main__.py).
    gc.enable()
    log.info("garbage collector: thresholds %s, %d start-up objects frozen",
             gc.get_threshold(), gc.get_freeze_count())


def _on_collection(phase: str, info: dict) -> None:
    # Collections never overlap (CPython runs one at a time, holding the GIL), so one start time serves.
    if phase == "start":
        _started[0] = time.perf_counter()
    else:
        PAUSES[info["generation"]].observe(time.perf_counter() - _started[0])


def install_pause_metrics() -> None:
    """Times every collection from now on (idempotent). The histograms are written from whichever thread
    collects and read on the event loop; a scrape may see one observation half counted, never lose one."""
    if _on_collection not in gc.callbacks:
        gc.callbacks.append(_on_collection)
