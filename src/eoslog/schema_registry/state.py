"""The registry's state as the ``_schemas`` records make it: pure, no I/O.

Contract: :class:`RegistryState` changes only through :meth:`RegistryState.apply`, one record at a time,
in the topic's order; every instance that applied the same records holds the same state. Queries never
change it. The store's reader thread applies and the request threads query under the store's lock, so
nothing here is locked.

What is always true after any sequence of records:
- ``versions[subject][version]`` is the latest SCHEMA record for that key (soft-deleted or not); a
  tombstone removes it, and a subject with no version left is gone (its config and mode stay, as
  Confluent's do until they are deleted);
- ``contents[id]`` is the schema an id names, for as long as one version uses it; ids are never assigned
  twice, because ``max_id`` is the highest id any record carried, deleted or not;
- ``live_ids[subject]`` is the frozenset of ids its live (not soft-deleted) versions carry, absent when none.
  It is replaced, never changed in place, so the broker's schema id validation reads it from the event
  loop without the store's lock (a dict lookup is atomic in CPython): schema_registry/validation.py.
"""

from __future__ import annotations

from eoslog.schema_registry.record_format import Key, KeyType, RecordError, SchemaRecord, schema_record

COMPATIBILITY_LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
                        "FULL_TRANSITIVE")
DEFAULT_COMPATIBILITY = "BACKWARD"
# READONLY_OVERRIDE is Confluent's read-only that not even a subject-level setting lifts.
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
DEFAULT_MODE = "READWRITE"


