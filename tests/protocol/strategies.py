"""Hypothesis strategies that build message objects valid for one (spec, version).

Fields absent from the version keep their defaults, so a decoded object compares equal to the one
encoded. Tagged fields get values too: the encoder writes those that differ from their defaults.
"""

from __future__ import annotations

from hypothesis import strategies as st

from eoslog.protocol import messages, schema
from eoslog.protocol.schema import FieldSpec

_INTS = {
    "int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1), "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1), "uint32": (0, 2**32 - 1), "int64": (-(2**63), 2**63 - 1),
}


def _primitive(type_: str) -> st.SearchStrategy:
    if type_ in _INTS:
        low, high = _INTS[type_]
        return st.integers(low, high)
    return {
        "bool": st.booleans(),
        "float64": st.floats(allow_nan=False),
        "string": st.text(max_size=12),
        "bytes": st.binary(max_size=16),
        "records": st.binary(max_size=48),
        "uuid": st.uuids(),
    }[type_]


def _value(f: FieldSpec, version: int, structs: dict[str, type]) -> st.SearchStrategy:
    if f.is_struct:
        element = struct_strategy(structs[f.struct_name], f.fields, version, structs)
    else:
        element = _primitive(f.element_type)
    value = st.lists(element, max_size=3) if f.is_array else element
    if version in f.nullable_versions:
        value = st.none() | value
    return value


def struct_strategy(cls: type, fields: tuple[FieldSpec, ...], version: int,
                    structs: dict[str, type]) -> st.SearchStrategy:
    kwargs = {f.attr: _value(f, version, structs) for f in fields if f.present_in(version)}
    return st.builds(cls, **kwargs)


def message_strategy(spec_name: str, version: int) -> st.SearchStrategy:
    cls = messages.message_class(spec_name)
    return struct_strategy(cls, schema.load_spec(spec_name).fields, version, cls.STRUCTS)


def all_versions(kind: str, names: tuple[str, ...] | None = None) -> list[tuple[str, int, int]]:
    """(spec name, api_key, version) for every spec of ``kind`` among ``names`` (kafka-python's copy by
    default) and every valid version."""
    out = []
    for name in schema.spec_names() if names is None else names:
        spec = schema.load_spec(name)
        if spec.kind == kind:
            out.extend((name, spec.api_key, v) for v in range(spec.valid_versions.low, spec.valid_versions.high + 1))
    return out
