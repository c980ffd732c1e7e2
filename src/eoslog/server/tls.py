"""TLS for SSL listeners, with Kafka's property names, on the standard library's ``ssl``.

    ssl.keystore.type=PEM
    ssl.keystore.location=/etc/eoslog/broker.pem      # the private key and the certificate chain
    ssl.key.password=...                               # if the key is encrypted
    ssl.truststore.type=PEM
    ssl.truststore.location=/etc/eoslog/ca.pem         # who may sign client certificates
    ssl.client.auth=required                           # none (default) | requested | required
    ssl.principal.mapping.rules=RULE:^CN=([^,]+).*$/$1/L,DEFAULT

Any of them may be set for one listener as ``listener.name.<name>.ssl.*`` (the name in lower case),
which wins over the plain property. Only PEM stores: JKS and PKCS12 are Java's formats; convert them
with ``keytool``/``openssl`` (docs/security.md).

The principal of a TLS connection is ``User:`` followed by the client certificate's subject, as
RFC 2253 writes it (``CN=alice,OU=eng,O=example``, most specific first, as Java's X500Principal gives
it), after ``ssl.principal.mapping.rules``. Without a client certificate it is ``User:ANONYMOUS``.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass

from eoslog.server.listeners import Listener

ANONYMOUS = "User:ANONYMOUS"
CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
SSL_PROPERTIES = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password", "ssl.client.auth",
    "ssl.enabled.protocols", "ssl.protocol", "ssl.cipher.suites", "ssl.principal.mapping.rules",
    "ssl.endpoint.identification.algorithm",
})
# RFC 2253's short names for the attributes Python's ssl module names in full.
_SHORT_NAMES = {
    "commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU", "countryName": "C",
    "stateOrProvinceName": "ST", "localityName": "L", "streetAddress": "STREET", "domainComponent": "DC",
    "userId": "UID",
}
_TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


class TlsConfigError(ValueError):
    pass


def listener_property(properties: Mapping[str, str], listener: Listener, name: str) -> str | None:
    """``listener.name.<listener>.<name>`` if set, else ``<name>``."""
    scoped = properties.get(f"listener.name.{listener.name.lower()}.{name}")
    return scoped if scoped is not None else properties.get(name)


def server_context(properties: Mapping[str, str], listener: Listener) -> ssl.SSLContext:
    """The SSLContext of one TLS listener; a clear error for anything missing or unreadable."""
    def get(name: str) -> str | None:
        return listener_property(properties, listener, name)

    for kind in ("ssl.keystore.type", "ssl.truststore.type"):
        if (get(kind) or "PEM").upper() != "PEM":
            raise TlsConfigError(f"{kind}={get(kind)}: only PEM files are supported (convert JKS or PKCS12 "
                                 "with keytool/openssl; docs/security.md)")
    keystore = get("ssl.keystore.location")
    if not keystore:
        raise TlsConfigError(f"listener {listener.name} ({listener.protocol}) needs ssl.keystore.location: a PEM "
                             "file with the broker's private key and certificate chain")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(keystore, password=get("ssl.key.password") or get("ssl.keystore.password"))
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"ssl.keystore.location={keystore}: cannot load the key and certificate: {exc}") from exc
    auth = (get("ssl.client.auth") or "none").strip().lower()
    if auth not in CLIENT_AUTH:
        raise TlsConfigError(f"ssl.client.auth={auth}: expected none, requested or required")
    context.verify_mode = CLIENT_AUTH[auth]
    truststore = get("ssl.truststore.location")
    if truststore:
        try:
            context.load_verify_locations(cafile=truststore)
        except (OSError, ssl.SSLError) as exc:
            raise TlsConfigError(f"ssl.truststore.location={truststore}: cannot load: {exc}") from exc
    elif auth != "none":
        raise TlsConfigError(f"ssl.client.auth={auth} needs ssl.truststore.location (the CA of client certificates)")
    enabled = [v.strip() for v in (get("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3").split(",") if v.strip()]
    unknown = [v for v in enabled if v not in _TLS_VERSIONS]
    if unknown or not enabled:
        raise TlsConfigError(f"ssl.enabled.protocols: {unknown or enabled} not supported (TLSv1.2, TLSv1.3)")
    context.minimum_version = min(_TLS_VERSIONS[v] for v in enabled)
    context.maximum_version = max(_TLS_VERSIONS[v] for v in enabled)
    if get("ssl.cipher.suites"):
        try:
            context.set_ciphers(":".join(c.strip() for c in get("ssl.cipher.suites").split(",")))
        except ssl.SSLError as exc:
            raise TlsConfigError(f"ssl.cipher.suites: {exc}") from exc
    PrincipalMapper.parse(get("ssl.principal.mapping.rules") or "DEFAULT")  # refuse bad rules at start
    return context


def client_context(properties: Mapping[str, str], listener: Listener) -> ssl.SSLContext:
    """The SSLContext a broker connects to another broker's TLS listener with, from that listener's
    ``ssl.*`` properties: the truststore decides whom to trust (the system's CAs without one), the
    keystore is the client certificate (for ``ssl.client.auth=required``). The server's name is checked
    only with ``ssl.endpoint.identification.algorithm=https``; by default the chain alone is checked
    (Kafka checks the name by default; brokers registered by IP address are common in our setups)."""
    def get(name: str) -> str | None:
        return listener_property(properties, listener, name)

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    algorithm = (get("ssl.endpoint.identification.algorithm") or "").strip().lower()
    if algorithm not in ("", "https"):
        raise TlsConfigError(f"ssl.endpoint.identification.algorithm={algorithm}: expected https or empty")
    context.check_hostname = algorithm == "https"
    context.verify_mode = ssl.CERT_REQUIRED
    truststore = get("ssl.truststore.location")
    try:
        if truststore:
            context.load_verify_locations(cafile=truststore)
        else:
            context.load_default_certs()
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"ssl.truststore.location={truststore}: cannot load: {exc}") from exc
    keystore = get("ssl.keystore.location")
    if keystore:
        try:
            context.load_cert_chain(keystore, password=get("ssl.key.password") or get("ssl.keystore.password"))
        except (OSError, ssl.SSLError) as exc:
            raise TlsConfigError(f"ssl.keystore.location={keystore}: cannot load the key and certificate: "
                                 f"{exc}") from exc
    enabled = [v.strip() for v in (get("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3").split(",") if v.strip()]
    if not enabled or any(v not in _TLS_VERSIONS for v in enabled):
        raise TlsConfigError(f"ssl.enabled.protocols: {enabled} not supported (TLSv1.2, TLSv1.3)")
    context.minimum_version = min(_TLS_VERSIONS[v] for v in enabled)
    context.maximum_version = max(_TLS_VERSIONS[v] for v in enabled)
    return context


def distinguished_name(peercert: Mapping | None) -> str | None:
    """The subject of a certificate from ``SSLSocket.getpeercert()`` as RFC 2253 writes it."""
    if not peercert or "subject" not in peercert:
        return None
    parts = []
    for rdn in reversed(peercert["subject"]):
        parts.append("+".join(f"{_SHORT_NAMES.get(k, k)}={_escape(v)}" for k, v in rdn))
    return ",".join(parts)


def _escape(value: str) -> str:
    value = re.sub(r'([,+"\\<>;])', r"\\\1", value)
    if value.startswith((" ", "#")):
        value = "\\" + value
    if value.endswith(" "):
        value = value[:-1] + "\\ "
    return value


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "L", "U" or ""


class PrincipalMapper:
    """``ssl.principal.mapping.rules``: ``DEFAULT``, or ``RULE:pattern/replacement/[LU]``, the first rule
    whose pattern matches the whole name wins; with none, the name itself."""

    def __init__(self, rules: list[_Rule]) -> None:
        self.rules = rules

    @classmethod
    def parse(cls, text: str) -> PrincipalMapper:
        rules = []
        for item in _split_rules(text):
            if item == "DEFAULT":
                rules.append(_Rule(None))
                continue
            match = re.fullmatch(r"RULE:((?:\\.|[^/])*)/((?:\\.|[^/])*)/([LU]?)", item)
            if match is None:
                raise TlsConfigError(f"ssl.principal.mapping.rules: cannot read {item!r} "
                                     "(expected DEFAULT or RULE:pattern/replacement/[LU])")
            try:
                pattern = re.compile(match.group(1).replace("\\/", "/"))
            except re.error as exc:
                raise TlsConfigError(f"ssl.principal.mapping.rules: bad pattern in {item!r}: {exc}") from exc
            # Java's $1 is Python's \1.
            replacement = re.sub(r"\$(\d+)", r"\\\1", match.group(2).replace("\\/", "/"))
            rules.append(_Rule(pattern, replacement, match.group(3)))
        return cls(rules or [_Rule(None)])

    def principal(self, name: str) -> str:
        for rule in self.rules:
            if rule.pattern is None:
                return name
            if rule.pattern.fullmatch(name):
                mapped = rule.pattern.sub(rule.replacement, name, count=1)
                return mapped.lower() if rule.case == "L" else mapped.upper() if rule.case == "U" else mapped
        return name


def _split_rules(text: str) -> list[str]:
    """Rules are comma-separated, but a pattern may contain commas: split only before RULE: or DEFAULT."""
    return [part.strip() for part in re.split(r",\s*(?=RULE:|DEFAULT)", text.strip()) if part.strip()]


def principal_of(ssl_object, mapper: PrincipalMapper) -> str:
    """``User:<mapped subject>`` of the client's certificate, or ``User:ANONYMOUS``."""
    try:
        name = distinguished_name(ssl_object.getpeercert()) if ssl_object is not None else None
    except ValueError:  # the handshake is not done
        name = None
    return ANONYMOUS if name is None else f"User:{mapper.principal(name)}"