class RegistryState:
    def __init__(self, default_compatibility: str = DEFAULT_COMPATIBILITY) -> None:
        self.default_compatibility = default_compatibility
        self.versions: dict[str, dict[int, SchemaRecord]] = {}
        self.contents: dict[int, SchemaRecord] = {}  # id -> a record carrying it (its schema and references)
        self._uses: dict[int, set[tuple[str, int]]] = {}
        self.live_ids: dict[str, frozenset[int]] = {}
        self.max_id = 0
        self.global_compatibility: str | None = None
        self.subject_compatibility: dict[str, str] = {}
        self.global_mode: str | None = None
        self.subject_modes: dict[str, str] = {}
        self.records_applied = 0
        self.records_skipped = 0

    # ---- applying records -----------------------------------------------------------------------------

    def apply(self, key: Key, value: dict | None) -> None:
        """One record, in topic order. RecordError for a record whose value this registry cannot use (the
        caller counts and skips it; the state is unchanged)."""
        if key.keytype is KeyType.SCHEMA:
            self._apply_schema(key, value)
        elif key.keytype is KeyType.CONFIG:
            level = None if value is None else value.get("compatibilityLevel")
            if level is not None and level not in COMPATIBILITY_LEVELS:
                raise RecordError(f"CONFIG with an unknown compatibilityLevel {level!r}")
            self._set(self.subject_compatibility, key.subject, level, "global_compatibility")
        elif key.keytype is KeyType.MODE:
            mode = None if value is None else value.get("mode")
            if mode is not None and mode not in MODES:
                raise RecordError(f"MODE with an unknown mode {mode!r}")
            self._set(self.subject_modes, key.subject, mode, "global_mode")
        elif key.keytype is KeyType.DELETE_SUBJECT:
            if value is None:
                return  # a compacted-away DELETE_SUBJECT: its SCHEMA records carry deleted=true themselves
            subject, upto = value.get("subject"), value.get("version")
            if not isinstance(subject, str) or not isinstance(upto, int):
                raise RecordError(f"DELETE_SUBJECT value without a subject and a version: {value}")
            for version, record in list(self.versions.get(subject, {}).items()):
                if version <= upto and not record.deleted:
                    self.versions[subject][version] = _deleted(record)
            self._publish_live_ids(subject)
        self.records_applied += 1

    def _set(self, per_subject: dict[str, str], subject: str | None, setting: str | None, global_name: str) -> None:
        if subject is None:
            setattr(self, global_name, setting)
        elif setting is None:
            per_subject.pop(subject, None)
        else:
            per_subject[subject] = setting

    def _apply_schema(self, key: Key, value: dict | None) -> None:
        subject, version = key.subject, key.version
        assert subject is not None and version is not None
        if value is None:
            old = self.versions.get(subject, {}).pop(version, None)
            if old is not None:
                self._release(old.id, subject, version)
            if subject in self.versions and not self.versions[subject]:
                del self.versions[subject]
            self._publish_live_ids(subject)
            return
        record = schema_record(value)
        if (record.subject, record.version) != (subject, version):
            raise RecordError(f"SCHEMA value for {record.subject}/{record.version} under key {subject}/{version}")
        old = self.versions.setdefault(subject, {}).get(version)
        if old is not None and old.id != record.id:
            self._release(old.id, subject, version)
        self.versions[subject][version] = record
        self.contents.setdefault(record.id, record)
        self._uses.setdefault(record.id, set()).add((subject, version))
        self.max_id = max(self.max_id, record.id)
        self._publish_live_ids(subject)

    def _publish_live_ids(self, subject: str) -> None:
        ids = frozenset(r.id for r in self.versions.get(subject, {}).values() if not r.deleted)
        if ids:
            self.live_ids[subject] = ids
        else:
            self.live_ids.pop(subject, None)

    def _release(self, schema_id: int, subject: str, version: int) -> None:
        uses = self._uses.get(schema_id, set())
        uses.discard((subject, version))
        if not uses:
            self._uses.pop(schema_id, None)
            self.contents.pop(schema_id, None)
        elif self.contents[schema_id].subject == subject and self.contents[schema_id].version == version:
            other_subject, other_version = min(uses)
            self.contents[schema_id] = self.versions[other_subject][other_version]

    # ---- queries ---------------------------------------------------------------------------------------

    def subjects(self, deleted: bool = False) -> list[str]:
        return sorted(s for s, versions in self.versions.items()
                      if deleted or any(not r.deleted for r in versions.values()))

    def records(self, subject: str, deleted: bool = False) -> list[SchemaRecord]:
        """The subject's versions, oldest first; soft-deleted ones only when ``deleted``."""
        versions = self.versions.get(subject, {})
        return [versions[v] for v in sorted(versions) if deleted or not versions[v].deleted]

    def record(self, subject: str, version: int) -> SchemaRecord | None:
        return self.versions.get(subject, {}).get(version)

    def latest(self, subject: str, deleted: bool = False) -> SchemaRecord | None:
        records = self.records(subject, deleted)
        return records[-1] if records else None

    def next_version(self, subject: str) -> int:
        """Versions are never reused while a record of the subject is kept, soft-deleted ones included."""
        return max(self.versions.get(subject, {}), default=0) + 1

    def uses_of(self, schema_id: int, deleted: bool = False) -> list[SchemaRecord]:
        """Every (subject, version) registered with this id, in subject and version order."""
        found = [self.versions[s][v] for s, v in sorted(self._uses.get(schema_id, ()))]
        return [r for r in found if deleted or not r.deleted]

    def compatibility(self, subject: str | None) -> str:
        if subject is not None and subject in self.subject_compatibility:
            return self.subject_compatibility[subject]
        return self.global_compatibility or self.default_compatibility

    def mode(self, subject: str | None) -> str:
        if self.global_mode == "READONLY_OVERRIDE":
            return "READONLY_OVERRIDE"
        if subject is not None and subject in self.subject_modes:
            return self.subject_modes[subject]
        return self.global_mode or DEFAULT_MODE

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of live schemas whose references name this subject and version."""
        ids = {r.id for versions in self.versions.values() for r in versions.values()
               if not r.deleted and any(ref.subject == subject and ref.version == version for ref in r.references)}
        return sorted(ids)


def _deleted(record: SchemaRecord) -> SchemaRecord:
    return SchemaRecord(record.subject, record.version, record.id, record.schema, record.schema_type,
                        record.references, True)
