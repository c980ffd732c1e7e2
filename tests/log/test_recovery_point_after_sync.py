"""The recovery-point checkpoint follows the group commit (issue 38, "damage past a lagging recovery point").

After a crash, recovery keeps a batch that fails its CRC below the recovery point (fsync'ed whole: rot) and
cuts the log at one past it (maybe a torn tail). With the checkpoint written once a minute, synced and
acknowledged data lay past it, so a flipped bit there cost every acknowledged batch after it. The log
directory now writes the checkpoint after group-commit rounds, at most once per
``checkpoint_after_sync_ms``; these tests drive a real LogDirectory and GroupCommit on real files.
"""

import asyncio
import random
import time

from log_batches import make_batch

from eoslog.faults.bitflip import flip_bit
from eoslog.log import LogConfig
from eoslog.log.checkpoint import parse_checkpoint
from eoslog.log.manager import LogDirectory

CONFIG = LogConfig(retention_ms=-1)


def checkpointed(path) -> dict:
    # Parsed, not OffsetCheckpointFile.read(): that removes a leftover .tmp, which could be a write in flight.
    return parse_checkpoint(path.read_bytes()) if path.exists() else {}


async def wait_for_checkpoint(path, key, offset, deadline_s=5.0) -> float:
    """Seconds until the checkpoint on disk names ``offset`` for ``key``; fails at the deadline."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    while checkpointed(path).get(key) != offset:
        assert loop.time() - started < deadline_s, (
            f"the recovery-point checkpoint still says {checkpointed(path).get(key)}, not {offset}, "
            f"{deadline_s} s after the group commit synced it"
        )
        await asyncio.sleep(0.005)
    return loop.time() - started


def test_each_group_commit_round_is_checkpointed_soon_and_throttled(tmp_path):
    interval_ms = 100
    directory = LogDirectory.open(str(tmp_path), CONFIG, checkpoint_after_sync_ms=interval_ms)
    log = directory.get_or_create_log("t", 0)
    path = tmp_path / "recovery-point-offset-checkpoint"

    async def scenario():
        started = time.monotonic()
        rounds = 0
        while time.monotonic() - started < 0.5:  # many rounds, far more than the throttle lets through
            log.append(make_batch([b"x"] * 3))
            await directory.group_commit.flush(log)
            rounds += 1
        await wait_for_checkpoint(path, ("t", 0), log.log_end_offset)
        elapsed = time.monotonic() - started
        return rounds, elapsed

    rounds, elapsed = asyncio.run(scenario())
    written = directory.checkpoints_after_sync
    # Writes start at least interval_ms apart, so at most one per interval plus the first.
    assert 1 <= written <= elapsed * 1000 / interval_ms + 1, (written, rounds, elapsed)
    assert rounds > 2 * written, (rounds, written)
    directory.close()


def test_a_bit_flipped_in_synced_data_after_a_crash_is_kept_and_refused_not_cut(tmp_path):
    directory = LogDirectory.open(str(tmp_path), CONFIG)
    log = directory.get_or_create_log("t", 0)
    path = tmp_path / "recovery-point-offset-checkpoint"

    async def produce():
        for i in range(20):  # 20 batches of 5, each synced as an acks=all producer's would be
            log.append(make_batch([f"v{i}-{j}".encode() for j in range(5)]))
            await directory.group_commit.flush(log)
        await wait_for_checkpoint(path, ("t", 0), 100)

    asyncio.run(produce())
    # A crash: no close, no clean-shutdown marker, no checkpoint written at close.
    log.close(flush=False)
    directory._release()
    flip = flip_bit(str(tmp_path / "t-0"), random.Random(7), below_offset=90)  # acknowledged batches follow it

    again = LogDirectory.open(str(tmp_path), CONFIG)
    reopened = again.get_log("t", 0)
    try:
        report = reopened.recovery_report
        assert reopened.log_end_offset == 100, (
            f"recovery cut the log at the damaged batch {flip.base_offset}: "
            f"{100 - reopened.log_end_offset} acknowledged records lost ({report})"
        )
        assert report.truncated_bytes == 0
        assert flip.base_offset in report.damaged_batches
    finally:
        again.close()
