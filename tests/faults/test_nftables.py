"""The nftables script of a namespace network's drops, without I/O (eoslog/faults/nftables.py)."""

from __future__ import annotations

import pytest

from eoslog.faults import nftables
from eoslog.faults.nftables import Drop


def test_a_full_drop_and_a_partial_one_render_as_rules():
    assert Drop("198.18.0.21", "198.18.0.11").rule() == "ip saddr 198.18.0.21 ip daddr 198.18.0.11 counter drop"
    assert Drop("198.18.0.21", "198.18.0.11", 30).rule() == (
        "ip saddr 198.18.0.21 ip daddr 198.18.0.11 numgen random mod 100 < 30 counter drop")


def test_replace_flushes_then_adds_every_drop_once_in_order():
    script = nftables.replace([Drop("198.18.0.22", "198.18.0.2"), Drop("198.18.0.21", "198.18.0.2"),
                               Drop("198.18.0.21", "198.18.0.2")])
    lines = script.splitlines()
    assert lines[0] == "flush chain bridge eoslog links"
    assert lines[1:] == ["add rule bridge eoslog links ip saddr 198.18.0.21 ip daddr 198.18.0.2 counter drop",
                         "add rule bridge eoslog links ip saddr 198.18.0.22 ip daddr 198.18.0.2 counter drop"]
    assert nftables.replace([]) == "flush chain bridge eoslog links\n"


def test_split_cuts_every_link_across_the_sides_both_ways_and_none_inside():
    drops = nftables.split(["198.18.0.21", "198.18.0.22"], ["198.18.0.23"])
    assert drops == {Drop("198.18.0.21", "198.18.0.23"), Drop("198.18.0.23", "198.18.0.21"),
                     Drop("198.18.0.22", "198.18.0.23"), Drop("198.18.0.23", "198.18.0.22")}


@pytest.mark.parametrize("bad", [("::1", "198.18.0.1", 100), ("198.18.0.1", "x", 100),
                                 ("198.18.0.1", "198.18.0.2", 0), ("198.18.0.1", "198.18.0.2", 101)])
def test_a_drop_refuses_what_is_not_an_ipv4_address_or_a_share(bad):
    with pytest.raises(ValueError):
        Drop(*bad)
