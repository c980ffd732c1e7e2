"""Listeners the Kafka way: ``listeners``, ``advertised.listeners`` and ``listener.security.protocol.map``.

    listeners=PLAINTEXT://127.0.0.1:9092,SSL://0.0.0.0:9093
    advertised.listeners=PLAINTEXT://127.0.0.1:9092,SSL://broker.example.com:9093
    listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,INTERNAL:SSL

Each listener has a name, an address to bind and a security protocol. The protocol is the one the map
gives its name; a standard name maps to itself. A client is told the advertised address of the
listener it came in on, so clients outside and inside a network each get an address they can reach.
Pure: parsing and lookups, no sockets.
"""

from __future__ import annotations

from dataclasses import dataclass

from eoslog.security.properties import ConfigError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_PROTOCOL_MAP = {p: p for p in PROTOCOLS}


MAX_PORT = 65535


class ListenerError(ValueError):
    pass


class ListenerBindError(ConfigError):
    """A listener's address could not be bound (a port in use, an address not of this machine); raised
    before the broker touches its data directory, so nothing is left half-started. A configuration error
    to an embedded broker's caller: the setting named in the message must change."""

    @classmethod
    def from_os_error(cls, listener: Listener, flag: str, exc: OSError) -> ListenerBindError:
        """One line for the operator: what failed and which setting (``flag``) changes it."""
        return cls.for_address(listener.host, listener.port, flag, exc)

    @classmethod
    def for_address(cls, host: str, port: int, flag: str, exc: OSError) -> ListenerBindError:
        """The same line for the broker's other ports (--metrics-listen, --console-listen)."""
        import errno

        address = f"{host}:{port}"
        if exc.errno == errno.EADDRINUSE:
            return cls(f"port {address} is in use (another broker?) — stop it or choose another {flag}")
        reason = exc.strerror or str(exc)
        return cls(f"cannot listen on {address}: {reason} — choose another {flag}")


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int
    protocol: str  # one of PROTOCOLS
    advertised_host: str | None = None
    advertised_port: int | None = None

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    def advertised(self, bound_port: int | None = None) -> tuple[str, int]:
        """Where clients are told to connect; port 0 (pick one) resolves to the bound port."""
        host = self.advertised_host or self.host
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"  # a wildcard is not an address a client can use
        port = self.advertised_port or (self.port if self.port else bound_port or 0)
        return host, port


def _endpoint(text: str, what: str) -> tuple[str, str, int]:
    name, sep, address = text.strip().partition("://")
    if not sep or not name:
        raise ListenerError(f"{what}: expected NAME://HOST:PORT, got {text.strip()!r}")
    host, colon, port = address.rpartition(":")
    if not colon or not port.isdigit():
        raise ListenerError(f"{what}: expected NAME://HOST:PORT, got {text.strip()!r}")
    if int(port) > MAX_PORT:  # the kernel would take it modulo 65536: 70000 binds 4464
        raise ListenerError(f"{what}: port {port} is out of range (0-{MAX_PORT}) in {text.strip()!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return name.upper(), host, int(port)


def parse_protocol_map(text: str) -> dict[str, str]:
    mapping = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, protocol = item.partition(":")
        protocol = protocol.strip().upper()
        if not sep or protocol not in PROTOCOLS:
            raise ListenerError(f"listener.security.protocol.map: expected NAME:PROTOCOL with a protocol of "
                                f"{', '.join(PROTOCOLS)}, got {item!r}")
        mapping[name.strip().upper()] = protocol
    return mapping


def parse_listeners(listeners: str, advertised: str | None = None,
                    protocol_map: dict[str, str] | None = None) -> list[Listener]:
    """The listeners in the order given (the first is the broker's primary one)."""
    mapping = protocol_map if protocol_map is not None else DEFAULT_PROTOCOL_MAP
    parsed = [_endpoint(item, "listeners") for item in listeners.split(",") if item.strip()]
    if not parsed:
        raise ListenerError("listeners: at least one NAME://HOST:PORT is needed")
    names = [name for name, _, _ in parsed]
    if len(set(names)) != len(names):
        raise ListenerError(f"listeners: each name may appear once, got {names}")
    ports = [port for _, _, port in parsed if port]
    if len(set(ports)) != len(ports):
        raise ListenerError(f"listeners: two listeners on one port: {listeners}")
    adverts: dict[str, tuple[str, int]] = {}
    for item in (advertised or "").split(","):
        if item.strip():
            name, host, port = _endpoint(item, "advertised.listeners")
            if name not in names:
                raise ListenerError(f"advertised.listeners names {name}, which is not in listeners")
            adverts[name] = (host, port)
    result = []
    for name, host, port in parsed:
        protocol = mapping.get(name)
        if protocol is None:
            raise ListenerError(f"listener {name} has no security protocol: add {name}:PROTOCOL to "
                                "listener.security.protocol.map")
        advertised_host, advertised_port = adverts.get(name, (None, None))
        result.append(Listener(name, host, port, protocol, advertised_host, advertised_port))
    return result


def inter_broker_listener(listeners: list[Listener], name: str | None = None,
                          protocol: str | None = None) -> Listener:
    """The listener other brokers connect to: ``inter.broker.listener.name``, or the listener named after
    ``security.inter.broker.protocol`` (Kafka's older property), or else the primary one. Kafka's own
    default is the PLAINTEXT listener; ours is the first, which is PLAINTEXT unless ``listeners`` says
    otherwise."""
    if name and protocol:
        raise ListenerError("set inter.broker.listener.name or security.inter.broker.protocol, not both")
    wanted = name or protocol
    if wanted is None:
        return listeners[0]
    for listener in listeners:
        if listener.name == wanted:
            return listener
    what = "inter.broker.listener.name" if name else "security.inter.broker.protocol"
    raise ListenerError(f"{what}={wanted}: no listener of that name in listeners "
                        f"({', '.join(l.name for l in listeners)})")


def bind_host(host: str | None):
    """An IP address as a one-element list of bytes (create_server takes a sequence of hosts): uvloop encodes
    a str host with the IDNA codec, whose import (stringprep, unicodedata) costs ~1 ms before the port opens,
    and an IP address's IDNA form is its ASCII. A name, or nothing (every interface), goes as given."""
    import ipaddress  # already loaded by pathlib (urllib.parse)

    if not host or not host.isascii():
        return host
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return host
    return [host.encode("ascii")]
