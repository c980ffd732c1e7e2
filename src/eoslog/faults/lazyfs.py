"""A FUSE filesystem that loses what was not fsynced when the power goes: the disk under a broker in the
verifier's power-loss runs, in the spirit of Jepsen's LazyFS (a C++ FUSE filesystem with a page cache of
its own that can be "cleared").

    with LazyMount(backing_dir, mountpoint) as mount:   # a filesystem process of its own, mounted
        ...                                              # a broker writes under mountpoint
        mount.power_loss()                               # after SIGKILLing the broker: drop the unsynced

What reaches the "disk" (the backing directory) and when, modelled on ext4 with ``data=ordered``:
- **File data** (write, truncate) stays in this process's memory until the file is fsynced (fsync or
  fdatasync); reads and stat see it meanwhile. Closing a file syncs nothing. A power loss drops it.
- **Namespace operations** (create, unlink, rename, mkdir, rmdir) act on the backing directory at once,
  so paths behave as usual, but each is journaled with what undoes it. They become durable in the order
  they were made, all of them at the next fsync of any file or directory (ext4 commits one journal for the
  whole filesystem). A power loss undoes the ones not yet durable, newest first: a file created and never
  followed by an fsync disappears; a rename not followed by one is rolled back, and the file it replaced
  comes back; so does an unlinked file, with its synced contents.
- Attributes (chmod, utimens) are written through; nothing in a broker depends on their durability.

The kernel caches no attributes or names (``attr_timeout`` and ``entry_timeout`` 0) and drops a file's
cached pages when it is opened again, so after :meth:`LazyMount.power_loss` a new reader sees only what
survived. Power loss is for a mount whose writers are dead: a process still writing would keep pages the
kernel cached for it.

The process runs single-threaded under one lock (the control socket's thread takes it too): a test disk,
not a fast one. Control commands, one line each on a Unix socket: ``drop`` (the power loss), ``sync`` (make
everything durable) and ``tear <seed>`` (a power loss that keeps a random prefix of each
file's unsynced writes), each answered ``ok <files> <journal entries>``.
"""

from __future__ import annotations

import argparse
import errno
import itertools
import os
import random
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

TRASH_SUFFIX = ".lazyfs-trash"  # beside the backing directory: unlinked and replaced files wait there
_names = itertools.count(1)


def _os_error(exc: OSError):
    from mfusepy import FuseOSError

    return FuseOSError(exc.errno or errno.EIO)


@dataclass
class _Unsynced:
    """One file's writes and truncates since its last fsync, in order, and the size they make."""

    size: int
    ops: list[tuple[int, int, bytes]] = field(default_factory=list)  # (offset, truncate-to or -1, data)

    def write(self, offset: int, data: bytes) -> None:
        self.ops.append((offset, -1, data))
        self.size = max(self.size, offset + len(data))

    def truncate(self, length: int) -> None:
        self.ops.append((0, length, b""))
        self.size = length

    def overlay(self, window: bytearray, start: int) -> None:
        """Replays the operations over ``window`` (the synced bytes from ``start``): a truncate zeroes
        what it cut, so a later write past it reads zeros in between, not the old bytes."""
        end = start + len(window)
        for offset, length, data in self.ops:
            if length >= 0:
                if length < end:
                    cut = max(length, start)
                    window[cut - start:] = bytes(end - cut)
                continue
            lo, hi = max(offset, start), min(offset + len(data), end)
            if lo < hi:
                window[lo - start:hi - start] = data[lo - offset:hi - offset]


