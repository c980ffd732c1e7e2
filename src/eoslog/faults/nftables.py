"""The packet drops of a namespace network, as one nftables table, without I/O.

A :class:`Drop` loses the IPv4 packets from one address to another (all of them, or a share chosen by
``numgen random``). Every drop lives in one chain of a ``bridge`` family table in the bridge's own
namespace, hooked on ``forward``: the bridge is the one place every packet between two hosts crosses, so
a cut needs no rule on the hosts themselves and healing is emptying one chain. :func:`replace` renders
the whole chain as one ``nft -f`` script, which nftables applies atomically: a run never sees half a
partition.

Why drops and not rejects: a dropped packet is what a cut cable or a dead switch gives, so TCP retries
and the application's own timeouts decide when a peer is gone (a reject would close connections at
once, which the loopback fault proxy already does).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

TABLE = "eoslog"
CHAIN = "links"


@dataclass(frozen=True, order=True)
class Drop:
    """Packets from ``source`` to ``destination`` (IPv4 addresses) are lost; ``percent`` < 100 loses
    each one with that probability."""

    source: str
    destination: str
    percent: int = 100

    def __post_init__(self) -> None:
        ipaddress.IPv4Address(self.source)
        ipaddress.IPv4Address(self.destination)
        if not 0 < self.percent <= 100:
            raise ValueError(f"percent must be in 1..100, not {self.percent}")

    def rule(self) -> str:
        chance = "" if self.percent == 100 else f" numgen random mod 100 < {self.percent}"
        return f"ip saddr {self.source} ip daddr {self.destination}{chance} counter drop"


def create() -> str:
    """The table and its empty chain (``nft -f``), accept by default."""
    return (f"add table bridge {TABLE}\n"
            f"add chain bridge {TABLE} {CHAIN} {{ type filter hook forward priority 0 ; policy accept ; }}\n")


def replace(drops: set[Drop] | list[Drop]) -> str:
    """One transaction that leaves exactly ``drops`` in the chain."""
    lines = [f"flush chain bridge {TABLE} {CHAIN}"]
    lines += [f"add rule bridge {TABLE} {CHAIN} {drop.rule()}" for drop in sorted(set(drops))]
    return "\n".join(lines) + "\n"


def cut(a: str, b: str) -> set[Drop]:
    """Both directions between two addresses."""
    return {Drop(a, b), Drop(b, a)}


def split(side_a: list[str], side_b: list[str]) -> set[Drop]:
    """Every link between the two sides cut, both ways; links inside a side stay."""
    return {drop for a in side_a for b in side_b if a != b for drop in cut(a, b)}
