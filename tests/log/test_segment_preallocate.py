"""Blocks reserved ahead of the active segment (log/segment.py, preallocate): the file's size stays that of its
batches, the reservation is handed back at roll and close, and a reopened segment keeps appending."""

import os

from eoslog.log import segment as segment_module
from eoslog.log.config import LogConfig
from eoslog.log.segment import PREALLOCATE_MIN, LogSegment


def _allocated_bytes(fd: int) -> int:
    return os.fstat(fd).st_blocks * 512


def test_reserved_ahead_without_changing_the_size(tmp_path):
    seg = LogSegment.create(str(tmp_path), 0, LogConfig(), now_ms=0)
    data = os.urandom(100_000)
    seg.append([data], len(data), [(0, len(data), 0, 1)])
    assert os.fstat(seg.fd).st_size == len(data) == seg.size
    if not segment_module._fallocate:
        return  # no fallocate on this platform: appends allocate as they go, nothing else changes
    assert _allocated_bytes(seg.fd) >= PREALLOCATE_MIN
    mtime = os.fstat(seg.fd).st_mtime_ns
    seg.on_become_inactive()
    assert _allocated_bytes(seg.fd) < PREALLOCATE_MIN
    assert os.fstat(seg.fd).st_size == len(data)
    assert os.fstat(seg.fd).st_mtime_ns == mtime  # the segment's age is not reset by the hand-back
    seg.close()


def test_never_reserved_past_segment_bytes(tmp_path):
    config = LogConfig(segment_bytes=200_000)
    seg = LogSegment.create(str(tmp_path), 0, config, now_ms=0)
    data = os.urandom(50_000)
    seg.append([data], len(data), [(0, len(data), 0, 1)])
    assert seg._allocated is None or seg._allocated <= 200_000
    seg.close()
    assert os.path.getsize(seg.log_path) == len(data)


def test_close_hands_back_and_a_reopened_segment_appends(tmp_path):
    seg = LogSegment.create(str(tmp_path), 0, LogConfig(), now_ms=0)
    data = os.urandom(10_000)
    seg.append([data], len(data), [(0, len(data), 0, 1)])
    path = seg.log_path
    seg.close()
    assert os.stat(path).st_blocks * 512 < PREALLOCATE_MIN
    reopened = LogSegment.open(str(tmp_path), 0, LogConfig())
    reopened.append([data], len(data), [(0, len(data), 1, 1)])
    assert reopened.size == os.fstat(reopened.fd).st_size == 2 * len(data)
    reopened.close()
    assert os.path.getsize(path) == 2 * len(data)


def test_without_fallocate(tmp_path, monkeypatch):
    monkeypatch.setattr(segment_module, "_fallocate", False)
    seg = LogSegment.create(str(tmp_path), 0, LogConfig(), now_ms=0)
    data = os.urandom(10_000)
    seg.append([data], len(data), [(0, len(data), 0, 1)])
    assert seg._allocated is None and seg.size == len(data)
    seg.close()
