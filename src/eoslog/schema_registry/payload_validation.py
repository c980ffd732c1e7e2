"""Payload validation on the broker (``eoslog.value.schema.validation.level=payload``): the bytes after a
record's 5-byte prefix decoded with the schema its id names. Pure: a registry state and bytes in, a reason
out; the state is read, never changed.

- **Avro**: fastavro's schemaless reader, with the schema (and the named types of its references) parsed
  once per id. A payload that does not decode, or leaves bytes after the record, is refused.
- **JSON Schema**: the payload must be UTF-8 JSON that the ``jsonschema`` validator of the schema's draft
  (draft-07 when ``$schema`` names none, as the registry parses it) accepts; one validator per id, its
  references resolved through the registry's versions they name.
- **Protobuf**: not decoded (the id check alone), as docs/schema-registry.md says.

Two schema shapes would let a few hostile bytes hurt the broker, so they are read differently: a
*recursive* Avro schema (a record that contains itself through a union or array) is decoded by fastavro's
pure-Python reader, which Python's recursion limit stops (its compiled reader recurses in C, and a
payload thousands of levels deep overflows the thread's stack); an array whose items take no bytes (of
``null``, of empty records) is checked by id alone, since a count of such items costs nothing to send and
unbounded time to read.

Called on the broker's event loop for each record of a topic with payload validation on; decoders are
kept per id, since an id's schema never changes.
"""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Callable

from eoslog.schema_registry.state import RegistryState

log = logging.getLogger(__name__)

MAX_REFERENCE_DEPTH = 32
# A decoder: the payload (after the 5-byte prefix) -> why it is refused, or None.
Decoder = Callable[[memoryview], "str | None"]


class SchemaUnusable(Exception):
    """The schema an id names cannot be compiled for payload validation (its references are gone, or the
    library refuses what the registry accepted)."""


def _accept(_payload) -> None:
    return None


class PayloadDecoders:
    """One decoder per schema id, made on first use from the registry's state."""

    def __init__(self, state: RegistryState) -> None:
        self.state = state
        self._decoders: dict[int, Decoder] = {}

    def check(self, schema_id: int, payload: memoryview) -> str | None:
        return self.decoder(schema_id)(payload)

    def decoder(self, schema_id: int) -> Decoder:
        decoder = self._decoders.get(schema_id)
        if decoder is None:
            record = self.state.contents.get(schema_id)
            if record is None:  # the id check passed, so a hard delete since: the id check's next batch says so
                return _refuse(f"schema {schema_id} is no longer registered")
            try:
                decoder = _compile(self.state, record)
            except SchemaUnusable as exc:
                reason = f"schema {schema_id} ({record.schema_type}) cannot be used to validate payloads: {exc}"
                log.error("payload validation: %s", reason)
                decoder = _refuse(reason)
            self._decoders[schema_id] = decoder
        return decoder


def _refuse(reason: str) -> Decoder:
    return lambda _payload: reason


def _compile(state: RegistryState, record) -> Decoder:
    if record.schema_type == "AVRO":
        return _avro_decoder(state, record)
    if record.schema_type == "JSON":
        return _json_decoder(state, record)
    return _accept  # Protobuf: the id check alone


def _referenced(state: RegistryState, record, depth: int = 0):
    """The records a schema's references name, depth first (a reference's own references before it)."""
    if depth > MAX_REFERENCE_DEPTH:
        raise SchemaUnusable(f"references nest deeper than {MAX_REFERENCE_DEPTH}")
    for reference in record.references:
        target = state.record(reference.subject, reference.version)
        if target is None:
            raise SchemaUnusable(f"reference {reference.name!r}: subject {reference.subject} has no version "
                                 f"{reference.version}")
        yield from _referenced(state, target, depth + 1)
        yield reference.name, target


# ---- Avro ------------------------------------------------------------------------------------------------

