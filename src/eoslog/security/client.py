"""How eoslog's own clients (the admin tools, the Spark sink's transaction-group client) reach a secured
listener: TLS and SASL from the settings a Kafka client config carries.

    eoslog users list --bootstrap host:9094 --command-config admin.properties

The file holds the settings a Kafka client config carries, in either spelling:

    security.protocol=SASL_SSL
    sasl.mechanism=SCRAM-SHA-512                 # or sasl.mechanisms (librdkafka)
    sasl.username=admin                          # or sasl.jaas.config=... username="admin" password="..."
    sasl.password=admin-secret
    ssl.ca.location=/etc/eoslog/ca.pem           # or ssl.truststore.location (PEM)
    ssl.certificate.location=/etc/eoslog/me.pem  # with ssl.key.location, or ssl.keystore.location (PEM
    ssl.key.location=/etc/eoslog/me.key          #   holding both), for listeners that require a client cert
    ssl.endpoint.identification.algorithm=https  # the default; empty or none: no host name check

Unknown keys are ignored (the same file serves real clients, which have many more).
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.security.jaas import jaas_option

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


class ClientSecurityError(Exception):
    pass


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    ssl_context: ssl.SSLContext | None = None
    check_hostname: bool = True

    @classmethod
    def from_file(cls, path: Path) -> ClientSecurity:
        from eoslog.security.properties import read_properties

        return cls.from_properties(read_properties(Path(path)))

    @classmethod
    def from_properties(cls, properties: dict[str, str]) -> ClientSecurity:
        protocol = properties.get("security.protocol", "PLAINTEXT").strip().upper()
        if protocol not in PROTOCOLS:
            raise ClientSecurityError(f"security.protocol={protocol}: expected one of {', '.join(PROTOCOLS)}")
        mechanism = username = password = None
        if protocol.startswith("SASL"):
            mechanism = (properties.get("sasl.mechanism") or properties.get("sasl.mechanisms") or "").strip().upper()
            if mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
                raise ClientSecurityError(f"sasl.mechanism={mechanism or '(unset)'}: the tools speak PLAIN, "
                                          "SCRAM-SHA-256 and SCRAM-SHA-512")
            username, password = properties.get("sasl.username"), properties.get("sasl.password")
            jaas = properties.get("sasl.jaas.config", "")
            if username is None and jaas:
                username = jaas_option(jaas, "username")
                password = jaas_option(jaas, "password")
            if not username or password is None:
                raise ClientSecurityError("SASL needs sasl.username and sasl.password (or sasl.jaas.config)")
        context = None
        check = properties.get("ssl.endpoint.identification.algorithm", "https").strip().lower() == "https"
        if protocol.endswith("SSL"):
            context = ssl.create_default_context(
                cafile=properties.get("ssl.ca.location") or properties.get("ssl.truststore.location"))
            context.check_hostname = check
            certificate = properties.get("ssl.certificate.location") or properties.get("ssl.keystore.location")
            if certificate:
                context.load_cert_chain(certificate, properties.get("ssl.key.location"),
                                        properties.get("ssl.key.password"))
        return cls(protocol, mechanism, username, password, context, check)

    def connect(self, host: str, port: int, timeout: float) -> socket.socket:
        sock = socket.create_connection((host, port), timeout=timeout)
        if self.ssl_context is None:
            return sock
        try:
            return self.ssl_context.wrap_socket(sock, server_hostname=host)
        except (ssl.SSLError, OSError):
            sock.close()
            raise

    def authenticate(self, call) -> None:
        """The SASL exchange over a fresh connection; ``call(api_key, version, request)`` sends one request
        and returns its decoded response."""
        if self.mechanism is None:
            return
        response = call(SASL_HANDSHAKE, 1, messages.SaslHandshakeRequest(mechanism=self.mechanism))
        if response.error_code:
            raise ClientSecurityError(f"SASL handshake: {ErrorCode(response.error_code).name} "
                                      f"(the listener offers {', '.join(response.mechanisms) or 'nothing'})")
        if self.mechanism == "PLAIN":
            self._round(call, b"\x00" + self.username.encode() + b"\x00" + self.password.encode())
            return
        import scramp

        client = scramp.ScramClient([self.mechanism], self.username, self.password)
        client.set_server_first(self._round(call, client.get_client_first().encode()).decode())
        client.set_server_final(self._round(call, client.get_client_final().encode()).decode())

    @staticmethod
    def _round(call, token: bytes) -> bytes:
        response = call(SASL_AUTHENTICATE, 1, messages.SaslAuthenticateRequest(auth_bytes=token))
        if response.error_code:
            raise ClientSecurityError(f"SASL authentication: {ErrorCode(response.error_code).name}: "
                                      f"{response.error_message}")
        return bytes(response.auth_bytes)
