"""The read requests, answered from the state as JSON the way Confluent's registry answers them. No I/O;
called under the store's lock."""

from __future__ import annotations

from eoslog.schema_registry import compatibility, errors
from eoslog.schema_registry.catalog import Catalog
from eoslog.schema_registry.decisions import SchemaRequest, find_in_subject, parse_version
from eoslog.schema_registry.errors import RegistryError
from eoslog.schema_registry.formats import SCHEMA_TYPES
from eoslog.schema_registry.record_format import DEFAULT_SCHEMA_TYPE, SchemaRecord
from eoslog.schema_registry.state import RegistryState


def schema_json(record: SchemaRecord, catalog: Catalog, fmt: str | None = None, *, with_subject: bool = True) -> dict:
    body: dict = {"subject": record.subject, "version": record.version, "id": record.id} if with_subject else {}
    if record.schema_type != DEFAULT_SCHEMA_TYPE:
        body["schemaType"] = record.schema_type
    if record.references:
        body["references"] = [r.to_json() for r in record.references]
    body["schema"] = formatted(record, catalog, fmt)
    return body


def formatted(record: SchemaRecord, catalog: Catalog, fmt: str | None) -> str:
    """``format=serialized`` gives a Protobuf schema as base64 FileDescriptorProto (what confluent-kafka's
    Protobuf deserializer asks for); any other format, the schema as registered."""
    if fmt == "serialized" and record.schema_type == "PROTOBUF":
        return catalog.parsed(record).serialized()
    return record.schema


def schema_types() -> list[str]:
    return sorted(SCHEMA_TYPES, key=lambda t: ("JSON", "PROTOBUF", "AVRO").index(t))


def schema_by_id(state: RegistryState, catalog: Catalog, schema_id: int, fmt: str | None = None) -> dict:
    record = state.contents.get(schema_id)
    if record is None:
        raise errors.schema_not_found()
    return schema_json(record, catalog, fmt, with_subject=False)


def subjects_of_id(state: RegistryState, schema_id: int, deleted: bool) -> list[str]:
    if schema_id not in state.contents:
        raise errors.schema_not_found()
    return sorted({r.subject for r in state.uses_of(schema_id, deleted)})


def versions_of_id(state: RegistryState, schema_id: int, deleted: bool) -> list[dict]:
    if schema_id not in state.contents:
        raise errors.schema_not_found()
    return [{"subject": r.subject, "version": r.version} for r in state.uses_of(schema_id, deleted)]


def subjects(state: RegistryState, prefix: str, deleted: bool) -> list[str]:
    return [s for s in state.subjects(deleted) if s.startswith(prefix)]


def versions(state: RegistryState, subject: str, deleted: bool) -> list[int]:
    found = state.records(subject, deleted)
    if not found:
        raise errors.subject_not_found(subject)
    return [r.version for r in found]


def version(state: RegistryState, subject: str, version_text: str, deleted: bool) -> SchemaRecord:
    wanted = parse_version(subject, version_text)
    if not state.records(subject, deleted=True) or not (deleted or state.records(subject)):
        raise errors.subject_not_found(subject)
    record = state.latest(subject, deleted) if wanted == "latest" else state.record(subject, wanted)
    if record is None or (record.deleted and not deleted):
        raise errors.version_not_found(subject, version_text)
    return record


def all_schemas(state: RegistryState, catalog: Catalog, prefix: str, deleted: bool, latest_only: bool) -> list[dict]:
    found = []
    for subject in subjects(state, prefix, deleted):
        records = state.records(subject, deleted)
        for record in records[-1:] if latest_only else records:
            found.append(schema_json(record, catalog))
    return found


def lookup(state: RegistryState, catalog: Catalog, subject: str, body: object, normalize: bool,
           deleted: bool) -> dict:
    request = SchemaRequest.from_json(body)
    if not state.records(subject, deleted):
        raise errors.subject_not_found(subject)
    parsed = catalog.candidate(request.schema_type, request.schema, request.references)
    record = find_in_subject(state, catalog, subject, request, parsed, normalize, deleted)
    if record is None:
        raise errors.schema_not_found("Schema not found")
    return schema_json(record, catalog)


def check_compatibility(state: RegistryState, catalog: Catalog, subject: str, version_text: str | None,
                        body: object, normalize: bool, verbose: bool) -> dict:
    """Against one version (``version_text``) in the subject's level's direction, or with None against the
    versions the level names, as a registration would be checked."""
    request = SchemaRequest.from_json(body)
    parsed = catalog.candidate(request.schema_type, request.schema, request.references)
    level = state.compatibility(subject)
    if version_text is None:
        earlier = [compatibility.Earlier(r.version, catalog.parsed(r)) for r in state.records(subject)]
    else:
        try:
            record = version(state, subject, version_text, deleted=False)
        except RegistryError as exc:
            if exc.error_code == errors.SUBJECT_NOT_FOUND and parse_version(subject, version_text) == "latest":
                return {"is_compatible": True} | ({"messages": []} if verbose else {})
            raise
        earlier = [compatibility.Earlier(record.version, catalog.parsed(record))]
        level = level.removesuffix("_TRANSITIVE")
    messages = compatibility.check(level, parsed, earlier)
    answer: dict = {"is_compatible": not messages}
    if verbose:
        answer["messages"] = messages
    return answer


def config(state: RegistryState, subject: str | None, default_to_global: bool) -> dict:
    if subject is not None and subject not in state.subject_compatibility and not default_to_global:
        raise RegistryError(errors.SUBJECT_COMPATIBILITY_NOT_CONFIGURED, f"Subject '{subject}' does not have "
                            "subject-level compatibility configured")
    return {"compatibilityLevel": state.compatibility(subject)}


def mode(state: RegistryState, subject: str | None, default_to_global: bool) -> dict:
    if subject is not None and subject not in state.subject_modes and not default_to_global:
        raise RegistryError(errors.SUBJECT_MODE_NOT_CONFIGURED, f"Subject '{subject}' does not have "
                            "subject-level mode configured")
    return {"mode": state.mode(subject)}