class LazyFS:
    """The filesystem's operations (mfusepy's Operations interface) over ``root``."""

    use_ns = True

    def __init__(self, root: str | Path, trash: str | Path | None = None) -> None:
        self.root = str(Path(root).resolve())
        self.trash = str(trash) if trash is not None else self.root.rstrip("/") + TRASH_SUFFIX
        os.makedirs(self.trash, exist_ok=True)
        # Not "lock": mfusepy would take an attribute of that name for FUSE's POSIX-lock operation. Without
        # one, the kernel keeps fcntl locks itself, as the broker's data-directory lock needs.
        self._mutex = threading.RLock()
        self.unsynced: dict[str, _Unsynced] = {}
        # Undo records of namespace operations not yet durable, oldest first.
        self.journal: list[tuple] = []

    def _real(self, path: str) -> str:
        return self.root + path

    def _to_trash(self, path: str) -> str:
        parked = os.path.join(self.trash, f"{next(_names)}-{os.path.basename(path)}")
        os.rename(self._real(path), parked)
        return parked

    # ---- durability ---------------------------------------------------------------------------------

    def _sync_file(self, path: str) -> None:
        pending = self.unsynced.pop(path, None)
        if pending is None:
            return
        fd = os.open(self._real(path), os.O_WRONLY)
        try:
            for offset, length, data in pending.ops:
                if length >= 0:
                    os.ftruncate(fd, length)
                else:
                    os.pwrite(fd, data, offset)
        finally:
            os.close(fd)

    def _commit_journal(self) -> None:
        for record in self.journal:
            if record[0] == "unlink":
                os.unlink(record[2])
            elif record[0] == "rename" and record[3] is not None:
                (shutil.rmtree if os.path.isdir(record[3]) else os.unlink)(record[3])
        self.journal.clear()

    def _tear(self, rng: random.Random) -> None:
        for path in sorted(self.unsynced):
            ops = self.unsynced[path].ops
            kept = rng.randint(0, len(ops))
            torn = ops[:kept]
            if kept < len(ops) and ops[kept][1] < 0 and len(ops[kept][2]) > 1:
                offset, _, data = ops[kept]
                torn.append((offset, -1, data[:rng.randint(1, len(data) - 1)]))
            self.unsynced[path] = _Unsynced(0, torn)
            self._sync_file(path)

    def sync_everything(self) -> tuple[int, int]:
        with self._mutex:
            counts = len(self.unsynced), len(self.journal)
            for path in list(self.unsynced):
                self._sync_file(path)
            self._commit_journal()
            return counts

    def power_loss(self, torn_seed: int | None = None) -> tuple[int, int]:
        """Drops every unsynced write and undoes every namespace operation not yet durable, newest first;
        returns (files that lost writes, operations undone). With ``torn_seed``, each file instead keeps
        a random prefix of its unsynced operations, the last one possibly cut inside a write: the disk
        wrote part of it before the power went (torn tails, indexes behind or ahead of their log)."""
        with self._mutex:
            counts = len(self.unsynced), len(self.journal)
            if torn_seed is not None:
                self._tear(random.Random(torn_seed))
            self.unsynced.clear()
            for record in reversed(self.journal):
                kind = record[0]
                if kind == "create":
                    os.unlink(self._real(record[1]))
                elif kind == "mkdir":
                    os.rmdir(self._real(record[1]))
                elif kind == "rmdir":
                    os.mkdir(self._real(record[1]), record[2])
                elif kind == "unlink":
                    os.rename(record[2], self._real(record[1]))
                elif kind == "rename":
                    _, old, new, replaced = record
                    os.rename(self._real(new), self._real(old))
                    if replaced is not None:
                        os.rename(replaced, self._real(new))
            self.journal.clear()
            return counts

    # ---- attributes and names -----------------------------------------------------------------------

    def getattr(self, path: str, fh=None) -> dict:
        with self._mutex:
            try:
                st = os.lstat(self._real(path))
            except OSError as exc:
                raise _os_error(exc) from None
            attributes = {key: getattr(st, key) for key in (
                "st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_atime_ns", "st_mtime_ns", "st_ctime_ns")}
            for key in ("st_atime", "st_mtime", "st_ctime"):
                attributes[key] = attributes.pop(f"{key}_ns")
            pending = self.unsynced.get(path)
            if pending is not None:
                attributes["st_size"] = pending.size
            return attributes

    def readdir(self, path: str, fh) -> list[str]:
        with self._mutex:
            try:
                return [".", "..", *os.listdir(self._real(path))]
            except OSError as exc:
                raise _os_error(exc) from None

    def statfs(self, path: str) -> dict:
        st = os.statvfs(self.root)
        return {key: getattr(st, key) for key in (
            "f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree", "f_favail", "f_namemax")}

    def chmod(self, path: str, mode: int) -> int:
        with self._mutex:
            os.chmod(self._real(path), mode)
            return 0

    def utimens(self, path: str, times=None) -> int:
        with self._mutex:
            os.utime(self._real(path), ns=times) if times else os.utime(self._real(path))
            return 0

    # ---- namespace operations (journaled) -------------------------------------------------------------

    def create(self, path: str, mode: int, fi=None) -> int:
        with self._mutex:
            try:
                os.close(os.open(self._real(path), os.O_CREAT | os.O_EXCL | os.O_WRONLY, mode))
            except OSError as exc:
                raise _os_error(exc) from None
            self.journal.append(("create", path))
            return 0

    def mkdir(self, path: str, mode: int) -> int:
        with self._mutex:
            try:
                os.mkdir(self._real(path), mode)
            except OSError as exc:
                raise _os_error(exc) from None
            self.journal.append(("mkdir", path))
            return 0

    def rmdir(self, path: str) -> int:
        with self._mutex:
            try:
                mode = stat.S_IMODE(os.lstat(self._real(path)).st_mode)
                os.rmdir(self._real(path))
            except OSError as exc:
                raise _os_error(exc) from None
            self.journal.append(("rmdir", path, mode))
            return 0

    def unlink(self, path: str) -> int:
        with self._mutex:
            try:
                parked = self._to_trash(path)
            except OSError as exc:
                raise _os_error(exc) from None
            self.unsynced.pop(path, None)  # a crash would lose them with the file's name, a sync never comes
            self.journal.append(("unlink", path, parked))
            return 0

    def rename(self, old: str, new: str) -> int:
        with self._mutex:
            try:
                replaced = self._to_trash(new) if os.path.lexists(self._real(new)) else None
                if replaced is not None and os.path.isdir(replaced) and os.listdir(replaced):
                    os.rename(replaced, self._real(new))
                    raise OSError(errno.ENOTEMPTY, "directory not empty")
                os.rename(self._real(old), self._real(new))
            except OSError as exc:
                raise _os_error(exc) from None
            self.unsynced.pop(new, None)
            for path in [p for p in self.unsynced if p == old or p.startswith(old + "/")]:
                self.unsynced[new + path[len(old):]] = self.unsynced.pop(path)
            self.journal.append(("rename", old, new, replaced))
            return 0

    # ---- file data (kept until fsync) -------------------------------------------------------------------

    def open(self, path: str, flags: int) -> int:
        with self._mutex:
            if not os.path.isfile(self._real(path)):
                raise _os_error(OSError(errno.ENOENT, path))
            if flags & os.O_TRUNC:  # libfuse asks the kernel for atomic O_TRUNC: it comes here, not as a truncate
                self._pending(path).truncate(0)
            return 0

    def read(self, path: str, size: int, offset: int, fh) -> bytes:
        with self._mutex:
            pending = self.unsynced.get(path)
            try:
                with open(self._real(path), "rb", buffering=0) as f:
                    length = size if pending is None else max(0, min(size, pending.size - offset))
                    data = os.pread(f.fileno(), length, offset)
            except OSError as exc:
                raise _os_error(exc) from None
            if pending is None:
                return data
            window = bytearray(data) + bytes(length - len(data))
            pending.overlay(window, offset)
            return bytes(window)

    def _pending(self, path: str) -> _Unsynced:
        pending = self.unsynced.get(path)
        if pending is None:
            pending = self.unsynced[path] = _Unsynced(os.path.getsize(self._real(path)))
        return pending

    def write(self, path: str, data: bytes, offset: int, fh) -> int:
        with self._mutex:
            self._pending(path).write(offset, bytes(data))
            return len(data)

    def truncate(self, path: str, length: int, fh=None) -> int:
        with self._mutex:
            self._pending(path).truncate(length)
            return 0

    def fsync(self, path: str, datasync: int, fh) -> int:
        with self._mutex:
            self._sync_file(path)
            self._commit_journal()
            return 0

    def fsyncdir(self, path: str, datasync: int, fh) -> int:
        with self._mutex:
            self._commit_journal()
            return 0

    def flush(self, path: str, fh) -> int:
        return 0

    def release(self, path: str, fh) -> int:
        return 0


