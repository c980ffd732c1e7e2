"""``stop_process``: once it returns, no thread of the process makes progress (a bare SIGSTOP returned
before the kernel had stopped them all, and a paused ZooKeeper still answered)."""

import signal
import subprocess
import sys
import time

import pytest

from eoslog.testing.signals import stop_process, thread_states

# Four threads spinning and counting; the main thread prints the total whenever asked on stdin.
CHILD = """
import sys, threading
counts = [0] * 4
def spin(i):
    while True:
        counts[i] += 1
for i in range(4):
    threading.Thread(target=spin, args=(i,), daemon=True).start()
for _ in sys.stdin:
    print(sum(counts), flush=True)
"""


def test_a_stopped_process_makes_no_progress_until_continued():
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        def total() -> int:
            child.stdin.write("\n")
            child.stdin.flush()
            return int(child.stdout.readline())

        assert total() >= 0
        stop_process(child.pid)
        states = thread_states(child.pid)
        assert len(states) == 5 and set(states) <= {"T", "t"}
        with open(f"/proc/{child.pid}/stat") as stat:
            before = stat.read().split(")")[1].split()[11:13]  # utime, stime
        time.sleep(0.2)  # an observation window: a thread left running would use CPU in it
        with open(f"/proc/{child.pid}/stat") as stat:
            assert stat.read().split(")")[1].split()[11:13] == before
        child.send_signal(signal.SIGCONT)
        first = total()
        deadline = time.monotonic() + 10
        while total() == first:
            assert time.monotonic() < deadline, "the threads did not run again after SIGCONT"
    finally:
        child.kill()
        child.wait(10)


def test_a_process_that_is_gone_has_no_thread_states():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(10)
    assert thread_states(child.pid) == []


def test_a_broker_process_signals_its_pid_only_while_the_child_is_not_reaped(tmp_path):
    """BrokerProcess.pause/resume (tools/local/process.py) on a broker that has exited and been reaped:
    its pid may already be another process's (pid_max is 32,768 on the test machines), which a SIGSTOP
    would freeze, so pause refuses and resume does nothing. A live child is stopped and continued."""
    from eoslog.tools.local.process import BrokerProcess

    broker = BrokerProcess(data_dir=tmp_path / "data", port=1)  # never launched: a stand-in child instead
    broker.process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        broker.pause()
        assert set(thread_states(broker.process.pid)) <= {"T", "t"}
        broker.resume()
        deadline = time.monotonic() + 10
        while not set(thread_states(broker.process.pid)).isdisjoint({"T", "t"}):
            assert time.monotonic() < deadline, "the child did not run again after resume"
            time.sleep(0.01)
    finally:
        broker.process.kill()
        broker.process.wait(10)  # reaped: from here on its pid is free for anyone
    with pytest.raises(RuntimeError, match="not running"):
        broker.pause()
    broker.resume()  # nothing to continue, and no error
