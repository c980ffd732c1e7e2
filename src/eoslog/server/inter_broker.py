"""How a cluster member connects to the others: ``inter.broker.listener.name`` picks the listener (by
name) of every other broker's registration, and that listener's security protocol says how to speak
to it. The same ``ssl.*`` properties (``listener.name.<name>.ssl.*`` first) that configure the
listener for incoming connections configure the outgoing ones, as in Kafka.

SASL between brokers (SASL_PLAINTEXT, SASL_SSL), as Kafka configures it:

    sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512       # our default (Kafka's is GSSAPI, not served)
    listener.name.internal.scram-sha-512.sasl.jaas.config=\
        org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="...";

Each new connection runs SaslHandshake v1 and SaslAuthenticate v1 rounds (PLAIN, or SCRAM with scramp as
the client) before its first request. The other broker checks the login against the users in ZooKeeper,
like any client's. A refusal closes the connection and says so in this broker's log; the next request
connects and tries again (a password fixed in ZooKeeper is picked up without a restart).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import struct
import time
from collections.abc import Mapping

from eoslog.cluster.broker_client import AfterConnect, BrokerConnectionError, BrokerLink
from eoslog.protocol import codec, messages
from eoslog.protocol.errors import ErrorCode
from eoslog.security.jaas import jaas_option
from eoslog.server.listeners import Listener

log = logging.getLogger(__name__)

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
DEFAULT_INTER_BROKER_MECHANISM = "SCRAM-SHA-512"
SASL_TIMEOUT_S = 10.0
CLIENT_ID = "eoslog-broker-sasl"
_SIZE = struct.Struct(">i")


class InterBrokerError(ValueError):
    """The inter-broker listener cannot be used to connect to other brokers (a configuration error)."""


class SaslLoginRefused(BrokerConnectionError):
    """The other broker refused this broker's SASL login (wrong password, unknown user, mechanism off)."""


def client_security(protocol: str, properties: Mapping[str, str], listener: Listener
                    ) -> tuple[ssl.SSLContext | None, AfterConnect | None]:
    """(TLS context or None, step after connecting or None) for connections to a listener of this
    protocol: SASL_PLAINTEXT and SASL_SSL log in as the step after connecting."""
    if protocol == "PLAINTEXT":
        return None, None
    context = None
    if protocol in ("SSL", "SASL_SSL"):
        from eoslog.server.tls import TlsConfigError, client_context

        try:
            context = client_context(properties, listener)
        except TlsConfigError as exc:
            raise InterBrokerError(f"inter-broker listener {listener.name}: {exc}") from exc
    if protocol == "SSL":
        return context, None
    return context, sasl_login(*_login_settings(properties, listener))


def _login_settings(properties: Mapping[str, str], listener: Listener) -> tuple[str, str, str]:
    """(mechanism, username, password) of this broker's login to the others."""
    from eoslog.server.config import DEFAULT_SASL_MECHANISMS
    from eoslog.server.tls import listener_property

    mechanism = properties.get("sasl.mechanism.inter.broker.protocol", DEFAULT_INTER_BROKER_MECHANISM).strip().upper()
    where = f"inter-broker listener {listener.name} ({listener.protocol})"
    if "," in mechanism:
        raise InterBrokerError(f"sasl.mechanism.inter.broker.protocol={mechanism}: name one mechanism")
    enabled = [m.strip().upper() for m in (listener_property(properties, listener, "sasl.enabled.mechanisms")
                                           or DEFAULT_SASL_MECHANISMS).split(",")]
    if mechanism not in enabled:
        raise InterBrokerError(f"{where}: sasl.mechanism.inter.broker.protocol={mechanism} is not in the "
                               f"listener's enabled mechanisms ({', '.join(enabled)})")
    name = f"listener.name.{listener.name.lower()}.{mechanism.lower()}.sasl.jaas.config"
    jaas = properties.get(name)
    if not jaas:
        raise InterBrokerError(f"{where} logs in with {mechanism}: set {name}=<LoginModule> required "
                               'username="..." password="..."; (docs/security.md)')
    username, password = jaas_option(jaas, "username"), jaas_option(jaas, "password")
    if not username or password is None:
        raise InterBrokerError(f"{name}: needs username=\"...\" and password=\"...\"")
    return mechanism, username, password


def sasl_login(mechanism: str, username: str, password: str) -> AfterConnect:
    last_logged: dict[str, float] = {}

    async def after_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await asyncio.wait_for(_login(reader, writer, mechanism, username, password), SASL_TIMEOUT_S)
        except SaslLoginRefused as exc:
            # Said loudly, but once a minute per broker: the fetcher retries every replica.fetch.backoff.ms.
            host, port = (writer.get_extra_info("peername") or ("?", "?"))[:2]
            peer = f"{host}:{port}"
            if time.monotonic() - last_logged.get(peer, -1e9) > 60:
                last_logged[peer] = time.monotonic()
                log.error("SASL login as %r to the broker at %s failed: %s; this broker cannot replicate from "
                          "or send markers to it until the credential matches (eoslog users, docs/security.md)",
                          username, peer, exc)
            raise
    return after_connect


async def _login(reader, writer, mechanism: str, username: str, password: str) -> None:
    exchange = _Exchange(reader, writer)
    response = await exchange.call(SASL_HANDSHAKE, 1, messages.SaslHandshakeRequest(mechanism=mechanism))
    if response.error_code:
        raise SaslLoginRefused(f"SaslHandshake {mechanism}: {ErrorCode(response.error_code).name} (the listener "
                               f"offers {', '.join(response.mechanisms) or 'nothing'})")
    if mechanism == "PLAIN":
        await exchange.authenticate(b"\x00" + username.encode() + b"\x00" + password.encode())
        return
    import scramp

    client = scramp.ScramClient([mechanism], username, password)
    server_first = await exchange.authenticate(client.get_client_first().encode())
    try:
        client.set_server_first(server_first.decode())
        # PBKDF2 over the salt and iterations the server named: CPU work, kept off the event loop.
        client_final = await asyncio.to_thread(client.get_client_final)
        client.set_server_final((await exchange.authenticate(client_final.encode())).decode())
    except scramp.ScramException as exc:
        raise SaslLoginRefused(f"{mechanism}: {exc}") from exc


class _Exchange:
    """One request, one response, in order, before the connection's reader task exists."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.correlation_id = 0

    async def call(self, api_key: int, api_version: int, request):
        self.correlation_id += 1
        self.writer.write(codec.encode_request(
            codec.RequestHeader(api_key, api_version, self.correlation_id, CLIENT_ID), request))
        await self.writer.drain()
        (size,) = _SIZE.unpack(await self.reader.readexactly(4))
        correlation_id, response = codec.decode_response_frame(api_key, api_version,
                                                               await self.reader.readexactly(size))
        if correlation_id != self.correlation_id:
            raise BrokerConnectionError(f"SASL: correlation id {correlation_id}, expected {self.correlation_id}")
        return response

    async def authenticate(self, token: bytes) -> bytes:
        response = await self.call(SASL_AUTHENTICATE, 1, messages.SaslAuthenticateRequest(auth_bytes=token))
        if response.error_code:
            raise SaslLoginRefused(f"{ErrorCode(response.error_code).name}: {response.error_message}")
        return bytes(response.auth_bytes)


def inter_broker_link(listener: Listener, properties: Mapping[str, str]) -> BrokerLink:
    context, after_connect = client_security(listener.protocol, properties, listener)
    return BrokerLink(listener.name, context, after_connect)
