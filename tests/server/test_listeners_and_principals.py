"""Listener parsing and TLS principals, pure: Kafka's formats in, the right listeners and names out."""

from __future__ import annotations

import pytest

from eoslog.server.listeners import ListenerError, parse_listeners, parse_protocol_map
from eoslog.server.tls import PrincipalMapper, TlsConfigError, distinguished_name


def test_listeners_with_a_map_and_advertised_addresses():
    mapping = parse_protocol_map("PLAINTEXT:PLAINTEXT, internal:ssl ,EXTERNAL:SSL")
    listeners = parse_listeners("PLAINTEXT://127.0.0.1:9092,INTERNAL://0.0.0.0:9093,EXTERNAL://[::1]:9094",
                                "EXTERNAL://kafka.example.com:19094", mapping)
    assert [(x.name, x.host, x.port, x.protocol) for x in listeners] == [
        ("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"), ("INTERNAL", "0.0.0.0", 9093, "SSL"),
        ("EXTERNAL", "::1", 9094, "SSL")]
    assert listeners[1].advertised() == ("127.0.0.1", 9093)  # a wildcard is never advertised
    assert listeners[2].advertised() == ("kafka.example.com", 19094)
    assert parse_listeners("SSL://127.0.0.1:0")[0].advertised(bound_port=4321) == ("127.0.0.1", 4321)


@pytest.mark.parametrize("listeners, advertised, message", [
    ("127.0.0.1:9092", None, "NAME://HOST:PORT"),
    ("PLAINTEXT://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9093", None, "each name may appear once"),
    ("PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9092", None, "two listeners on one port"),
    ("CUSTOM://127.0.0.1:9092", None, "no security protocol"),
    ("PLAINTEXT://127.0.0.1:9092", "SSL://x:1", "not in listeners"),
])
def test_bad_listeners_are_refused_with_the_reason(listeners, advertised, message):
    with pytest.raises(ListenerError, match=message):
        parse_listeners(listeners, advertised)
    with pytest.raises(ListenerError):
        parse_protocol_map("X:TLS")


def test_the_subject_is_written_as_rfc_2253_most_specific_first():
    cert = {"subject": ((("countryName", "DE"),), (("organizationName", "Example, Inc."),),
                        (("organizationalUnitName", "eng"),), (("commonName", "alice"),))}
    assert distinguished_name(cert) == "CN=alice,OU=eng,O=Example\\, Inc.,C=DE"
    assert distinguished_name(None) is None and distinguished_name({}) is None


def test_principal_mapping_rules_first_match_wins_then_default():
    mapper = PrincipalMapper.parse("RULE:^CN=([^,]+),OU=admins,.*$/$1-admin/U, "
                                   "RULE:^CN=([^,]+),OU=(?:eng|ops),O=(.*)$/$1@$2/L,DEFAULT")
    assert mapper.principal("CN=bob,OU=admins,O=x") == "BOB-ADMIN"
    assert mapper.principal("CN=Alice,OU=eng,O=Example") == "alice@example"
    assert mapper.principal("CN=carol,OU=sales,O=x") == "CN=carol,OU=sales,O=x"  # DEFAULT: the whole name
    assert PrincipalMapper.parse("DEFAULT").principal("CN=x") == "CN=x"
    for bad in ("RULE:^(.*$/$1/", "RULE:missing-slashes", "SOMETHING"):
        with pytest.raises(TlsConfigError):
            PrincipalMapper.parse(bad)


def test_broker_config_gives_each_listener_its_own_advertised_address():
    from eoslog.server.config import BrokerConfig

    config = BrokerConfig()
    config.apply_properties({"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093",
                             "advertised.listeners": "SSL://ext.example.com:19093"})
    _primary, tls = config.listeners()
    assert config.advertised == ("127.0.0.1", 9092)  # the primary is not the SSL listener
    assert tls.advertised() == ("ext.example.com", 19093)
    config.apply_properties({"advertised.listeners": "PLAINTEXT://proxy:1,SSL://ext.example.com:19093"})
    assert config.advertised == ("proxy", 1)
