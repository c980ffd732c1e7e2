"""The catalog of parsed schemas (pure, no broker): a start parses the stored schemas outside the store's
lock (``warm_up``), a registration keeps the parse it made (``seed``), and neither parses a schema twice."""

from __future__ import annotations

import threading

import pytest

from eoslog.schema_registry import catalog as catalog_module
from eoslog.schema_registry.catalog import Catalog
from eoslog.schema_registry.record_format import (
    Reference,
    SchemaRecord,
    decode_value,
    schema_key,
    schema_value,
)
from eoslog.schema_registry.state import RegistryState

MONEY = 'syntax = "proto3";\npackage shop;\nmessage Money { int64 units = 1; }\n'
INVOICE = 'syntax = "proto3";\npackage shop;\nimport "money.proto";\nmessage Invoice { shop.Money total = 1; }\n'


def stored(*records: SchemaRecord) -> RegistryState:
    state = RegistryState()
    for record in records:
        state.apply(schema_key(record.subject, record.version), decode_value(schema_value(record)))
    return state


@pytest.fixture
def parses(monkeypatch) -> list[str]:
    """Every parse the catalog asks for, by schema text."""
    seen: list[str] = []
    real = catalog_module.parse

    def counting(schema_type, text, dependencies=()):
        seen.append(text)
        return real(schema_type, text, dependencies)

    monkeypatch.setattr(catalog_module, "parse", counting)
    return seen


def test_warm_up_parses_each_stored_schema_once_and_the_lock_is_free_meanwhile(parses):
    state = stored(SchemaRecord("money.proto", 1, 1, MONEY, "PROTOBUF"),
                   SchemaRecord("invoices-value", 1, 2, INVOICE, "PROTOBUF", (Reference("money.proto", "money.proto", 1),)),
                   SchemaRecord("plain-value", 1, 3, '"string"'),
                   SchemaRecord("broken-value", 1, 4, "{not avro"))
    catalog = Catalog(state)
    lock = threading.RLock()
    held_while_parsing = []
    real = catalog_module.parse

    def watching(schema_type, text, dependencies=()):
        # another thread can take the lock while a schema is parsed
        free = threading.Thread(target=lambda: held_while_parsing.append(lock.acquire(timeout=5) and lock.release()))
        free.start()
        free.join()
        return real(schema_type, text, dependencies)

    catalog_module.parse = watching
    try:
        assert catalog.warm_up(lock, threading.Event()) == 3  # the broken one is left for a request to report
    finally:
        catalog_module.parse = real
    assert held_while_parsing and all(result is None for result in held_while_parsing)
    del parses[:]
    for record in state.contents.values():
        if record.id != 4:
            catalog.parsed(record)
    assert parses == []  # all from the warm-up


def test_a_registration_seeds_its_parse(parses):
    state = stored(SchemaRecord("a-value", 1, 1, MONEY, "PROTOBUF"))
    catalog = Catalog(state)
    candidate = catalog.candidate("PROTOBUF", MONEY, ())
    catalog.seed(1, candidate)
    assert catalog.parsed(state.contents[1]) is candidate
    assert parses == [MONEY]  # the candidate's parse only
    catalog.seed(9, candidate)  # an id the state does not hold (deleted meanwhile) is not kept
    assert 9 not in catalog._parsed


def test_warm_up_stops_when_asked(parses):
    state = stored(*(SchemaRecord(f"s{i}-value", 1, i, f'{{"type": "enum", "name": "E", "symbols": ["S{i}"]}}')
                     for i in range(1, 6)))
    stopping = threading.Event()
    stopping.set()
    assert Catalog(state).warm_up(threading.RLock(), stopping) == 0
    assert parses == []


def test_a_candidate_parsed_outside_the_lock_is_used_under_it(parses):
    state = stored(SchemaRecord("money.proto", 1, 1, MONEY, "PROTOBUF"))
    catalog = Catalog(state)
    references = (Reference("money.proto", "money.proto", 1),)
    parsed = catalog_module.parse("PROTOBUF", INVOICE, catalog.dependencies(references))
    del parses[:]
    catalog.remember(catalog.candidate_key("PROTOBUF", INVOICE, references), parsed)
    assert catalog.candidate("PROTOBUF", INVOICE, references) is parsed
    assert parses == []
    # the reference now names another schema (its version hard-deleted and registered again): parsed anew
    state.apply(schema_key("money.proto", 1), decode_value(schema_value(
        SchemaRecord("money.proto", 1, 7, MONEY.replace("units", "cents"), "PROTOBUF"))))
    assert catalog.candidate("PROTOBUF", INVOICE.replace("total", "sum"), references) is not parsed
    assert catalog.candidate("PROTOBUF", INVOICE, references) is not parsed
