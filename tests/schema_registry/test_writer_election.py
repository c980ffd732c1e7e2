"""Several registry instances (real ``eoslog schema-registry`` processes) in front of one broker: one
writer elected through the group, writes forwarded to it, and a writer SIGKILLed while registrations are
in flight loses nothing acknowledged and hands out no id twice (store.py: the transactional id fences the
dead writer and aborts what it left open; the next writer reads everything committed before it writes)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from eoslog.schema_registry.store import TEST_PAUSE_ENV
from eoslog.testing.wait import wait_until

pytestmark = pytest.mark.interop

SESSION_TIMEOUT_MS = 6000  # the broker's group.min.session.timeout.ms: the quickest a dead writer is noticed


def call(url: str, method: str, path: str, body: object = None, timeout: float = 10) -> tuple[int, object]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, method=method,
                                     headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


class Instance:
    def __init__(self, bootstrap: str, workdir: Path, name: str, pause: str = "") -> None:
        self.port_file = workdir / f"{name}.port"
        self.log_path = workdir / f"{name}.log"
        self.pause = pause
        self.log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"), TEST_PAUSE_ENV: pause}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "eoslog", "schema-registry", "--bootstrap", bootstrap, "--listen", "127.0.0.1:0",
             "--port-file", str(self.port_file), "--session-timeout-ms", str(SESSION_TIMEOUT_MS)],
            stdout=self.log, stderr=subprocess.STDOUT, env=env)
        wait_until(lambda: self.port_file.exists() and self.port_file.read_text().strip(), 30, f"{name} serving")
        self.url = f"http://127.0.0.1:{int(self.port_file.read_text())}"

    def writer(self) -> str | None:
        try:
            return call(self.url, "GET", "/eoslog/writer", timeout=2)[1]["writer"]
        except OSError:
            return None

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.log.close()


@pytest.fixture
def instances(broker, tmp_path, request):
    pause = f"{request.param}:{tmp_path / 'paused'}" if hasattr(request, "param") else ""
    started = [Instance(broker.bootstrap, tmp_path, f"registry-{i}", pause) for i in range(2)]
    yield started
    for instance in started:
        instance.stop()


def writer_and_follower(a: Instance, b: Instance) -> tuple[Instance, Instance]:
    writer_url = wait_until(lambda: a.writer() == b.writer() and a.writer(), 30, "both instances agree on a writer")
    return (a, b) if a.url == writer_url else (b, a)


@pytest.mark.parametrize("instances", ["before_commit:victim-before", "after_commit:victim-after"], indirect=True)
def test_a_writer_sigkilled_mid_registration(instances):
    """Killed with the registration appended but not committed, its transaction is aborted by the next
    writer and never read; killed after committing but before answering, the retry finds it."""
    writer, follower = writer_and_follower(*instances)
    point, subject = instances[0].pause.split(":")[:2]
    before = call(follower.url, "POST", f"/subjects/{point}-before/versions", {"schema": '"int"'})[1]["id"]
    victim = {"schema": json.dumps({"type": "enum", "name": "V", "symbols": [point.upper()]})}
    outcome: list = []
    thread = threading.Thread(target=lambda: outcome.append(
        _try(follower.url, "POST", f"/subjects/{subject}/versions", victim)))
    thread.start()
    wait_until(lambda: "test fault: writer paused" in writer.log_path.read_text(), 30, f"the writer paused {point}")
    writer.kill()
    thread.join(70)
    assert outcome and outcome[0][0] != 200, f"the registration was answered although its writer died: {outcome}"
    wait_until(lambda: follower.writer() == follower.url, 30, "the survivor writes")
    _, answer = wait_until(lambda: _ok(follower.url, "POST", f"/subjects/{subject}/versions", victim), 30,
                                "the retried registration")
    assert call(follower.url, "GET", f"/subjects/{subject}/versions") == (200, [1])
    assert call(follower.url, "GET", f"/subjects/{subject}/versions/1")[1]["id"] == answer["id"]
    after = call(follower.url, "POST", f"/subjects/{point}-after/versions", {"schema": '"long"'})[1]["id"]
    assert len({before, answer["id"], after}) == 3  # no id handed out twice
    assert call(follower.url, "GET", f"/schemas/ids/{answer['id']}/subjects") == (200, [subject])


def _try(url: str, method: str, path: str, body: object):
    try:
        return call(url, method, path, body, timeout=60)
    except OSError as exc:
        return (None, str(exc))


def _ok(url: str, method: str, path: str, body: object):
    result = _try(url, method, path, body)
    return result if result[0] == 200 else None


def test_one_writer_and_a_sigkilled_writer_loses_nothing(instances, broker):
    writer, follower = writer_and_follower(*instances)
    assert follower.writer() == writer.url

    # a write through the follower is forwarded, and readable from the follower at once; the subject's
    # encoded slash survives the forwarding
    status, body = call(follower.url, "POST", "/subjects/forwarded%2Fvalue/versions", {"schema": '"string"'})
    assert status == 200
    assert call(follower.url, "GET", "/subjects/forwarded%2Fvalue/versions/1")[1]["id"] == body["id"]
    assert "forwarded/value" in call(writer.url, "GET", "/subjects")[1]

    acked: dict[str, int] = {}
    failures: list[str] = []
    stop_at = time.monotonic() + 90
    lock = threading.Lock()

    def register(worker: int) -> None:
        for i in range(40):
            subject = f"kill-{worker}-{i}"
            schema = {"schema": json.dumps({"type": "enum", "name": "E", "symbols": [f"S{worker}_{i}"]})}
            while time.monotonic() < stop_at:
                for instance in (writer, follower):  # the writer first, as long as it lives
                    try:
                        status, answer = call(instance.url, "POST", f"/subjects/{subject}/versions", schema)
                    except OSError as exc:
                        with lock:
                            failures.append(f"{subject}: {exc}")
                        continue
                    if status == 200:
                        with lock:
                            acked[subject] = answer["id"]
                        break
                    with lock:
                        failures.append(f"{subject}: {status} {answer}")
                else:
                    time.sleep(0.2)
                    continue
                break

    workers = [threading.Thread(target=register, args=(w,)) for w in range(4)]
    for thread in workers:
        thread.start()
    wait_until(lambda: len(acked) >= 30, 60, "registrations before the kill")
    writer.kill()
    for thread in workers:
        thread.join(100)
    assert len(acked) == 4 * 40, f"{len(acked)} acknowledged; last failures: {failures[-5:]}"
    assert failures, "the kill interrupted no registration: the test did not test the takeover"
    wait_until(lambda: follower.writer() == follower.url, 30, "the survivor writes")
    # every acknowledged registration is there with the id it was given, and no id names two schemas
    for subject, schema_id in acked.items():
        status, version = call(follower.url, "GET", f"/subjects/{subject}/versions/latest")
        assert (status, version["id"]) == (200, schema_id), subject
    assert len(set(acked.values())) == len(acked)
    assert call(follower.url, "GET", f"/subjects/{next(iter(acked))}/versions")[1] == [1]
