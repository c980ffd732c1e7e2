"""What each write request changes, decided without I/O: the ``_schemas`` records to append, and the
answer to give once they are applied (prepare -> log -> apply: the state changes only when the store's
reader applies the records, on every instance alike). A refusal is a ``RegistryError``.

Called by the writer with the store's lock held and the state caught up with everything this writer
wrote, so a decision sees every earlier registration (no id or version is handed out twice).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from eoslog.schema_registry import compatibility, errors
from eoslog.schema_registry.catalog import Catalog
from eoslog.schema_registry.errors import RegistryError
from eoslog.schema_registry.formats import SCHEMA_TYPES, ParsedSchema
from eoslog.schema_registry.record_format import (
    DEFAULT_SCHEMA_TYPE,
    Key,
    KeyType,
    Reference,
    SchemaRecord,
    config_value,
    delete_subject_value,
    encode_key,
    mode_value,
    schema_key,
    schema_value,
)
from eoslog.schema_registry.state import COMPATIBILITY_LEVELS, MODES, RegistryState

MAX_VERSION = 2**31 - 1


@dataclass
class Outcome:
    """Records to append, in order (a None value is a tombstone), then the answer's JSON."""

    answer: object
    records: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    # a new schema's id and its parse, for the catalog once the record is applied: parsing again what was
    # just parsed costs a protoc run per Protobuf registration
    parsed: tuple[int, ParsedSchema] | None = None


