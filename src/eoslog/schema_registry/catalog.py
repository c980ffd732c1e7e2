"""Parsed schemas, kept per id: a schema's text never changes under its id, so it is parsed once (the
first registration, lookup or compatibility check that needs it), not on every request or at load.

Contract: used under the store's lock, like the state it reads; ``parsed`` raises ``RegistryError`` when
a stored schema (written by another registry, say) does not parse or its references are gone.
"""

from __future__ import annotations

from collections import OrderedDict

from eoslog.schema_registry import errors
from eoslog.schema_registry.formats import Dependency, ParsedSchema, SchemaInvalid, parse
from eoslog.schema_registry.record_format import Reference, SchemaRecord
from eoslog.schema_registry.state import RegistryState

MAX_REFERENCE_DEPTH = 32
MAX_CANDIDATES = 256


class Catalog:
    def __init__(self, state: RegistryState) -> None:
        self.state = state
        self._parsed: dict[int, ParsedSchema] = {}
        self._candidates: OrderedDict[tuple, ParsedSchema] = OrderedDict()  # recent requests' schemas, parsed

    def parsed(self, record: SchemaRecord, depth: int = 0) -> ParsedSchema:
        cached = self._parsed.get(record.id)
        if cached is not None:
            return cached
        try:
            parsed = parse(record.schema_type, record.schema, self.dependencies(record.references, depth + 1))
        except SchemaInvalid as exc:
            raise errors.RegistryError(errors.INVALID_SCHEMA, f"Stored schema {record.id} ({record.subject} "
                                       f"version {record.version}) does not parse: {exc}") from None
        self._parsed[record.id] = parsed
        return parsed

    def dependencies(self, references: tuple[Reference, ...], depth: int = 0) -> tuple[Dependency, ...]:
        if depth > MAX_REFERENCE_DEPTH:
            raise errors.invalid_schema(f"references nest deeper than {MAX_REFERENCE_DEPTH}")
        found = []
        for reference in references:
            record = self.state.record(reference.subject, reference.version)
            if record is None:
                raise errors.invalid_schema(f"reference {reference.name!r}: subject '{reference.subject}' has no "
                                            f"version {reference.version}")
            found.append(Dependency(reference.name, self.parsed(record, depth)))
        return tuple(found)

    def candidate(self, schema_type: str, text: str, references: tuple[Reference, ...]) -> ParsedSchema:
        """A request's schema parsed: from the candidates ``remember`` kept (parsed outside the lock by
        ``SchemaRegistry.parse_request``), else parsed here."""
        dependencies = self.dependencies(references)
        key = self.candidate_key(schema_type, text, references)
        parsed = self._candidates.get(key)
        if parsed is not None:
            self._candidates.move_to_end(key)
            return parsed
        try:
            return parse(schema_type, text, dependencies)
        except SchemaInvalid as exc:
            raise errors.invalid_schema(str(exc)) from None

    def candidate_key(self, schema_type: str, text: str, references: tuple[Reference, ...]) -> tuple:
        """What a candidate's parse depends on: its text, and the schemas its references name now (a
        version number can name another schema after a hard delete)."""
        ids = tuple(getattr(self.state.record(r.subject, r.version), "id", None) for r in references)
        return (schema_type, text, references, ids)

    def remember(self, key: tuple, parsed: ParsedSchema) -> None:
        self._candidates[key] = parsed
        self._candidates.move_to_end(key)
        while len(self._candidates) > MAX_CANDIDATES:
            self._candidates.popitem(last=False)

    def warm_up(self, lock, stopping) -> int:
        """Parses every stored schema not parsed yet, each outside ``lock`` (the store's), so that the first
        registration after a start does not parse them all under it (a registration compares the new
        schema with every stored one; a Protobuf parse is a protoc run). The one method called without
        the lock held. Returns how many it parsed."""
        with lock:
            pending = [r for i, r in sorted(self.state.contents.items()) if i not in self._parsed]
        done = 0
        for record in pending:
            if stopping.is_set():
                break
            with lock:
                if record.id in self._parsed or self.state.contents.get(record.id) is not record:
                    continue
                try:
                    dependencies = self.dependencies(record.references, 1)
                except errors.RegistryError:
                    continue  # reported when a request needs it
            try:
                parsed = parse(record.schema_type, record.schema, dependencies)
            except SchemaInvalid:
                continue
            with lock:
                self.seed(record.id, parsed)
            done += 1
        return done

    def seed(self, schema_id: int, parsed: ParsedSchema) -> None:
        """The parse of a schema this instance just registered under ``schema_id`` (its exact text), kept
        unless the id is unknown (deleted meanwhile) or already parsed."""
        if schema_id in self.state.contents:
            self._parsed.setdefault(schema_id, parsed)

    def forget(self, schema_id: int) -> None:
        self._parsed.pop(schema_id, None)
