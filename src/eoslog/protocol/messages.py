"""Generated classes for every message in Kafka's specs: ``messages.ProduceRequest``, ``messages.FetchResponse``, ...

Naming (one rule, applied everywhere):

- a message class is named after its spec (``ProduceRequest``); its attributes are the spec's field
  names in snake_case (``TopicData`` -> ``topic_data``, ``ProducerId`` -> ``producer_id``);
- every nested struct class, at any depth, is an attribute of its message class under its spec name:
  ``messages.FetchResponse.PartitionData``, ``messages.ProduceRequest.TopicProduceData``. A struct class is
  also an attribute of the struct that contains it (``FetchResponse.FetchableTopicResponse.PartitionData``
  is the same class). Struct names are unique within a message (Kafka's generator requires it), but not
  across messages: ``FetchResponse.PartitionData`` and ``DescribeQuorumResponse.PartitionData`` differ.

One class serves every version: it holds the union of all versions' fields. Constructors take keyword
arguments only; omitted fields get the spec's default (0, "", False, None for nullable-by-default
fields, a fresh empty list for arrays, a fresh default instance for struct fields). Classes use
``__slots__``, compare by value and have a readable repr. Classes are built on first access, from
Python source compiled with ``exec``.
"""

from __future__ import annotations

import functools
import threading

from eoslog.protocol import schema
from eoslog.protocol.schema import FieldSpec, MessageSpec


class FRESH:
    """Marker default: 'build a new empty list / default struct for this field'."""


class Struct:
    """Base of every generated class; value equality over the slots, and a repr."""

    __slots__ = ()
    FIELDS: tuple[str, ...] = ()

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self.FIELDS)

    __hash__ = None  # mutable

    def __repr__(self) -> str:
        def show(value: object) -> str:
            if isinstance(value, memoryview):
                return f"<memoryview {value.nbytes} bytes>"
            return repr(value)

        inner = ", ".join(f"{name}={show(getattr(self, name))}" for name in self.FIELDS)
        return f"{type(self).__qualname__}({inner})"

    def to_dict(self) -> dict:
        """Plain values (nested structs as dicts) for logs and tests."""
        def plain(value: object) -> object:
            if isinstance(value, Struct):
                return value.to_dict()
            if isinstance(value, list):
                return [plain(v) for v in value]
            return value

        return {name: plain(getattr(self, name)) for name in self.FIELDS}


def _class_source(name: str, fields: tuple[FieldSpec, ...], defaults: dict[str, object]) -> str:
    """Python source for one class. Defaults that are not literals live in ``defaults`` by name."""
    attrs = [f.attr for f in fields]
    lines = [f"class {name}(Struct):"]
    lines.append(f"    __slots__ = {tuple(attrs)!r}")
    lines.append("    FIELDS = __slots__")
    if not fields:
        return "\n".join(lines) + "\n"
    params = []
    body = []
    for f in fields:
        if f.default == () and not f.is_array and f.is_struct:
            params.append(f"{f.attr}=FRESH")
            body.append(f"        self.{f.attr} = S_{f.struct_name}() if {f.attr} is FRESH else {f.attr}")
        elif f.default == ():
            params.append(f"{f.attr}=FRESH")
            body.append(f"        self.{f.attr} = [] if {f.attr} is FRESH else {f.attr}")
        else:
            key = f"D_{len(defaults)}"
            defaults[key] = f.default
            params.append(f"{f.attr}={key}")
            body.append(f"        self.{f.attr} = {f.attr}")
    lines.append(f"    def __init__(self, *, {', '.join(params)}):")
    lines.extend(body)
    return "\n".join(lines) + "\n"


def _struct_order(spec: MessageSpec) -> list[tuple[str, tuple[FieldSpec, ...]]]:
    """Nested structs, innermost first, so each class exists before a class that defaults to it."""
    order: list[tuple[str, tuple[FieldSpec, ...]]] = []
    seen: set[str] = set()

    def visit(fields: tuple[FieldSpec, ...]) -> None:
        for f in fields:
            if f.is_struct and f.struct_name not in seen:
                visit(f.fields)
                seen.add(f.struct_name)
                order.append((f.struct_name, f.fields))

    visit(spec.fields)
    return order


# functools.cache may run its function twice when two threads miss at once, and each caller keeps the class
# it built: a request built from one copy is then refused by the codec, which holds the other ("needs a
# FindCoordinatorRequest, not FindCoordinatorRequest"; seen with eoslog.client.checkback's poll thread). One lock
# makes every spec's class exactly one object.
_build_lock = threading.Lock()


def message_class(spec_name: str) -> type[Struct]:
    """The generated class for spec ``spec_name``; KeyError if there is no such spec."""
    with _build_lock:
        return _message_class(spec_name)


@functools.cache
def _message_class(spec_name: str) -> type[Struct]:
    spec = schema.load_spec(spec_name)
    namespace: dict[str, object] = {"Struct": Struct, "FRESH": FRESH}
    defaults: dict[str, object] = {}
    sources = []
    for struct_name, fields in _struct_order(spec):
        sources.append(_class_source(f"S_{struct_name}", fields, defaults))
    sources.append(_class_source(f"M_{spec.name}", spec.fields, defaults))
    namespace.update(defaults)
    code = compile("\n".join(sources), f"<eoslog.protocol.messages {spec.name}>", "exec")
    exec(code, namespace)  # noqa: S102 - our own generated source, built from the specs

    structs = {name: namespace[f"S_{name}"] for name, _ in _struct_order(spec)}
    cls = namespace[f"M_{spec.name}"]
    cls.__name__ = cls.__qualname__ = spec.name
    cls.__module__ = __name__
    for name, struct_cls in structs.items():
        struct_cls.__name__ = name
        struct_cls.__qualname__ = f"{spec.name}.{name}"
        struct_cls.__module__ = __name__
        setattr(cls, name, struct_cls)
    for name, fields in [(None, spec.fields), *_struct_order(spec)]:
        owner = cls if name is None else structs[name]
        for f in fields:
            if f.is_struct:
                setattr(owner, f.struct_name, structs[f.struct_name])
    cls.SPEC = spec
    cls.API_KEY = spec.api_key
    cls.KIND = spec.kind
    cls.VALID_VERSIONS = spec.valid_versions
    cls.FLEXIBLE_VERSIONS = spec.flexible_versions
    cls.STRUCTS = structs
    return cls


def __getattr__(name: str) -> type[Struct]:
    try:
        return message_class(name)
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(schema.spec_names()))
