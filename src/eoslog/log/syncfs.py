"""syncfs(2): one system call that makes a whole filesystem durable (Python's os has no binding).

Why it may carry the fsync-before-ack promise (docs/durability.md, "One syncfs per round"):
- What it covers: ``sync_filesystem`` writes back every dirty page and inode of the filesystem, waits for
  the writeback, then commits the journal and flushes the device cache (ext4, xfs), the same steps an
  fsync takes for one file, so every segment, index and directory entry written before the call is on
  disk when it returns.
- What it reports: since Linux 5.8 every writeback error is also recorded on the filesystem, and
  ``syncfs`` on a descriptor reports any recorded since that descriptor was opened or last synced. So the
  descriptor must be opened once, before the first write it is meant to cover, and kept. Older kernels
  return 0 whatever happened; ``available()`` says no there and callers keep per-file fsyncs.
- Where it does nothing: on a FUSE filesystem the kernel hands syncfs to the filesystem's server only when
  that server implements it (FUSE_SYNCFS, Linux 5.15; virtiofs does, libfuse's high-level API does not),
  and returns 0 either way. Data a FUSE server buffers until fsync would then be acknowledged without
  being durable, which LazyFS (eoslog/faults/lazyfs.py) showed. ``covers()`` says no for such a directory,
  and its logs keep per-file fsyncs.
- What it cannot say: *which* file failed. An error may even belong to another program on the same
  filesystem. The caller therefore answers an error with per-file fsyncs (each file's own error state is
  untouched by syncfs, so they tell exactly which logs lost data) and stops trusting syncfs from then on.
"""

from __future__ import annotations

import ctypes
import os

_MIN_KERNEL = (5, 8)  # syncfs reports writeback errors from this release on
_syncfs = None


def _load():
    global _syncfs
    if _syncfs is None:
        try:
            # The process's own symbols, libc's among them: ctypes.util.find_library("c") would import
            # shutil, tempfile and more and run `ldconfig -p` in a child process, on every broker start.
            libc = ctypes.CDLL(None, use_errno=True)
            function = libc.syncfs
            function.argtypes = [ctypes.c_int]
            function.restype = ctypes.c_int
            _syncfs = function  # a CDLL call releases the GIL for the duration of the system call
        except (OSError, AttributeError):
            _syncfs = False
    return _syncfs


def kernel_release(release: str | None = None) -> tuple[int, int]:
    """(major, minor) of a release string such as '6.1.0-18-amd64' (the running kernel's by default)."""
    release = os.uname().release if release is None else release
    parts = []
    for piece in release.split(".")[:2]:
        digits = ""
        for char in piece:
            if not char.isdigit():
                break
            digits += char
        parts.append(int(digits or 0))
    while len(parts) < 2:
        parts.append(0)
    return parts[0], parts[1]


def available() -> bool:
    """Whether syncfs exists here and reports writeback errors (Linux >= 5.8)."""
    return os.uname().sysname == "Linux" and kernel_release() >= _MIN_KERNEL and bool(_load())


def filesystem_type(directory: str, mountinfo: str = "/proc/self/mountinfo") -> str | None:
    """The type of the filesystem holding ``directory`` ("ext4", "fuse.lazyfs", ...), from the mount
    table's line for its device (the last one, the mount on top), or None when it cannot be told."""
    device = os.stat(directory).st_dev
    wanted = f"{os.major(device)}:{os.minor(device)}"
    found = None
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as table:
            for line in table:
                fields = line.split()
                if len(fields) > 2 and fields[2] == wanted and " - " in line:
                    found = line.split(" - ", 1)[1].split()[0]
    except OSError:
        return None
    return found


def covers(directory: str) -> bool:
    """Whether syncfs makes the filesystem of ``directory`` durable: not on FUSE, where the kernel returns
    0 without asking the server (see above); virtiofs, which implements it, has a type of its own. A type
    the mount table does not tell (a nested btrfs subvolume's device is not listed) is no sign of FUSE."""
    kind = filesystem_type(directory)
    return kind is None or not (kind == "fuse" or kind.startswith(("fuse.", "fuseblk")))


def syncfs(fd: int) -> None:
    """Blocks until the filesystem holding ``fd`` is durable; OSError on a writeback error (see above)."""
    function = _load()
    if not function:
        raise OSError(38, "syncfs is not available")  # ENOSYS
    if function(fd) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))
