"""Kafka's JSON message specs, parsed into plain values.

The specs (``ProduceRequest.json`` ...) are Kafka's source of truth for the wire format: api key, valid
and flexible versions, and per field its type and the versions it exists / is nullable / is tagged in.
They ship inside the installed ``kafka`` package (kafka-python 3.0.x, Apache-2.0) under
``kafka/protocol/schemas/resources``; we read them from there and use none of kafka-python's code -- not
even its package ``__init__``, which imports kafka-python's whole client (admin, consumer, producer: about
a fifth of ``eoslog serve``'s start-up), so the directory is found with ``find_spec("kafka")``, which locates
a top-level package without running it. Comment lines (``//``) are stripped before ``json.loads``.

Kafka APIs newer than kafka-python's copy (ConsumerGroupHeartbeat, ...) are specs we wrote in the same format in
``eoslog.protocol.kafka_specs`` (``added_spec_names()``); a name kafka-python ships always wins.
eoslog's private APIs (api keys from 0x7E00) are specs in the same format in our own package
``eoslog.protocol.extensions``; they load beside Kafka's, so the codec and ``messages`` serve them too.
``spec_names()`` lists Kafka's specs only (what kafka-python can cross-check), ``extension_spec_names()``
ours, and ``load_spec`` / ``request_spec`` / ``api_keys`` see both.

Header versions (Kafka's rule, not in the specs): a request uses header v2 (v1 + tagged fields) when its
API version is flexible, else v1 (api_key, api_version, correlation_id, nullable client_id); a response
uses header v1 (v0 + tagged fields) when flexible, else v0 (correlation_id) -- except ApiVersions
responses, which always use v0 so that a client can read the reply whatever version it asked for.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import json
import pathlib
import re
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

SPEC_PACKAGE = "kafka.protocol.schemas.resources"
ADDED_PACKAGE = "eoslog.protocol.kafka_specs"
EXTENSION_PACKAGE = "eoslog.protocol.extensions"
API_VERSIONS_KEY = 18

_COMMENT_LINE = re.compile(r"(?m)^\s*//.*$")
_MAX_VERSION = 0x7FFF

PRIMITIVES = frozenset({
    "bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64",
    "string", "bytes", "records", "uuid",
})


@dataclass(frozen=True, slots=True)
class VersionRange:
    """An inclusive range of versions; ``"3+"``, ``"0-12"``, ``"5"`` or ``"none"`` in the specs."""

    low: int
    high: int

    @classmethod
    def parse(cls, text: str | None) -> VersionRange:
        if text is None or text == "none":
            return NO_VERSIONS
        text = text.strip()
        if text.endswith("+"):
            return cls(int(text[:-1]), _MAX_VERSION)
        low, sep, high = text.partition("-")
        return cls(int(low), int(high) if sep else int(low))

    def __contains__(self, version: int) -> bool:
        return self.low <= version <= self.high

    def overlaps(self, other: VersionRange) -> bool:
        return max(self.low, other.low) <= min(self.high, other.high)

    def __str__(self) -> str:
        if self.low > self.high:
            return "none"
        return f"{self.low}+" if self.high == _MAX_VERSION else f"{self.low}-{self.high}"


NO_VERSIONS = VersionRange(0, -1)


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One field of a message or struct.

    ``type`` is the spec's type string: a primitive, ``"[]int32"``, ``"[]Foo"`` or ``"Foo"``. For struct
    types ``fields`` holds the struct's fields (common structs already resolved) and ``struct_name`` its
    name. ``attr`` is the Python attribute name (snake_case of ``name``).
    """

    name: str
    attr: str
    type: str
    versions: VersionRange
    nullable_versions: VersionRange
    tagged_versions: VersionRange
    tag: int | None
    flexible_versions: VersionRange | None  # a per-field override (only the request header's ClientId)
    default: object
    ignorable: bool
    map_key: bool
    fields: tuple[FieldSpec, ...] | None
    struct_name: str | None

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        """The element type of an array, or the type itself."""
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.fields is not None

    def present_in(self, version: int) -> bool:
        return version in self.versions

    def tagged_in(self, version: int) -> bool:
        return version in self.versions and version in self.tagged_versions


@dataclass(frozen=True, slots=True)
class MessageSpec:
    """A whole spec file: a request, a response, a header or a ``data`` structure."""

    name: str
    kind: str  # "request", "response", "header" or "data"
    api_key: int | None
    valid_versions: VersionRange
    flexible_versions: VersionRange
    fields: tuple[FieldSpec, ...]
    structs: dict[str, tuple[FieldSpec, ...]] = field(default_factory=dict)  # every nested struct by name

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible_versions


