import os

import pytest

from eoslog.log.checkpoint import (
    OffsetCheckpointFile,
    format_checkpoint,
    make_durable,
    parse_checkpoint,
    replace_file,
)
from eoslog.log.errors import CorruptCheckpointError


def test_format_is_kafkas():
    data = format_checkpoint({("orders", 1): 987, ("orders", 0): 1200, ("a.b_c-d", 12): 0})
    assert data == b"0\n3\na.b_c-d 12 0\norders 0 1200\norders 1 987\n"
    assert parse_checkpoint(data) == {("orders", 1): 987, ("orders", 0): 1200, ("a.b_c-d", 12): 0}
    assert parse_checkpoint(format_checkpoint({})) == {}


@pytest.mark.parametrize(
    "data, words",
    [
        (b"", "missing"),
        (b"1\n0\n", "version"),
        (b"0\nx\n", "count"),
        (b"0\n2\norders 0 5\n", "says 2"),
        (b"0\n1\norders zero 5\n", "line 3"),
        (b"0\n1\norders 0 5 extra\n", "line 3"),
        (b"0\n1\norders 0 -5\n", "line 3"),
        (b"\xff\xfe", "not text"),
    ],
)
def test_parse_rejects_malformed_files(data, words):
    with pytest.raises(CorruptCheckpointError, match=words):
        parse_checkpoint(data, "cp")


def test_write_then_read(tmp_path):
    checkpoint = OffsetCheckpointFile(str(tmp_path / "recovery-point-offset-checkpoint"))
    assert checkpoint.read() == {}
    checkpoint.write({("t", 0): 5})
    checkpoint.write({("t", 0): 6, ("t", 1): 2})
    assert checkpoint.read() == {("t", 0): 6, ("t", 1): 2}
    assert os.listdir(tmp_path) == ["recovery-point-offset-checkpoint"]


def test_a_crash_before_the_rename_leaves_the_old_file(tmp_path, monkeypatch):
    path = str(tmp_path / "log-start-offset-checkpoint")
    checkpoint = OffsetCheckpointFile(path)
    checkpoint.write({("t", 0): 5})

    def crash(*args):
        raise OSError("power cut")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        checkpoint.write({("t", 0): 99})
    monkeypatch.undo()
    assert os.path.exists(path + ".tmp")  # the half-done write
    assert checkpoint.read() == {("t", 0): 5}  # old contents intact; the temp file is discarded
    assert not os.path.exists(path + ".tmp")


def test_write_fsyncs_file_and_directory(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync

    def spy(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    OffsetCheckpointFile(str(tmp_path / "cp")).write({("t", 0): 1})
    assert synced == [str(tmp_path / "cp.tmp"), str(tmp_path)]


@pytest.mark.parametrize("threads", [1, 16])
def test_make_durable_fsyncs_each_file_before_its_directory(tmp_path, monkeypatch, threads):
    paths = []
    for i in range(40):
        (tmp_path / f"p{i}").mkdir()
        paths.append(str(tmp_path / f"p{i}" / "leader-epoch-checkpoint"))
        replace_file(paths[-1], b"0\n0\n")
    synced = []
    real_fsync = os.fsync

    def spy(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))  # list.append is atomic across threads
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    make_durable(paths, threads=threads)
    assert sorted(synced) == sorted(paths + [os.path.dirname(p) for p in paths])
    for path in paths:  # a rename is made durable only after the file it names
        assert synced.index(path) < synced.index(os.path.dirname(path))


def test_make_durable_raises_when_a_file_is_missing(tmp_path):
    paths = [str(tmp_path / f"f{i}") for i in range(10)]
    for path in paths:
        replace_file(path, b"x")
    os.unlink(paths[3])
    with pytest.raises(FileNotFoundError):
        make_durable(paths, threads=4)
