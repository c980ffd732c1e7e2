"""A test certificate authority and PEM files for TLS listeners and clients, with ``cryptography``.

    python -m eoslog.testing.certs DIR [--client alice --client bob]

writes into DIR:
- ``ca.pem``: the CA certificate (the broker's ``ssl.truststore.location``, the clients' CA location);
- ``broker.pem``: the broker's key and certificate, valid for localhost and 127.0.0.1 (its
  ``ssl.keystore.location``), for serving and, between cluster members, as a client certificate;
- ``<client>.key`` and ``<client>.pem``: each client's key and certificate, with subject
  ``CN=<client>,OU=clients,O=eoslog-test``.

For tests and trying TLS out only: the keys are unencrypted and the CA signs whatever it is asked.
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 30


@dataclass(frozen=True)
class TestCerts:
    directory: Path

    @property
    def ca(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def broker(self) -> Path:
        return self.directory / "broker.pem"

    def client_cert(self, name: str) -> Path:
        return self.directory / f"{name}.pem"

    def client_key(self, name: str) -> Path:
        return self.directory / f"{name}.key"


def _name(common: str, unit: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "eoslog-test"),
                      x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, unit),
                      x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _pem_key(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _sign(subject: x509.Name, key, issuer: x509.Name, issuer_key, *, ca: bool, usages=(), names=()):
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if usages:
        builder = builder.add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(names)), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def make_certs(directory: Path, clients: tuple[str, ...] = ("alice",)) -> TestCerts:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("eoslog test CA", "ca")
    ca_cert = _sign(ca_name, ca_key, ca_name, ca_key, ca=True)
    (directory / "ca.pem").write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    broker_key = ec.generate_private_key(ec.SECP256R1())
    broker_cert = _sign(_name("localhost", "brokers"), broker_key, ca_name, ca_key, ca=False,
                        usages=(ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH),
                        names=(x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))))
    (directory / "broker.pem").write_bytes(_pem_key(broker_key) + broker_cert.public_bytes(serialization.Encoding.PEM))
    for client in clients:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _sign(_name(client, "clients"), key, ca_name, ca_key, ca=False,
                     usages=(ExtendedKeyUsageOID.CLIENT_AUTH,))
        (directory / f"{client}.key").write_bytes(_pem_key(key))
        (directory / f"{client}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return TestCerts(directory)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--client", action="append", default=None, help="a client certificate (repeatable)")
    args = parser.parse_args()
    certs = make_certs(args.directory, tuple(args.client or ["alice"]))
    print(f"CA {certs.ca}\nbroker key and certificate {certs.broker}")
    for client in args.client or ["alice"]:
        print(f"client {client}: {certs.client_cert(client)} {certs.client_key(client)}")


if __name__ == "__main__":
    main()
