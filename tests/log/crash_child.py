"""The writer killed by test_crash_kill.py: appends deterministic batches forever, fsyncs now and then, and
prints ``flushed <log_end_offset>`` after every fsync (the parent trusts exactly those offsets)."""

from __future__ import annotations

import random
import sys
import time

from log_batches import payload_batch

from eoslog.log import LogConfig
from eoslog.log.manager import LogDirectory

CONFIG = LogConfig(segment_bytes=256 * 1024, index_interval_bytes=2048, file_delete_delay_ms=0)
TIMESTAMP = 1_700_000_000_000


def batch_for(offset: int) -> bytes:
    """The batch that belongs at ``offset``: its size and record count follow from the offset alone."""
    rng = random.Random(offset)
    size = rng.choice([100, 700, 3000, 20_000, 60_000])
    return payload_batch(offset, size, records=1 + offset % 3, timestamp=TIMESTAMP + offset)


def main(data_dir: str, seed: int) -> None:
    rng = random.Random(seed)
    directory = LogDirectory.open(data_dir, CONFIG)
    log = directory.get_or_create_log("crash", 0)
    print(f"opened {log.log_end_offset}", flush=True)
    appended = 0
    while True:
        log.append(batch_for(log.log_end_offset))
        appended += 1
        if rng.random() < 0.3:
            log.flush()
            print(f"flushed {log.log_end_offset}", flush=True)
        if appended % 40 == 0:
            directory.checkpoint()
        time.sleep(0.0005)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