def _avro_decoder(state: RegistryState, record) -> Decoder:
    from fastavro import parse_schema

    named: dict = {}
    try:
        for _name, target in _referenced(state, record):
            parse_schema(json.loads(target.schema), named_schemas=named)
        parsed = parse_schema(json.loads(record.schema), named_schemas=named)
    except SchemaUnusable:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever fastavro refuses, said once per id
        raise SchemaUnusable(f"fastavro: {type(exc).__name__}: {exc}") from None
    recursive, zero_width_array = _avro_hazards(parsed, named)
    if zero_width_array:
        log.warning("payload validation: schema %s has an array of items that take no bytes; its records are "
                    "checked by id only", record.id)
        return _accept
    if recursive:  # fastavro's pure-Python reader: bounded by Python's recursion limit, not the C stack
        try:
            from fastavro._read_py import schemaless_reader
        except ImportError:  # an internal module of fastavro's: never the compiled reader instead
            log.warning("payload validation: schema %s is recursive and this fastavro has no pure-Python "
                        "reader; its records are checked by id only", record.id)
            return _accept
    else:
        from fastavro import schemaless_reader

    def decode(payload: memoryview) -> str | None:
        stream = io.BytesIO(payload)
        try:
            schemaless_reader(stream, parsed, None)
        except EOFError as exc:
            return f"the payload ends before the record does (fastavro: EOFError{_said(exc)})"
        except RecursionError:
            return "the payload nests deeper than the broker decodes"
        except Exception as exc:  # noqa: BLE001 - hostile bytes may fail in any way the reader has
            return f"the payload does not decode (fastavro: {type(exc).__name__}{_said(exc)})"
        left = len(payload) - stream.tell()
        if left:
            return f"{left} byte(s) left after the record"
        return None

    return decode


def _said(exc: Exception) -> str:
    text = _STREAM.sub("", str(exc))  # fastavro names its stream object: an address, not news to anyone
    return f": {text}" if text else ""


_STREAM = re.compile(r" from <[^>]*>")


def _avro_hazards(schema, named: dict) -> tuple[bool, bool]:
    """(whether a named type contains itself, whether an array's items can take no bytes)."""
    recursive = False
    zero_width_array = False
    on_path: set[str] = set()
    done: set[str] = set()

    def named_type(node) -> tuple[str, dict] | None:
        if isinstance(node, str) and node in named:
            return node, named[node]
        if isinstance(node, dict) and node.get("type") in ("record", "error", "enum", "fixed"):
            return node.get("name", ""), node
        return None

    def walk(node) -> None:
        nonlocal recursive, zero_width_array
        found = named_type(node)
        if found is not None:
            name, node = found
            if name in on_path:
                recursive = True
                return
            if name in done:
                return
            on_path.add(name)
        if isinstance(node, list):
            for branch in node:
                walk(branch)
        elif isinstance(node, dict):
            kind = node.get("type")
            if kind in ("record", "error"):
                for field in node.get("fields", ()):
                    walk(field.get("type"))
            elif kind == "array":
                if _zero_width(node.get("items"), named, set()):
                    zero_width_array = True
                walk(node.get("items"))
            elif kind == "map":
                walk(node.get("values"))
            elif isinstance(kind, (dict, list)) or (isinstance(kind, str) and kind in named):
                walk(kind)
        if found is not None:
            on_path.discard(found[0])
            done.add(found[0])

    walk(schema)
    return recursive, zero_width_array


def _zero_width(node, named: dict, seen: set[str]) -> bool:
    """Whether a value of this type can be encoded in no bytes at all."""
    if isinstance(node, str):
        if node in named:
            if node in seen:
                return False
            return _zero_width(named[node], named, seen | {node})
        return node == "null"
    if isinstance(node, dict):
        kind = node.get("type")
        if kind in ("record", "error"):
            return all(_zero_width(field.get("type"), named, seen) for field in node.get("fields", ()))
        if kind == "fixed":
            return node.get("size") == 0
        if kind in ("enum", "array", "map"):
            return False  # an index or a block count: a byte at least
        return _zero_width(kind, named, seen)
    return False  # a union: its branch index is a byte at least


# ---- JSON Schema -----------------------------------------------------------------------------------------

def _json_decoder(state: RegistryState, record) -> Decoder:
    import jsonschema.validators
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT7

    try:
        document = json.loads(record.schema)
        resources = [(name, Resource.from_contents(json.loads(target.schema), default_specification=DRAFT7))
                     for name, target in _referenced(state, record)]
        registry = Registry().with_resources(resources)
        validator_class = jsonschema.validators.validator_for(document, default=jsonschema.validators.Draft7Validator)
        validator = validator_class(document, registry=registry)
    except SchemaUnusable:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever jsonschema refuses, said once per id
        raise SchemaUnusable(f"jsonschema: {type(exc).__name__}: {exc}") from None

    def decode(payload: memoryview) -> str | None:
        try:
            instance = json.loads(str(payload, "utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            return f"the payload is not UTF-8 JSON ({type(exc).__name__}: {exc})"
        try:
            error = next(validator.iter_errors(instance), None)
        except RecursionError:
            return "the payload nests deeper than the broker validates"
        except Exception as exc:  # noqa: BLE001 - e.g. a $ref the registry's versions no longer resolve
            return f"the payload could not be validated (jsonschema: {type(exc).__name__}: {exc})"
        if error is None:
            return None
        return f"{error.message} at {error.json_path} (schema path /{'/'.join(str(p) for p in error.schema_path)})"

    return decode
