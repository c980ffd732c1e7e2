"""A cleaner child that misbehaves on purpose (tests/log/test_cleaner_process.py).

    python cleaner_dying_worker.py die   # prepares and cleans the first group, then dies writing the second
    python cleaner_dying_worker.py hang  # prepares, then never answers a clean request
"""

from __future__ import annotations

import os
import pickle
import sys
import time

from eoslog.log import cleaner_pass


def main() -> None:
    mode = sys.argv[1]
    requests, replies = sys.stdin.buffer, sys.stdout.buffer
    state = None
    cleaned = 0
    while True:
        try:
            message = pickle.load(requests)
        except EOFError:
            return
        if message[0] == "prepare":
            state = cleaner_pass.prepare(message[1])
            reply = ("prepared", state.map_end, state.groups, state.stats, state.next_horizon_ms)
        elif mode == "hang":
            time.sleep(3600)
        elif cleaned == 1:
            # a torn output, as a crash halfway through writing leaves it
            base = state.groups[message[1]][0].base_offset
            for path in cleaner_pass.cleaned_paths(state.plan.directory, base):
                with open(path, "wb") as f:
                    f.write(b"\x01" * 100)
            os._exit(9)
        else:
            group = cleaner_pass.clean_group(state, state.groups[message[1]])
            cleaned += 1
            reply = ("cleaned", group, state.stats, state.next_horizon_ms)
        pickle.dump(reply, replies)
        replies.flush()


if __name__ == "__main__":
    main()
