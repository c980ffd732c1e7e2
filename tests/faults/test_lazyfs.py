"""LazyFS (faults/lazyfs.py), mounted for real with FUSE: what a power loss keeps and what it drops. File
data survives only its file's fsync; namespace operations (create, rename, unlink, mkdir) survive only an
fsync that came after them, in the order they were made, as ext4 with data=ordered keeps them. The
overlay of unsynced writes on synced bytes is checked on its own first, without FUSE."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import pytest

from eoslog.faults import lazyfs
from eoslog.faults.lazyfs import LazyMount, _Unsynced, unavailable_reason
from eoslog.log import Log, LogConfig, syncfs
from eoslog.log.flusher import GroupCommit
from eoslog.records.builder import build_simple

# ---- the overlay, without FUSE --------------------------------------------------------------------------

def test_unsynced_writes_overlay_the_synced_bytes_in_order():
    pending = _Unsynced(size=8)
    pending.write(2, b"XY")
    pending.write(3, b"Z")
    window = bytearray(b"abcdefgh")
    pending.overlay(window, 0)
    assert bytes(window) == b"abXZefgh" and pending.size == 8


def test_a_truncate_then_a_write_past_it_reads_zeros_between_not_the_old_bytes():
    pending = _Unsynced(size=8)
    pending.truncate(2)
    pending.write(5, b"Q")
    assert pending.size == 6
    window = bytearray(b"abcdef")  # the synced bytes still hold the old contents
    pending.overlay(window, 0)
    assert bytes(window) == b"ab\0\0\0Q"
    window = bytearray(b"def")  # a read from offset 3
    pending.overlay(window, 3)
    assert bytes(window) == b"\0\0Q"


# ---- mounted ------------------------------------------------------------------------------------------

@pytest.fixture
def disk(tmp_path):
    reason = unavailable_reason()
    if reason is not None:
        if os.path.exists("/dev/fuse"):
            pytest.fail(f"/dev/fuse is there, yet LazyFS cannot mount: {reason}")
        pytest.skip(reason)
    with LazyMount(tmp_path / "backing", tmp_path / "mnt") as mount:
        yield mount, tmp_path / "mnt"


def write(path, data: bytes, sync: bool, mode: str = "wb") -> None:
    with open(path, mode) as f:
        f.write(data)
        f.flush()
        if sync:
            os.fsync(f.fileno())


def fsync_dir(path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def test_synced_data_is_kept_and_what_came_after_the_fsync_is_dropped(disk):
    mount, mnt = disk
    write(mnt / "segment", b"synced;", sync=True)
    write(mnt / "segment", b"unsynced", sync=False, mode="ab")
    # Before the power loss every reader sees the unsynced bytes, as from a page cache.
    assert (mnt / "segment").read_bytes() == b"synced;unsynced"
    assert os.stat(mnt / "segment").st_size == 15
    assert mount.power_loss() == (1, 0)
    assert (mnt / "segment").read_bytes() == b"synced;"
    assert os.stat(mnt / "segment").st_size == 7


def test_closing_a_file_syncs_nothing_and_a_file_never_synced_disappears(disk):
    mount, mnt = disk
    write(mnt / "never-synced", b"data", sync=False)
    assert (mnt / "never-synced").exists()
    mount.power_loss()
    assert not (mnt / "never-synced").exists()


def test_an_unsynced_truncate_is_undone(disk):
    mount, mnt = disk
    write(mnt / "index", b"0123456789", sync=True)
    os.truncate(mnt / "index", 4)
    assert (mnt / "index").read_bytes() == b"0123"
    mount.power_loss()
    assert (mnt / "index").read_bytes() == b"0123456789"


def test_opening_with_o_trunc_truncates_and_is_undone_like_a_truncate(disk):
    mount, mnt = disk
    write(mnt / "checkpoint", b"old contents", sync=True)
    write(mnt / "checkpoint", b"new", sync=False)  # "wb": O_TRUNC
    assert (mnt / "checkpoint").read_bytes() == b"new"
    mount.power_loss()
    assert (mnt / "checkpoint").read_bytes() == b"old contents"
    write(mnt / "checkpoint", b"new", sync=True)
    mount.power_loss()
    assert (mnt / "checkpoint").read_bytes() == b"new"


def test_a_rename_over_a_file_is_undone_without_an_fsync_after_it_and_kept_with_one(disk):
    # The checkpoint pattern: write a temporary file, fsync it, rename it over the old one.
    mount, mnt = disk
    write(mnt / "checkpoint", b"old", sync=True)
    write(mnt / "checkpoint.tmp", b"new", sync=True)
    os.rename(mnt / "checkpoint.tmp", mnt / "checkpoint")
    assert (mnt / "checkpoint").read_bytes() == b"new"
    assert mount.power_loss() == (0, 1)
    assert (mnt / "checkpoint").read_bytes() == b"old"
    assert (mnt / "checkpoint.tmp").read_bytes() == b"new"  # its fsync made its name durable too

    os.rename(mnt / "checkpoint.tmp", mnt / "checkpoint")
    fsync_dir(mnt)
    mount.power_loss()
    assert (mnt / "checkpoint").read_bytes() == b"new"
    assert not (mnt / "checkpoint.tmp").exists()


def test_namespace_operations_survive_as_a_prefix_up_to_the_last_fsync(disk):
    mount, mnt = disk
    os.mkdir(mnt / "topic-0")
    write(mnt / "topic-0" / "00000.log", b"a", sync=False)
    fsync_dir(mnt / "topic-0")  # commits the mkdir and the create, not the file's data
    os.rename(mnt / "topic-0" / "00000.log", mnt / "topic-0" / "renamed.log")
    os.mkdir(mnt / "topic-1")
    mount.power_loss()
    assert sorted(os.listdir(mnt)) == ["topic-0"]
    assert os.listdir(mnt / "topic-0") == ["00000.log"]
    assert (mnt / "topic-0" / "00000.log").read_bytes() == b""


def test_an_unlink_is_undone_with_the_synced_contents_unless_an_fsync_followed(disk):
    mount, mnt = disk
    write(mnt / "a.snapshot", b"state", sync=True)
    write(mnt / "a.snapshot", b"+more", sync=False, mode="ab")
    os.unlink(mnt / "a.snapshot")
    mount.power_loss()
    assert (mnt / "a.snapshot").read_bytes() == b"state"
    os.unlink(mnt / "a.snapshot")
    fsync_dir(mnt)
    mount.power_loss()
    assert not (mnt / "a.snapshot").exists()


def test_a_torn_power_loss_keeps_a_prefix_of_the_unsynced_writes_cut_anywhere(disk):
    mount, mnt = disk
    kept = set()
    for seed in range(12):
        write(mnt / "segment", b"AAAA", sync=True)
        write(mnt / "segment", b"B" * 100, sync=False, mode="ab")
        write(mnt / "segment", b"C" * 100, sync=False, mode="ab")
        mount.power_loss(torn_seed=seed)
        data = (mnt / "segment").read_bytes()
        assert data == (b"AAAA" + b"B" * 100 + b"C" * 100)[:len(data)] and len(data) >= 4, (seed, data)
        kept.add(len(data))
    # Some seeds cut inside the first write, some inside the second or keep both.
    assert any(4 <= n < 104 for n in kept) and any(104 <= n <= 204 for n in kept), kept
    assert any(n not in (4, 104, 204) for n in kept), kept  # and some cut inside a write


def test_sync_makes_everything_durable_and_the_backing_directory_holds_only_that(disk, tmp_path):
    mount, mnt = disk
    write(mnt / "x", b"1", sync=True)
    write(mnt / "x", b"2", sync=False, mode="ab")
    assert (tmp_path / "backing" / "x").read_bytes() == b"1"  # the "disk" has only the synced byte
    assert mount.sync() == (1, 0)
    mount.power_loss()
    assert (mnt / "x").read_bytes() == b"12"
    assert (tmp_path / "backing" / "x").read_bytes() == b"12"


# ---- the broker's storage on it ----------------------------------------------------------------------------

def test_an_fsynced_log_survives_the_power_loss_syncfs_would_not_have_reached(disk):
    # syncfs(2) on a FUSE mount returns 0 without asking the server (libfuse's high-level API has no
    # syncfs), so the group commit's one-syncfs rounds would acknowledge data LazyFS still holds in
    # memory: it must fall back to per-file fsyncs there.
    mount, mnt = disk
    assert syncfs.filesystem_type(str(mnt)) in ("fuse", "fuse.lazyfs")
    commit = GroupCommit(directory=str(mnt))
    assert not commit.uses_syncfs
    log = Log.open(str(mnt / "t-0"), LogConfig())
    try:
        log.append(build_simple([b"acknowledged"]))
        asyncio.run(asyncio.wait_for(commit.flush(log), 10))
        assert log.recovery_point == 1  # what the broker would acknowledge
        mount.power_loss()
        again = Log.open(str(mnt / "t-0"), LogConfig())
        assert again.log_end_offset == 1
        again.close()
    finally:
        log._closed = True  # its files are the crashed broker's: nothing more may reach the disk
        commit.close()


def test_the_filesystem_type_comes_from_the_mount_tables_line_for_the_device(tmp_path):
    device = os.stat(tmp_path).st_dev
    table = tmp_path / "mountinfo"
    table.write_text(
        f"22 1 {os.major(device)}:{os.minor(device)} / / rw - ext4 /dev/sda1 rw\n"
        f"97 22 {os.major(device)}:{os.minor(device)} / {tmp_path} rw,nosuid shared:5 - fuse.sshfs host: rw\n"
        "98 22 0:999 / /elsewhere rw - tmpfs tmpfs rw\n")
    assert syncfs.filesystem_type(str(tmp_path), str(table)) == "fuse.sshfs"  # the mount on top
    assert syncfs.filesystem_type(str(tmp_path), str(tmp_path / "missing")) is None


CRASHING_RUN = """
import os, sys
from eoslog.faults.lazyfs import LazyMount
mount = LazyMount(sys.argv[1] + "/backing", sys.argv[1] + "/mnt").start()
print(mount.process.pid, flush=True)
os.kill(os.getpid(), 9)
"""


def test_cleanup_unmounts_what_a_crashed_run_left_and_keeps_a_live_mount(disk, tmp_path):
    _, live = disk
    crashed = subprocess.run([sys.executable, "-c", CRASHING_RUN, str(tmp_path / "crashed")], capture_output=True,
                             text=True, timeout=60, check=False)
    assert crashed.returncode == -9, crashed.stderr
    server = int(crashed.stdout.split()[0])
    orphan = tmp_path / "crashed" / "mnt"
    assert os.path.ismount(orphan)
    assert str(orphan) in lazyfs.cleanup()  # with any other crashed run's leftovers
    assert not os.path.ismount(orphan)
    assert os.path.ismount(live)  # its owner, this process, is alive
    deadline = time.monotonic() + 10
    while running(server) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(server)


def running(pid: int) -> bool:
    """Neither gone nor a zombie (an orphan's reaper may be slow)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False
