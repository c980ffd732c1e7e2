"""The nemesis: injects one fault at a time, on a seeded schedule, and records when each one held.

Kinds (docs/reliability.md, "Verify runs"):

| kind | what it does | needs |
|---|---|---|
| ``broker-kill`` | SIGKILL the broker, wait, start it again on the same data directory | our broker process |
| ``broker-pause`` | SIGSTOP the broker for a while, then SIGCONT | our broker process |
| ``client-kill`` | SIGKILL one worker process; the runner replaces it (same transactional id) | - |
| ``proxy-drop`` | the proxy drops (and delays) some responses: executed requests whose answer is lost | the proxy |
| ``proxy-cut`` | the proxy cuts connections at random frames, sometimes mid-frame | the proxy |
| ``proxy-pause`` | the proxy holds every frame for a while (a short network partition) | the proxy |
| ``power-loss`` | SIGKILL the broker, then LazyFS (its data directory's filesystem) drops every write not yet fsynced, half the time keeping a torn prefix instead; start it again on what survived. Only when asked for (``--faults``) | our broker process on LazyFS |
| ``bitflip`` | stop the broker (SIGTERM or SIGKILL), flip one bit in a random data batch of the test topic below the partition's recovery point on disk (synced, acknowledged data; faults/bitflip.py), start it again: the broker must refuse that batch (CORRUPT_MESSAGE) and serve everything else. The workers and the final read seek past a refused batch, and the checker excuses exactly the flipped batches' offsets, which faults.json names (``damaged``). Only when asked for (``--faults``) | our broker process |
| ``proxy-replay-endtxn`` | ``proxy-replay`` for the next EndTxn alone (KAFKA-17754's late EndTxn). Only when asked for | the proxy |
| ``proxy-replay`` | "delay and replay": the proxy holds the next Produce or EndTxn for longer than the client waits, then forwards it, after the client has moved on (KIP-890 part 2's case) | the proxy |

The schedule runs in rounds; each round is every enabled kind once, in a shuffled order, so even a
short run sees each kind several times. Between faults there is a quiet gap so work can complete.

The forced replay schedule (``forced_replays`` = N, test-only; run.py's VerifyOptions.schedule): N
``proxy-replay-endtxn`` faults, each released not after a random hold but when the one worker, running
workload_v2's forced schedule, says it has a write in its next transaction and waits for the request it
gave up on (``late-wait``, through :meth:`Nemesis.worker_said`); the fault then lasts until that
transaction ended (``late-done``), and its detail names the late answer and that outcome. Then
:attr:`Nemesis.finished` is set and the run may end: the known-bug check without chance in it.
"""

from __future__ import annotations

import dataclasses
import queue
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence

BROKER_KINDS = ("broker-kill", "broker-pause")
PROXY_KINDS = ("proxy-drop", "proxy-cut", "proxy-pause")
# Not among the kinds a run injects unless asked for (--faults): with transaction version 1 clients a
# replayed Produce of the same epoch can join the next transaction (KAFKA-17754), the protocol's hole,
# not the broker's. Transaction version 2 clients (--transaction-version 2) run it by default.
REPLAY_KINDS = ("proxy-replay",)
# proxy-replay aimed at EndTxn alone (Produce far outnumbers it, and a late Produce of a version 1
# producer that retried meanwhile is only a duplicate): KAFKA-17754's EndTxn case. Only when named.
ENDTXN_REPLAY_KINDS = ("proxy-replay-endtxn",)
CLIENT_KINDS = ("client-kill",)
# Not among the default kinds either: the broker's data directory must then be on LazyFS (FUSE), which
# the run mounts only when this kind is asked for (eoslog/faults/lazyfs.py).
POWER_KINDS = ("power-loss",)
# Not among the default kinds: a single node holds the only copy, so the flipped batch's records are gone
# for good (docs/durability.md, "Corruption"), and the checker must be told which (FaultWindow.damaged).
BITFLIP_KINDS = ("bitflip",)
ALL_KINDS = BROKER_KINDS + CLIENT_KINDS + PROXY_KINDS
SINGLE_BROKER_KINDS = (ALL_KINDS + REPLAY_KINDS + ENDTXN_REPLAY_KINDS + POWER_KINDS
                       + BITFLIP_KINDS)  # what this Nemesis injects

