"""A transactional producer that opens a transaction, says READY, waits for a line on stdin (the test
pauses it with SIGSTOP meanwhile), then tries to write more and commit. Prints OUTCOME <text> last."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from txn_clients import PRODUCERS

client, bootstrap, transactional_id, topic = sys.argv[1:5]
producer = PRODUCERS[client](bootstrap, transactional_id, **({"transaction_timeout_ms": 60000}
                                                                if client != "confluent" else {}))
producer.run("open", [(topic, 0, b"zombie-before-pause")])
print("READY", flush=True)
sys.stdin.readline()
try:
    producer.run("commit", [(topic, 0, b"zombie-after-pause-0"), (topic, 1, b"zombie-after-pause-1")], begin=False)
    print("OUTCOME committed", flush=True)
except BaseException as exc:  # noqa: BLE001 - the expected path: the zombie is fenced
    print(f"OUTCOME fenced {type(exc).__name__}: {exc}", flush=True)