# ---- the filesystem process and its control socket -------------------------------------------------------

def _serve_control(fs: LazyFS, path: str) -> None:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen()
    while True:
        connection, _ = server.accept()
        with connection, connection.makefile("rw") as stream:
            for line in stream:
                command = line.strip()
                if command == "drop":
                    files, journal = fs.power_loss()
                elif command.startswith("tear "):
                    files, journal = fs.power_loss(torn_seed=int(command.split()[1]))
                elif command == "sync":
                    files, journal = fs.sync_everything()
                else:
                    stream.write(f"error unknown command {command!r}\n")
                    stream.flush()
                    continue
                stream.write(f"ok {files} {journal}\n")
                stream.flush()


def main(argv: list[str] | None = None) -> None:
    from mfusepy import FUSE

    parser = argparse.ArgumentParser(description="LazyFS: a FUSE filesystem that drops unsynced writes on demand")
    parser.add_argument("root")
    parser.add_argument("mountpoint")
    parser.add_argument("--control", required=True, help="Unix socket for the drop and sync commands")
    parser.add_argument("--owner", type=int, default=os.getppid(),
                        help="the process that mounted it: once it is gone, cleanup() may unmount this")
    args = parser.parse_args(argv)
    fs = LazyFS(args.root)
    threading.Thread(target=_serve_control, args=(fs, args.control), daemon=True, name="lazyfs-control").start()
    FUSE(fs, args.mountpoint, foreground=True, nothreads=True, fsname="lazyfs", attr_timeout=0, entry_timeout=0,
         negative_timeout=0)