@dataclass(frozen=True)
class SchemaRequest:
    """The body of a registration, lookup or compatibility check."""

    schema: str
    schema_type: str = DEFAULT_SCHEMA_TYPE
    references: tuple[Reference, ...] = ()
    id: int | None = None
    version: int | None = None

    @classmethod
    def from_json(cls, body: object) -> SchemaRequest:
        if not isinstance(body, dict):
            raise errors.invalid_schema("the request body is not a JSON object")
        schema = body.get("schema")
        if not isinstance(schema, str) or not schema.strip():
            raise RegistryError(errors.INVALID_SCHEMA, "Empty schema")
        schema_type = body.get("schemaType") or DEFAULT_SCHEMA_TYPE
        if schema_type not in SCHEMA_TYPES:
            raise errors.invalid_schema(f"unknown schemaType {schema_type!r}; one of {', '.join(SCHEMA_TYPES)}")
        try:
            references = tuple(Reference(str(r["name"]), str(r["subject"]), int(r["version"]))
                               for r in body.get("references") or ())
        except (KeyError, TypeError, ValueError):
            raise errors.invalid_schema("each reference needs a name, a subject and a version") from None
        ids = {}
        for name in ("id", "version"):
            value = body.get(name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise RegistryError(errors.INVALID_SCHEMA if name == "id" else errors.INVALID_VERSION,
                                    f"'{name}' must be a positive integer, got {value!r}")
            ids[name] = value if value not in (None, -1) else None
        return cls(schema, schema_type, references, ids["id"], ids["version"])


def parse_version(subject: str, text: str | int) -> int | str:
    """A version as paths give it: a positive int, or "latest" (also -1)."""
    if text in ("latest", "-1", -1):
        return "latest"
    try:
        version = int(text)
    except (TypeError, ValueError):
        version = 0
    if not 1 <= version <= MAX_VERSION:
        raise RegistryError(errors.INVALID_VERSION, f"The specified version '{text}' is not a valid version id. "
                            "Allowed values are between [1, 2^31-1] and the string \"latest\"")
    return version


def _writable(state: RegistryState, subject: str | None) -> str:
    mode = state.mode(subject)
    if mode in ("READONLY", "READONLY_OVERRIDE"):
        target = f"Subject {subject}" if subject is not None else "The registry"
        raise RegistryError(errors.OPERATION_NOT_PERMITTED, f"{target} is in read-only mode")
    return mode


def identity(parsed: ParsedSchema, record_type: str, references: tuple[Reference, ...], normalize: bool) -> tuple:
    return (record_type, parsed.normalized if normalize else parsed.canonical, references)


def find_in_subject(state: RegistryState, catalog: Catalog, subject: str, request: SchemaRequest,
                    parsed: ParsedSchema, normalize: bool, deleted: bool = False) -> SchemaRecord | None:
    wanted = identity(parsed, request.schema_type, request.references, normalize)
    for record in reversed(state.records(subject, deleted)):
        if record.schema_type == request.schema_type and record.references == request.references and \
                identity(catalog.parsed(record), record.schema_type, record.references, normalize) == wanted:
            return record
    return None


def _existing_id(state: RegistryState, catalog: Catalog, request: SchemaRequest, parsed: ParsedSchema,
                 normalize: bool) -> int | None:
    wanted = identity(parsed, request.schema_type, request.references, normalize)
    for schema_id, record in sorted(state.contents.items()):
        if record.schema_type == request.schema_type and record.references == request.references:
            try:
                same = identity(catalog.parsed(record), record.schema_type, record.references, normalize) == wanted
            except RegistryError:
                continue  # a stored schema that no longer parses names nothing new
            if same:
                return schema_id
    return None


def register(state: RegistryState, catalog: Catalog, subject: str, request: SchemaRequest,
             normalize: bool = False, parsed: ParsedSchema | None = None) -> Outcome:
    """``parsed``: the request's schema parsed already (``SchemaRegistry.parse_request``); its references
    are checked again here, under the lock."""
    if parsed is None:
        parsed = catalog.candidate(request.schema_type, request.schema, request.references)
    else:
        catalog.dependencies(request.references)
    # Confluent's order (KafkaSchemaRegistry.registerOrForward, then register): the schema is parsed
    # (INVALID_SCHEMA) and looked up first, so registering a schema the subject already has answers its id
    # even in READONLY mode, as a lookup would; only a registration that writes asks the mode.
    same = find_in_subject(state, catalog, subject, request, parsed, normalize)
    if same is not None and (request.id is None or request.id == same.id):
        return Outcome({"id": same.id})
    mode = _writable(state, subject)
    if mode == "IMPORT" and request.id is None:  # Confluent's checkRegisterMode: IMPORT takes given ids only
        raise RegistryError(errors.OPERATION_NOT_PERMITTED, f"Subject {subject} is not in read-write mode")
    if mode != "IMPORT":
        if request.id is not None:
            raise RegistryError(errors.OPERATION_NOT_PERMITTED, f"Subject {subject} is not in import mode: a "
                                "schema id can only be given in IMPORT mode")
        earlier = [compatibility.Earlier(r.version, catalog.parsed(r)) for r in state.records(subject)]
        level = state.compatibility(subject)
        messages = compatibility.check(level, parsed, earlier)
        if messages:
            raise RegistryError(errors.INCOMPATIBLE_SCHEMA, "Schema being registered is incompatible with an "
                                f"earlier schema for subject \"{subject}\", details: [{', '.join(messages)}]")
    if request.id is not None:
        holder = state.contents.get(request.id)
        if holder is not None and (holder.schema_type, holder.references) != (request.schema_type, request.references) \
                or holder is not None and identity(catalog.parsed(holder), holder.schema_type, holder.references,
                                                   normalize) != identity(parsed, request.schema_type,
                                                                          request.references, normalize):
            raise RegistryError(errors.ID_CONFLICT, f"Overwrite new schema with id {request.id} is not permitted.")
        schema_id = request.id
    else:
        schema_id = _existing_id(state, catalog, request, parsed, normalize) or state.max_id + 1
    version = request.version if request.version is not None else state.next_version(subject)
    existing = state.record(subject, version)
    if existing is not None and not existing.deleted:
        raise RegistryError(errors.OPERATION_NOT_PERMITTED, f"Subject {subject} already has a version {version}")
    text = parsed.normalized if normalize and request.schema_type != "PROTOBUF" else request.schema
    record = SchemaRecord(subject, version, schema_id, text, request.schema_type, request.references)
    return Outcome({"id": schema_id}, [(encode_key(schema_key(subject, version)), schema_value(record))],
                   (schema_id, parsed) if text == request.schema else None)


def _referenced(state: RegistryState, subject: str, version: int) -> None:
    if state.referenced_by(subject, version):
        raise RegistryError(errors.REFERENCE_EXISTS, "One or more references exist to the schema "
                            f"{{magic=1,keytype=SCHEMA,subject={subject},version={version}}}.")


def delete_subject(state: RegistryState, subject: str, permanent: bool) -> Outcome:
    _writable(state, subject)
    every = state.records(subject, deleted=True)
    if not every:
        raise errors.subject_not_found(subject)
    live = [r for r in every if not r.deleted]
    if not permanent:
        if not live:
            raise RegistryError(errors.SUBJECT_SOFT_DELETED, f"Subject '{subject}' was soft deleted. Set "
                                "permanent=true to delete permanently")
        for record in live:
            _referenced(state, subject, record.version)
        records = [(encode_key(Key(KeyType.DELETE_SUBJECT, subject)), delete_subject_value(subject,
                                                                                           live[-1].version))]
        records += [(encode_key(schema_key(subject, r.version)), schema_value(_soft_deleted(r))) for r in live]
        return Outcome([r.version for r in live], records)
    if live:
        raise RegistryError(errors.SUBJECT_NOT_SOFT_DELETED, f"Subject '{subject}' was not deleted first before "
                            "being permanently deleted")
    for record in every:
        _referenced(state, subject, record.version)
    records: list[tuple[bytes, bytes | None]] = [(encode_key(schema_key(subject, r.version)), None) for r in every]
    records.append((encode_key(Key(KeyType.DELETE_SUBJECT, subject)), None))
    if subject in state.subject_compatibility:
        records.append((encode_key(Key(KeyType.CONFIG, subject)), None))
    if subject in state.subject_modes:
        records.append((encode_key(Key(KeyType.MODE, subject)), None))
    return Outcome([r.version for r in every], records)


def delete_version(state: RegistryState, subject: str, version_text: str, permanent: bool) -> Outcome:
    _writable(state, subject)
    version = parse_version(subject, version_text)
    if not state.records(subject, deleted=True):
        raise errors.subject_not_found(subject)
    if version == "latest":
        record = state.latest(subject) or (state.latest(subject, deleted=True) if permanent else None)
    else:
        record = state.record(subject, version)
    if record is None:
        raise errors.version_not_found(subject, version_text)
    if not permanent:
        if record.deleted:
            raise RegistryError(errors.SCHEMA_VERSION_SOFT_DELETED, f"Subject '{subject}' Version "
                                f"{record.version} was soft deleted. Set permanent=true to delete permanently")
        _referenced(state, subject, record.version)
        return Outcome(record.version, [(encode_key(schema_key(subject, record.version)),
                                         schema_value(_soft_deleted(record)))])
    if not record.deleted:
        raise RegistryError(errors.SCHEMA_VERSION_NOT_SOFT_DELETED, f"Subject '{subject}' Version "
                            f"{record.version} was not deleted first before being permanently deleted")
    _referenced(state, subject, record.version)
    return Outcome(record.version, [(encode_key(schema_key(subject, record.version)), None)])


def _soft_deleted(record: SchemaRecord) -> SchemaRecord:
    return SchemaRecord(record.subject, record.version, record.id, record.schema, record.schema_type,
                        record.references, True)


def set_config(state: RegistryState, subject: str | None, body: object) -> Outcome:
    level = body.get("compatibility") or body.get("compatibilityLevel") if isinstance(body, dict) else None
    if not isinstance(level, str) or level.upper() not in COMPATIBILITY_LEVELS:
        raise RegistryError(errors.INVALID_COMPATIBILITY_LEVEL, "Invalid compatibility level. Valid values are "
                            "none, backward, forward, full, backward_transitive, forward_transitive, and "
                            "full_transitive")
    level = level.upper()
    return Outcome({"compatibility": level}, [(encode_key(Key(KeyType.CONFIG, subject)), config_value(level))])


def delete_config(state: RegistryState, subject: str | None) -> Outcome:
    if subject is None:
        previous = state.compatibility(None)
    elif subject in state.subject_compatibility:
        previous = state.subject_compatibility[subject]
    else:
        raise RegistryError(errors.SUBJECT_COMPATIBILITY_NOT_CONFIGURED, f"Subject '{subject}' does not have "
                            "subject-level compatibility configured")
    return Outcome({"compatibilityLevel": previous}, [(encode_key(Key(KeyType.CONFIG, subject)), None)])


def set_mode(state: RegistryState, subject: str | None, body: object, force: bool) -> Outcome:
    mode = body.get("mode") if isinstance(body, dict) else None
    if not isinstance(mode, str) or mode.upper() not in MODES:
        raise RegistryError(errors.INVALID_MODE, "Invalid mode. Valid values are READWRITE, READONLY, "
                            "READONLY_OVERRIDE and IMPORT.")
    mode = mode.upper()
    if mode == "IMPORT" and not force:
        holding = state.records(subject, deleted=True) if subject is not None else state.subjects(deleted=True)
        if holding:
            raise RegistryError(errors.OPERATION_NOT_PERMITTED, "Cannot import since found existing subjects")
    return Outcome({"mode": mode}, [(encode_key(Key(KeyType.MODE, subject)), mode_value(mode))])


def delete_mode(state: RegistryState, subject: str | None) -> Outcome:
    if subject is None:
        previous = state.mode(None)
    elif subject in state.subject_modes:
        previous = state.subject_modes[subject]
    else:
        raise RegistryError(errors.SUBJECT_MODE_NOT_CONFIGURED, f"Subject '{subject}' does not have "
                            "subject-level mode configured")
    return Outcome({"mode": previous}, [(encode_key(Key(KeyType.MODE, subject)), None)])