DROP_RATE = 0.05  # per response frame while proxy-drop holds
DELAY_RATE = 0.05
CUT_RATE = 0.01  # per frame, either direction, while proxy-cut holds
# proxy-replay: the API keys held (Produce, EndTxn), and the least time one is held -- longer than a
# client waits for an answer (workload_v2.REQUEST_TIMEOUT_S), so it has given up and moved on.
REPLAY_API_KEYS = (0, 26)
REPLAY_MIN_HOLD_S = 5.0
# The forced replay schedule: how long the nemesis waits for each thing the worker says.
FORCED_WAIT_S = 30.0
CUT_SHORT = "cut short: the run ended"  # ends the detail of a fault the end of the run interrupted
BROKER_RESTART_ATTEMPTS = 3


class NemesisError(RuntimeError):
    """The nemesis could not heal what it broke (the broker would not start again)."""


def start_again(broker, what: str, attempts: int = BROKER_RESTART_ATTEMPTS, **start) -> float:
    """Starts a killed broker process, up to ``attempts`` times (a start fails when the process exits or is
    not ready in time); the seconds it took. NemesisError naming ``what`` when every attempt failed. Every
    nemesis restarts brokers this way (cluster_faults.py too)."""
    started = time.monotonic()
    for attempt in range(1, attempts + 1):
        try:
            broker.start(**start)
            return time.monotonic() - started
        except (RuntimeError, TimeoutError) as exc:
            if attempt == attempts:
                raise NemesisError(f"{what} did not restart: {exc}") from exc
            time.sleep(0.5)
    raise AssertionError("unreachable")


@dataclasses.dataclass(frozen=True)
class FaultWindow:
    """One fault, from when it was injected to when it was healed (equal for instant faults), in
    ``time.time()`` seconds: the history's time base."""

    start: float
    end: float
    kind: str
    detail: str = ""
    # (key, first offset, last offset) of each batch the fault damaged on purpose (bitflip on a single
    # node): the broker refuses them, so their records may never be read, and the checker excuses them.
    damaged: tuple[tuple[str, int, int], ...] = ()

    def as_tuple(self) -> tuple[float, float, str]:
        return (self.start, self.end, self.kind)