def snake_case(name: str) -> str:
    """``TopicData`` -> ``topic_data``, ``ProducerId`` -> ``producer_id``, ``timeoutMs`` -> ``timeout_ms``."""
    name = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    name = re.sub(r"(?<=[A-Z])([A-Z][a-z])", r"_\1", name)
    return name.lower()


ZERO_UUID = uuid.UUID(int=0)


def _parse_default(text: object, type_: str) -> object:
    """The Python value of a field's default: Kafka's defaults are 0 / "" / false / empty unless stated.
    Specs write defaults as strings ("-1", "0x7fffffff", "null") and sometimes as bare JSON values."""
    if isinstance(text, bool):
        text = "true" if text else "false"
    elif isinstance(text, (int, float)):
        text = str(text)
    if type_.startswith("[]"):
        return None if text == "null" else ()  # () marks "a fresh empty list"
    if text == "null":
        return None
    if type_ in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        return (int(text, 16) if text.lower().startswith(("0x", "-0x")) else int(text)) if text else 0
    if type_ == "float64":
        return float(text) if text else 0.0
    if type_ == "bool":
        return text == "true"
    if type_ == "string":
        return text or ""
    if type_ == "uuid":
        return ZERO_UUID
    if type_ == "records":
        return None  # as in Kafka's generated Java: record data defaults to null
    if type_ == "bytes":
        return b""
    return ()  # a struct: a fresh default instance, marked like arrays


def _parse_fields(raw_fields: list[dict], common: dict[str, list[dict]],
                  structs: dict[str, tuple[FieldSpec, ...]], valid: VersionRange) -> tuple[FieldSpec, ...]:
    out = []
    for raw in raw_fields:
        type_ = raw["type"]
        element = type_.removeprefix("[]")
        sub_fields = None
        struct_name = None
        if element not in PRIMITIVES:
            struct_name = element
            raw_sub = raw.get("fields", common.get(element))
            if raw_sub is None:
                raise ValueError(f"struct {element} has no fields and is not a common struct")
            sub_fields = _parse_fields(raw_sub, common, structs, valid)
            previous = structs.setdefault(struct_name, sub_fields)
            if previous != sub_fields:
                raise ValueError(f"struct {struct_name} defined twice with different fields")
        nullable = VersionRange.parse(raw.get("nullableVersions"))
        default = _parse_default(raw.get("default"), type_)
        if type_ == "records" and "default" not in raw and not nullable.overlaps(valid):
            # Kafka's generated classes leave records null, which a version that forbids null cannot
            # carry (ShareFetchResponse v1+): an unset records field is an empty record set there.
            default = b""
        out.append(FieldSpec(
            name=raw["name"],
            attr=snake_case(raw["name"]),
            type=type_,
            versions=VersionRange.parse(raw.get("versions")),
            nullable_versions=nullable,
            tagged_versions=VersionRange.parse(raw.get("taggedVersions")),
            tag=raw.get("tag"),
            flexible_versions=VersionRange.parse(raw["flexibleVersions"]) if "flexibleVersions" in raw else None,
            default=default,
            ignorable=bool(raw.get("ignorable", False)),
            map_key=bool(raw.get("mapKey", False)),
            fields=sub_fields,
            struct_name=struct_name,
        ))
    return tuple(out)


def parse_spec(text: str) -> MessageSpec:
    """Parse one spec file's text."""
    data = json.loads(_COMMENT_LINE.sub("", text))
    common = {s["name"]: s["fields"] for s in data.get("commonStructs", ())}
    structs: dict[str, tuple[FieldSpec, ...]] = {}
    valid = VersionRange.parse(data["validVersions"])
    fields = _parse_fields(data["fields"], common, structs, valid)
    return MessageSpec(
        name=data["name"],
        kind=data["type"],
        api_key=data.get("apiKey"),
        valid_versions=valid,
        flexible_versions=VersionRange.parse(data.get("flexibleVersions", "none")),
        fields=fields,
        structs=structs,
    )


@functools.cache
def _resources(package: str) -> Traversable:
    """The directory of ``package``, located without executing its parents' ``__init__`` when they are
    plain directories (see the module docstring); importlib.resources otherwise (e.g. a zipped install)."""
    top, _, rest = package.partition(".")
    spec = importlib.util.find_spec(top)
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    if len(locations) == 1 and rest:
        directory = pathlib.Path(locations[0], *rest.split("."))
        if directory.is_dir():
            return directory
    from importlib import resources  # with tempfile and zipfile: only for an install that is not plain files

    return resources.files(package)


