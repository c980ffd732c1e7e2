"""`eoslog share-groups` run as a subprocess against a real broker (embedded, over TCP): the listing,
describe's members and per-partition start offset and lag, reset-offsets (a dry run unless --execute,
refused while the group has members), delete of a topic's share state and of the group, in the tools'
one output style ("none", --json, a not-found is one line and exit status 1)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_share_wire import acknowledge, acquired, fetch, heartbeat, join, setup_group

from eoslog.client.connection import BrokerConnection
from eoslog.testing.embedded import EmbeddedBroker

pytestmark = pytest.mark.interop
ACCEPT = 1


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("share-cli")) as embedded:
        yield embedded


def eoslog(broker, *args: str) -> tuple[int, str, str]:
    done = subprocess.run([sys.executable, "-m", "eoslog", "share-groups", *args, "-b", broker.bootstrap],
                          check=False, capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout, done.stderr


def rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.splitlines() if line.strip()]


def test_share_groups_command(broker):
    assert eoslog(broker, "list")[:2] == (0, "none\n")
    assert eoslog(broker, "list", "--json")[:2] == (0, "[]\n")
    code, out, err = eoslog(broker, "describe", "nope")
    assert (code, out) == (1, "")
    assert err == "Error: share group nope not found (eoslog share-groups list shows them)\n"
    assert eoslog(broker, "delete", "nope")[2] == "Error: share group nope not found (eoslog share-groups list shows them)\n"

    topic, group = setup_group(broker.bootstrap, records=10)
    with BrokerConnection.from_bootstrap(broker.bootstrap) as conn:
        member, _, topic_id = join(conn, group, topic)
        assert acquired(fetch(conn, group, member, 0, topic_id)) == [(0, 9, 1)]
        assert acknowledge(conn, group, member, 1, topic_id, [(0, 4, ACCEPT)]).error_code == 0

        code, out, _ = eoslog(broker, "list")
        assert code == 0 and rows(out) == [["GROUP", "STATE"], [group, "Stable"]]
        code, out, _ = eoslog(broker, "describe", group)
        assert code == 0
        assert out.startswith(f"share group {group}: Stable, group epoch ")
        assert [member, f"{topic}:0"] == [rows(out)[2][0], rows(out)[2][-1]]  # MEMBER ... ASSIGNMENT
        assert ["TOPIC", "PARTITION", "START-OFFSET", "LAG"] in rows(out)
        assert [topic, "0", "5", "5"] in rows(out)
        assert out.endswith("total lag: 5\n")
        view = json.loads(eoslog(broker, "describe", group, "--json")[1])
        assert view["partitions"] == [{"topic": topic, "partition": 0, "start_offset": 5, "lag": 5}]
        assert [m["member_id"] for m in view["members"]] == [member]

        code, _, err = eoslog(broker, "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute")
        assert code == 1 and "has no members" in err and err.count("\n") == 1
        assert heartbeat(conn, group, member, -1).error_code == 0

    code, out, _ = eoslog(broker, "reset-offsets", group, "--topic", topic, "--to-offset", "7")
    assert code == 0
    assert rows(out) == [["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "NEW-START-OFFSET"],
                         [group, topic, "0", "5", "7"], ["dry", "run:", "nothing", "changed", "(add", "--execute)"]]
    assert [topic, "0", "5", "5"] in rows(eoslog(broker, "describe", group)[1])  # the dry run changed nothing
    code, out, _ = eoslog(broker, "reset-offsets", group, "--all-topics", "--to-offset", "7", "--execute")
    assert code == 0 and rows(out)[1:] == [[group, topic, "0", "5", "7"], ["set", "1", "start", "offset"]]
    assert [topic, "0", "7", "3"] in rows(eoslog(broker, "describe", group)[1])
    answer = json.loads(eoslog(broker, "reset-offsets", group, "--topic", f"{topic}:0", "--to-latest",
                               "--execute", "--json")[1])
    assert answer == {"group": group, "executed": True, "partitions": [
        {"topic": topic, "partition": 0, "current_start_offset": 7, "new_start_offset": 10}]}
    assert [topic, "0", "10", "0"] in rows(eoslog(broker, "describe", group)[1])

    assert eoslog(broker, "delete", group, "--topic", topic)[:2] == (
        0, f"deleted the share state of {group} for {topic}\n")
    assert eoslog(broker, "describe", group)[1].endswith("\nno share state\n")
    assert eoslog(broker, "delete", group)[:2] == (0, f"deleted share group {group}\n")
    assert eoslog(broker, "list")[:2] == (0, "none\n")