class Nemesis:
    """Runs the fault schedule in a thread until :meth:`stop`; then :meth:`heal` has undone every fault.

    ``broker`` is a BrokerProcess (or None), ``proxy`` a FaultProxy (or None), ``kill_client`` a
    callable that SIGKILLs one worker and returns a description (or None when none is running).
    """

    KNOWN_KINDS: tuple[str, ...] = SINGLE_BROKER_KINDS  # what this nemesis can inject

    def __init__(self, kinds: Sequence[str], *, seed: int, broker=None, proxy=None,
                 kill_client: Callable[[], str | None] | None = None,
                 fault_seconds: tuple[float, float] = (1.0, 4.0),
                 quiet_seconds: tuple[float, float] = (1.0, 3.0),
                 drop_rate: float = DROP_RATE,
                 disk=None,
                 topic: str | None = None,
                 forced_replays: int | None = None,
                 log: Callable[[str], None] | None = None) -> None:
        unknown = set(kinds) - set(self.KNOWN_KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {', '.join(self.KNOWN_KINDS)}")
        if broker is None and set(kinds) & set(BROKER_KINDS):
            raise ValueError("broker faults need a broker process the verifier started")
        if (proxy is None and set(kinds) & set(PROXY_KINDS + REPLAY_KINDS + ENDTXN_REPLAY_KINDS)
                and self.KNOWN_KINDS is SINGLE_BROKER_KINDS):
            raise ValueError("proxy faults need the fault proxy")
        if (broker is None or disk is None) and set(kinds) & set(POWER_KINDS) and self.KNOWN_KINDS is SINGLE_BROKER_KINDS:
            raise ValueError("power-loss needs a broker process the verifier started on LazyFS")
        if (broker is None or topic is None) and "bitflip" in kinds and self.KNOWN_KINDS is SINGLE_BROKER_KINDS:
            raise ValueError("bitflip needs a broker process the verifier started, and its topic")
        if kill_client is None and "client-kill" in kinds:
            raise ValueError("client-kill needs a way to kill a client")
        if forced_replays is not None and tuple(kinds) != ENDTXN_REPLAY_KINDS:
            raise ValueError(f"the forced replay schedule injects {ENDTXN_REPLAY_KINDS[0]} alone, not {list(kinds)}")
        self.kinds = tuple(kinds)
        self.random = random.Random(seed)
        self.broker = broker
        self.proxy = proxy
        self.kill_client = kill_client
        self.fault_seconds = fault_seconds
        self.quiet_seconds = quiet_seconds
        self.drop_rate = drop_rate
        self.disk = disk  # a faults.lazyfs.LazyMount under the broker's data directory, for power-loss
        self.topic = topic  # the workers' topic, whose partitions bitflip aims at
        self.log = log or (lambda message: None)
        self.windows: list[FaultWindow] = []
        self.counts: Counter[str] = Counter()
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._broker_paused = False
        self._holding_requests = False
        self.replay_min_hold_s = REPLAY_MIN_HOLD_S
        self.forced_replays = forced_replays
        self.finished = threading.Event()  # the forced schedule is done: the run may end
        self._worker_said: queue.Queue[tuple[str, object]] = queue.Queue()

    def worker_said(self, what: str, value: object = None) -> None:
        """A ``schedule`` line of the worker (workload_v2's forced schedule); any thread."""
        self._worker_said.put((what, value))

    # ------------------------------------------------------------------------------------ control

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="eoslog-nemesis", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 60.0) -> None:
        """Ends the schedule (a fault in progress is cut short) and heals everything."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self.heal()

    def heal(self) -> None:
        if self.proxy is not None:
            self.proxy.set_faults(drop_response_rate=0.0, delay_response_rate=0.0, cut_rate=0.0)
            if self._holding_requests:
                self.proxy.release_requests()
                self._holding_requests = False
            if self.proxy.paused:
                self.proxy.resume()
        if self.broker is not None:
            if self._broker_paused:
                self.broker.resume()
                self._broker_paused = False
            if self.broker.process is None or self.broker.process.poll() is not None:
                self._start_broker()

    # ------------------------------------------------------------------------------------ schedule

    def _run(self) -> None:
        if not self.kinds:  # a run without faults: nothing to schedule
            self._stop.wait()
            return
        try:
            if self.forced_replays is not None:
                for _ in range(self.forced_replays):
                    if self._wait(self.random.uniform(*self.quiet_seconds)):
                        return
                    self._inject_forced_replay()
                    if self._stop.is_set():
                        return
                self.finished.set()
                return
            while not self._stop.is_set():
                round_ = list(self.kinds)
                self.random.shuffle(round_)
                for kind in round_:
                    if self._wait(self.random.uniform(*self.quiet_seconds)):
                        return
                    self._inject(kind)
                    if self._stop.is_set():
                        return
        except BaseException as exc:  # noqa: BLE001 - reported by the runner, which then fails the run
            self.error = exc
            self.log(f"nemesis stopped: {exc}")

    def _wait(self, seconds: float) -> bool:
        """Sleeps unless stopped; True when stopped."""
        return self._stop.wait(seconds)

    def _inject(self, kind: str) -> None:
        hold = self.random.uniform(*self.fault_seconds)
        start = time.time()
        detail = ""
        damaged: tuple[tuple[str, int, int], ...] = ()
        cut = False  # the run ended while the fault held: it lasted less than planned
        if kind == "bitflip":
            detail, damaged = self._bitflip()
        elif kind == "broker-kill":
            self.broker.kill()
            self._wait(self.random.uniform(0.2, 1.0))
            took = self._start_broker()
            detail = f"restarted in {took:.2f} s"
        elif kind == "power-loss":
            self.broker.kill()
            torn_seed = self.random.getrandbits(32) if self.random.random() < 0.5 else None
            files, undone = self.disk.power_loss(torn_seed)
            self._wait(self.random.uniform(0.2, 1.0))
            took = self._start_broker()
            detail = (f"unsynced writes to {files} file(s) {'torn' if torn_seed is not None else 'dropped'}, "
                      f"{undone} namespace operation(s) undone, restarted in {took:.2f} s")
        elif kind == "broker-pause":
            self.broker.pause()
            self._broker_paused = True
            cut = self._wait(hold)
            self.broker.resume()
            self._broker_paused = False
            detail = f"{hold:.1f} s"
        elif kind == "client-kill":
            detail = self.kill_client() or "no client running"
        elif kind == "proxy-drop":
            self.proxy.set_faults(drop_response_rate=self.drop_rate, delay_response_rate=DELAY_RATE)
            cut = self._wait(hold)
            self.proxy.set_faults(drop_response_rate=0.0, delay_response_rate=0.0)
            detail = f"drop={self.drop_rate:g} delay={DELAY_RATE:g} for {hold:.1f} s"
        elif kind == "proxy-cut":
            self.proxy.set_faults(cut_rate=CUT_RATE)
            cut = self._wait(hold)
            self.proxy.set_faults(cut_rate=0.0)
            detail = f"cut={CUT_RATE:g} for {hold:.1f} s"
        elif kind in ("proxy-replay", "proxy-replay-endtxn"):
            hold += self.replay_min_hold_s
            before = self.proxy.snapshot()["requests_held"]
            self._holding_requests = True
            self.proxy.hold_requests(*(REPLAY_API_KEYS if kind == "proxy-replay" else (26,)), count=1)
            cut = self._wait(hold)
            held = self.proxy.snapshot()["requests_held"] - before
            self.proxy.release_requests()
            self._holding_requests = False
            detail = f"held {held} request(s) for {time.time() - start:.1f} s, then replayed"
        elif kind == "proxy-pause":
            self.proxy.pause()
            cut = self._wait(hold)
            self.proxy.resume()
            detail = f"{hold:.1f} s"
        if cut:
            detail += f" ({CUT_SHORT})"
        window = FaultWindow(start, time.time(), kind, detail, damaged)
        self.windows.append(window)
        self.counts[kind] += 1
        self.log(f"{kind}: {detail}")

    def _await_worker(self, what: str, deadline: float, check: Callable[[], bool] = lambda: True):
        """The value of the worker's next ``what`` line for which ``check()`` holds (others are
        dropped: said before the fault, or about a request the proxy did not hold); None at the
        deadline or when stopped."""
        while not self._stop.is_set():
            try:
                said, value = self._worker_said.get(timeout=min(0.2, max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                if time.monotonic() >= deadline:
                    return None
                continue
            if said == what and check():
                return value
        return None

    def _inject_forced_replay(self) -> None:
        """One proxy-replay-endtxn of the forced schedule (the module docstring)."""
        start = time.time()
        while not self._worker_said.empty():  # what the worker said before this fault is not about it
            self._worker_said.get_nowait()
        before = self.proxy.snapshot()["requests_held"]
        self._holding_requests = True
        self.proxy.hold_requests(26, count=1)

        def holding() -> bool:
            return self.proxy.snapshot()["requests_held"] > before

        waiting = self._await_worker("late-wait", time.monotonic() + FORCED_WAIT_S, holding)
        held = self.proxy.snapshot()["requests_held"] - before
        self.proxy.release_requests()
        self._holding_requests = False
        if waiting is None:
            detail = f"held {held} request(s) for {time.time() - start:.1f} s; the worker never waited for it"
        else:
            released = time.time() - start
            answers = self._await_worker("late-answered", time.monotonic() + FORCED_WAIT_S)
            outcome = self._await_worker("late-done", time.monotonic() + FORCED_WAIT_S)
            detail = (f"held {held} request(s) for {released:.1f} s, released into the worker's next "
                      f"transaction; late answer {'; '.join(answers or ['none'])}; that transaction: {outcome}")
        if self._stop.is_set():
            detail += f" ({CUT_SHORT})"
        self.windows.append(FaultWindow(start, time.time(), "proxy-replay-endtxn", detail))
        self.counts["proxy-replay-endtxn"] += 1
        self.log(f"proxy-replay-endtxn (forced): {detail}")

    def _bitflip(self) -> tuple[str, tuple[tuple[str, int, int], ...]]:
        """Stops the broker, flips a bit in a synced data batch of one partition, starts it again."""
        import os

        from eoslog.faults.bitflip import flip_bit
        from eoslog.log.checkpoint import RECOVERY_POINT_CHECKPOINT, parse_checkpoint
        from eoslog.log.errors import CorruptCheckpointError

        how = self.random.choice(["terminate", "kill"])
        getattr(self.broker, how)()
        data_dir = self.broker.data_dir
        # Below the recovery point on disk: what recovery keeps (and refuses) rather than cuts as a torn
        # tail. After SIGKILL it trails the acknowledged end by the checkpoint's throttle (log/manager.py).
        try:
            recovery = parse_checkpoint((data_dir / RECOVERY_POINT_CHECKPOINT).read_bytes())
        except (OSError, CorruptCheckpointError):
            recovery = {}
        partitions = sorted(p for (t, p), offset in recovery.items() if t == self.topic and offset > 0)
        self.random.shuffle(partitions)
        detail, damaged = "no synced data batch to flip", ()
        for partition in partitions:
            try:
                flip = flip_bit(str(data_dir / f"{self.topic}-{partition}"), self.random,
                                below_offset=recovery[(self.topic, partition)], data_only=True)
            except (ValueError, FileNotFoundError):
                continue
            key = f"{self.topic}-{partition}"
            detail = (f"{key}: bit {flip.bit} of byte {flip.byte} of {os.path.basename(flip.path)}, "
                      f"batch {flip.base_offset}..{flip.last_offset}")
            damaged = ((key, flip.base_offset, flip.last_offset),)
            break
        self._wait(self.random.uniform(0.2, 1.0))
        took = self._start_broker()
        return f"{'SIGTERM' if how == 'terminate' else 'SIGKILL'}, {detail}, restarted in {took:.2f} s", damaged

    def _start_broker(self) -> float:
        return start_again(self.broker, "the broker")