class LazyMount:
    """A LazyFS process mounting ``root`` at ``mountpoint`` (both directories; the mount point empty),
    started by :meth:`start` and unmounted by :meth:`stop`."""

    def __init__(self, root: str | Path, mountpoint: str | Path, start_timeout_s: float = 15.0) -> None:
        self.root, self.mountpoint = Path(root), Path(mountpoint)
        self.control = str(self.mountpoint.parent / f".{self.mountpoint.name}.lazyfs.sock")
        # Its stderr goes to a file: a pipe nobody reads would fill up and stop the filesystem mid-request,
        # leaving every process waiting on it unkillable (D state).
        self.log_path = self.mountpoint.parent / f"{self.mountpoint.name}.lazyfs.log"
        self.start_timeout_s = start_timeout_s
        self.process: subprocess.Popen | None = None

    def start(self) -> Self:
        self.root.mkdir(parents=True, exist_ok=True)
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        if os.path.exists(self.control):
            os.unlink(self.control)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen([sys.executable, "-m", "eoslog.faults.lazyfs", str(self.root),
                                             str(self.mountpoint), "--control", self.control,
                                             "--owner", str(os.getpid())],
                                            stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + self.start_timeout_s
        while not (os.path.ismount(self.mountpoint) and os.path.exists(self.control)):
            if self.process.poll() is not None:
                raise RuntimeError(f"lazyfs exited ({self.process.returncode}): "
                                   f"{self.log_path.read_text(errors='replace').strip()[-2000:]}")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"lazyfs did not mount {self.mountpoint} within {self.start_timeout_s} s")
            time.sleep(0.02)
        return self

    def _command(self, command: str) -> tuple[int, int]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(30)
            s.connect(self.control)
            s.sendall(f"{command}\n".encode())
            answer = s.makefile().readline().split()
        if not answer or answer[0] != "ok":
            raise RuntimeError(f"lazyfs {command}: {' '.join(answer) or 'no answer'}")
        return int(answer[1]), int(answer[2])

    def power_loss(self, torn_seed: int | None = None) -> tuple[int, int]:
        """Drops what was not synced: (files that lost writes, namespace operations undone). Call it
        with the mount's writers dead. ``torn_seed``: each file keeps a random prefix of its unsynced
        writes instead (LazyFS.power_loss)."""
        return self._command("drop" if torn_seed is None else f"tear {torn_seed}")

    def sync(self) -> tuple[int, int]:
        return self._command("sync")

    def stop(self) -> None:
        if self.process is None:
            return
        if os.path.ismount(self.mountpoint):
            _unmount(str(self.mountpoint))
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        self.process = None
        if os.path.exists(self.control):
            os.unlink(self.control)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _unmount(mountpoint: str) -> None:
    if subprocess.run(["fusermount3", "-u", mountpoint], capture_output=True, check=False).returncode != 0:
        subprocess.run(["umount", "-l", mountpoint], capture_output=True, check=False)


def cleanup(force: bool = False) -> list[str]:
    """Unmounts the LazyFS mounts a crashed run left behind (``eoslog verify cleanup``) and ends their
    processes: those whose owner (the process that mounted them) is gone, or every one with ``force``.
    Returns their mount points."""
    removed = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue
        if "eoslog.faults.lazyfs" not in argv or "--owner" not in argv:
            continue
        at = argv.index("eoslog.faults.lazyfs")
        mountpoint, owner = argv[at + 2], argv[argv.index("--owner") + 1]
        if not force and owner.isdigit() and os.path.exists(f"/proc/{owner}"):
            continue
        _unmount(mountpoint)
        try:
            os.kill(int(entry), 9)
        except ProcessLookupError:
            pass
        removed.append(mountpoint)
    return removed


def unavailable_reason() -> str | None:
    """Why this process cannot mount a LazyFS, or None when it can."""
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing (no FUSE in this kernel or container)"
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError) as exc:
        return f"mfusepy cannot load libfuse3 (Debian package fuse3; `make test` installs it): {exc}"
    if os.geteuid() != 0 and shutil.which("fusermount3") is None:
        return "not root and no fusermount3 (Debian package fuse3)"
    return None


if __name__ == "__main__":
    main()