def _json_names(package: str) -> tuple[str, ...]:
    root = _resources(package)
    return tuple(sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".json")))


@functools.cache
def spec_names() -> tuple[str, ...]:
    """Every Kafka spec file's name (without ``.json``), sorted."""
    return _json_names(SPEC_PACKAGE)


@functools.cache
def added_spec_names() -> tuple[str, ...]:
    """Kafka API specs kafka-python's copy lacks, written by us (``eoslog.protocol.kafka_specs``), sorted."""
    return tuple(n for n in _json_names(ADDED_PACKAGE) if n not in spec_names())


@functools.cache
def extension_spec_names() -> tuple[str, ...]:
    """eoslog's private API specs (``CommitTransactionGroupRequest`` ...), sorted."""
    return _json_names(EXTENSION_PACKAGE)


# Versions Kafka 4.0 removed (KIP-896) that eoslog still serves as Kafka 3.9 did, for maintained tools
# that still send them (docs/clients.md lists which and why): spec name -> the lowest version. Kafka's
# 4.x spec files keep these versions' fields, so only the valid range widens.
KAFKA_39_LOWEST_VERSIONS = {"ListOffsetsRequest": 0, "ListOffsetsResponse": 0, "FetchRequest": 0, "FetchResponse": 0,
                            "ProduceRequest": 0, "ProduceResponse": 0, "OffsetCommitRequest": 1,
                            "OffsetCommitResponse": 1}


@functools.cache
def load_spec(name: str) -> MessageSpec:
    """The parsed spec ``name`` (e.g. ``"ProduceRequest"``); KeyError if there is none."""
    if name in spec_names():
        package = SPEC_PACKAGE
    elif name in added_spec_names():
        package = ADDED_PACKAGE
    elif name in extension_spec_names():
        package = EXTENSION_PACKAGE
    else:
        raise KeyError(name)
    spec = parse_spec(_spec_text(package, name))
    lowest = KAFKA_39_LOWEST_VERSIONS.get(name)
    if lowest is not None and lowest < spec.valid_versions.low:
        spec = dataclasses.replace(spec, valid_versions=VersionRange(lowest, spec.valid_versions.high))
    return spec


def _spec_text(package: str, name: str) -> str:
    return _resources(package).joinpath(name + ".json").read_text("utf-8")


_TOP_TYPE = re.compile(r'"type"\s*:\s*"(request|response)"')
_TOP_API_KEY = re.compile(r'"apiKey"\s*:\s*(\d+)')


@functools.cache
def _specs_by_key() -> dict[tuple[str, int], str]:
    """(kind, api_key) -> spec name. Reads every spec file once (about 100 small files) but parses none:
    the two top-level values are found with regular expressions, since parsing every spec here cost the
    broker's first request ~20 ms and kept ~100 unused specs in memory (tests/protocol/test_schema.py
    checks the result against a full parse)."""
    out = {}
    for package, names in (
        (SPEC_PACKAGE, spec_names()),
        (ADDED_PACKAGE, added_spec_names()),
        (EXTENSION_PACKAGE, extension_spec_names()),
    ):
        for name in names:
            text = _COMMENT_LINE.sub("", _spec_text(package, name))
            kind, api_key = _TOP_TYPE.search(text), _TOP_API_KEY.search(text)
            if kind is not None and api_key is not None:
                out[(kind.group(1), int(api_key.group(1)))] = name
    return out


def request_spec(api_key: int) -> MessageSpec | None:
    name = _specs_by_key().get(("request", api_key))
    return load_spec(name) if name else None


def response_spec(api_key: int) -> MessageSpec | None:
    name = _specs_by_key().get(("response", api_key))
    return load_spec(name) if name else None


def api_keys() -> dict[int, str]:
    """api_key -> API name without the Request suffix, e.g. ``{0: "Produce", ...}``."""
    return {key: name[: -len("Request")] for (kind, key), name in _specs_by_key().items() if kind == "request"}


def request_header_version(api_key: int, api_version: int) -> int:
    spec = request_spec(api_key)
    return 2 if spec is not None and spec.is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == API_VERSIONS_KEY:
        return 0
    spec = response_spec(api_key)
    return 1 if spec is not None and spec.is_flexible(api_version) else 0
