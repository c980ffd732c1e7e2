"""Generate a decoder and an encoder for one (message spec, version) as Python source, then ``exec`` it.

Generated code is straight-line: runs of fixed-width fields become one ``struct.Struct`` call, nested
arrays become nested ``for`` loops inline, fields absent from the version are plain default
assignments, and nothing consults the spec at run time. ``source_of`` returns the text for reading.

Decoder: ``decode(buf: memoryview, pos: int, end: int) -> (object, pos)``. It checks every length and
count against ``end`` and raises ``wire.Malformed``; fixed-width reads past the end raise
``struct.error`` and single-byte varint reads ``IndexError`` -- the codec turns all three into one error.
Records become ``memoryview`` slices of ``buf``; ``bytes`` fields are copied (they outlive the frame).
Known tagged fields are parsed, unknown ones skipped.

Encoder: ``encode(obj, out: bytearray, parts: list) -> None`` appends to ``out``; a records field may
move ``out``'s contents to ``parts`` and append its pieces there (see ``wire.write_records``).
Fields not in the version are skipped. A tagged field is written only when its value differs from its
default, as Kafka's generated code does: a response that sets none (every ApiVersions reply, for one)
keeps an empty section (one 0 byte), which librdkafka before 2.2 -- it mis-skips tagged fields -- needs;
KIP-951's leader hints (Produce v10+, Fetch v12+) are set only on NOT_LEADER_OR_FOLLOWER answers.
"""

from __future__ import annotations

import struct
import uuid

from eoslog.protocol import wire
from eoslog.protocol.messages import Struct
from eoslog.protocol.schema import FieldSpec, MessageSpec

FIXED = {"int8": "b", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I", "int64": "q",
         "float64": "d", "bool": "?"}


class _Writer:
    """Accumulates indented source lines, fresh variable names and the exec namespace."""

    def __init__(self, spec: MessageSpec, version: int, cls: type[Struct]) -> None:
        self.spec = spec
        self.version = version
        self.cls = cls
        self.lines: list[str] = []
        self.counter = 0
        self.ns: dict[str, object] = {
            "_new": object.__new__, "_M": cls, "_Malformed": wire.Malformed,
            "_uv": wire.read_uvarint, "_skip_tags": wire.skip_tagged_fields, "_truncated": wire.truncated,
            "_bad_null": wire.bad_null, "_too_many": wire.too_many, "_unpack_from": struct.unpack_from,
            "_pack": struct.pack, "_UUID": uuid.UUID, "_QQ": wire.UUID_PAIR.unpack_from,
            "_UVB": wire.UVARINT_BYTES, "_uvarint": wire.uvarint, "_write_records": wire.write_records,
            "_Frozen": wire.FrozenArray,
        }
        for name, struct_cls in cls.STRUCTS.items():
            self.ns[f"S_{name}"] = struct_cls
        self.structs: dict[str, str] = {}
        self.in_frozen = False  # emitting the first encoding of a FrozenArray

    def var(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def const(self, value: object) -> str:
        name = self.var("_k")
        self.ns[name] = value
        return name

    def struct_fn(self, fmt: str, method: str) -> str:
        key = f"{fmt}.{method}"
        if key not in self.structs:
            name = self.var("_s")
            self.ns[name] = getattr(struct.Struct(">" + fmt), method)
            self.structs[key] = name
        return self.structs[key]

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    def compact(self, f: FieldSpec) -> bool:
        if not self.spec.is_flexible(self.version):
            return False
        return f.flexible_versions is None or self.version in f.flexible_versions

    def nullable(self, f: FieldSpec) -> bool:
        return self.version in f.nullable_versions

    def default_expr(self, f: FieldSpec) -> str:
        if f.default == ():
            return f"S_{f.struct_name}()" if f.is_struct and not f.is_array else "[]"
        if f.default is None or isinstance(f.default, (bool, int, float)):
            return repr(f.default)
        return self.const(f.default)

    def compile(self, name: str, header: str) -> tuple[object, str]:
        source = header + "\n" + "\n".join(self.lines) + "\n"
        code = compile(source, f"<eoslog.protocol.codegen {self.spec.name} v{self.version} {name}>", "exec")
        exec(code, self.ns)  # noqa: S102 - our own generated source, built from the specs
        return self.ns[name], source


# ---- decoding -------------------------------------------------------------------------------------


def _read_uvarint(w: _Writer, ind: int, target: str, buf: str) -> None:
    w.emit(ind, f"{target} = {buf}[pos]")
    w.emit(ind, f"if {target} < 128: pos += 1")
    w.emit(ind, f"else: {target}, pos = _uv({buf}, pos)")


def _read_length(w: _Writer, ind: int, target: str, buf: str, compact: bool, fmt: str) -> None:
    """A length or count: uvarint minus one when compact, else a signed fixed-width integer."""
    if compact:
        _read_uvarint(w, ind, target, buf)
        w.emit(ind, f"{target} -= 1")
    else:
        size = struct.calcsize(">" + fmt)
        w.emit(ind, f"{target}, = {w.struct_fn(fmt, 'unpack_from')}({buf}, pos); pos += {size}")


def _read_value(w: _Writer, ind: int, type_: str, nullable: bool, compact: bool, target: str,
                buf: str, end: str, what: str) -> None:
    """Lines that read one non-struct value into ``target`` and advance ``pos``."""
    if type_ in FIXED:
        fmt = FIXED[type_]
        w.emit(ind, f"{target}, = {w.struct_fn(fmt, 'unpack_from')}({buf}, pos); "
                    f"pos += {struct.calcsize('>' + fmt)}")
        return
    if type_ == "uuid":
        high, low = w.var("_hi"), w.var("_lo")
        w.emit(ind, f"{high}, {low} = _QQ({buf}, pos); pos += 16")
        w.emit(ind, f"{target} = _UUID(int=({high} << 64) | {low})")
        return
    convert = {"string": "str({}, 'utf-8')", "bytes": "bytes({})", "records": "{}"}[type_]
    n, e = w.var("_n"), w.var("_e")
    _read_length(w, ind, n, buf, compact, "h" if type_ == "string" else "i")
    w.emit(ind, f"if {n} < 0:")
    if nullable:
        w.emit(ind + 1, f"{target} = None")
    else:
        w.emit(ind + 1, f"raise _bad_null({what!r}, pos)")
    w.emit(ind, "else:")
    w.emit(ind + 1, f"{e} = pos + {n}")
    w.emit(ind + 1, f"if {e} > {end}: raise _truncated({what!r}, pos, {n}, {end})")
    w.emit(ind + 1, f"{target} = {convert.format(f'{buf}[pos:{e}]')}")
    w.emit(ind + 1, f"pos = {e}")


def _decode_field(w: _Writer, ind: int, f: FieldSpec, target: str, buf: str, end: str, what: str) -> None:
    compact = w.compact(f)
    nullable = w.nullable(f)
    if not f.is_array and not f.is_struct:
        _read_value(w, ind, f.type, nullable, compact, target, buf, end, what)
        return
    if f.is_struct and not f.is_array:
        if nullable:  # a nullable struct is preceded by an int8: -1 null, 1 present
            marker = w.var("_m")
            w.emit(ind, f"{marker}, = {w.struct_fn('b', 'unpack_from')}({buf}, pos); pos += 1")
            w.emit(ind, f"if {marker} < 0: {target} = None")
            w.emit(ind, "else:")
            ind += 1
        obj = w.var("_o")
        _decode_struct(w, ind, f.fields, f"S_{f.struct_name}", obj, buf, end, what)
        w.emit(ind, f"{target} = {obj}")
        return
    n = w.var("_n")
    _read_length(w, ind, n, buf, compact, "i")
    w.emit(ind, f"if {n} < 0:")
    w.emit(ind + 1, f"{target} = None" if nullable else f"raise _bad_null({what!r}, pos)")
    w.emit(ind, f"elif {n} > {end} - pos: raise _too_many({what!r}, {n}, pos, {end})")
    w.emit(ind, "else:")
    ind += 1
    element = f.element_type
    if element in FIXED:
        fmt = FIXED[element]
        size = struct.calcsize(">" + fmt)
        w.emit(ind, f"{target} = list(_unpack_from('>%d{fmt}' % {n}, {buf}, pos)); pos += {size} * {n}")
        return
    items = w.var("_l")
    w.emit(ind, f"{items} = []")
    w.emit(ind, f"for _ in range({n}):")
    item = w.var("_x")
    if f.is_struct:
        _decode_struct(w, ind + 1, f.fields, f"S_{f.struct_name}", item, buf, end, what)
    else:
        _read_value(w, ind + 1, element, False, compact, item, buf, end, what)
    w.emit(ind + 1, f"{items}.append({item})")
    w.emit(ind, f"{target} = {items}")


def _decode_struct(w: _Writer, ind: int, fields: tuple[FieldSpec, ...], cls_ref: str, obj: str,
                   buf: str, end: str, path: str) -> None:
    v = w.version
    w.emit(ind, f"{obj} = _new({cls_ref})")
    run: list[FieldSpec] = []

    def flush() -> None:
        if not run:
            return
        fmt = "".join(FIXED[f.type] for f in run)
        targets = ", ".join(f"{obj}.{f.attr}" for f in run)
        w.emit(ind, f"{targets}, = {w.struct_fn(fmt, 'unpack_from')}({buf}, pos); "
                    f"pos += {struct.calcsize('>' + fmt)}")
        run.clear()

    tagged = []
    for f in fields:
        if f.tagged_in(v):
            tagged.append(f)
            w.emit(ind, f"{obj}.{f.attr} = {w.default_expr(f)}")
        elif not f.present_in(v):
            w.emit(ind, f"{obj}.{f.attr} = {w.default_expr(f)}")
        elif f.type in FIXED:
            run.append(f)
        else:
            flush()
            _decode_field(w, ind, f, f"{obj}.{f.attr}", buf, end, f"{path}.{f.name}")
    flush()
    if not w.spec.is_flexible(v):
        return
    if not tagged:
        w.emit(ind, f"pos = _skip_tags({buf}, pos, {end})")
        return
    count, tag, size, tag_end, sub = (w.var(p) for p in ("_tc", "_tg", "_ts", "_te", "_tb"))
    _read_uvarint(w, ind, count, buf)
    w.emit(ind, f"for _ in range({count}):")
    _read_uvarint(w, ind + 1, tag, buf)
    _read_uvarint(w, ind + 1, size, buf)
    w.emit(ind + 1, f"{tag_end} = pos + {size}")
    w.emit(ind + 1, f"if {tag_end} > {end}: raise _truncated('{path} tagged field', pos, {size}, {end})")
    for i, f in enumerate(tagged):
        w.emit(ind + 1, f"{'if' if i == 0 else 'elif'} {tag} == {f.tag}:")
        # Parse inside a view that ends where the tagged field ends, so it cannot read its neighbours.
        w.emit(ind + 2, f"{sub} = {buf}[:{tag_end}]")
        _decode_field(w, ind + 2, f, f"{obj}.{f.attr}", sub, tag_end, f"{path}.{f.name}")
    w.emit(ind + 1, f"pos = {tag_end}")


def build_decoder(spec: MessageSpec, version: int, cls: type[Struct]):
    """The decoder function for ``spec`` at ``version`` and its source text."""
    w = _Writer(spec, version, cls)
    _decode_struct(w, 1, spec.fields, "_M", "_o0", "buf", "end", spec.name)
    w.emit(1, "return _o0, pos")
    return w.compile("decode", "def decode(buf, pos, end):")


# ---- encoding -------------------------------------------------------------------------------------


def _write_length(w: _Writer, ind: int, expr: str, compact: bool, fmt: str) -> None:
    if compact:
        n = w.var("_n")
        w.emit(ind, f"{n} = {expr} + 1")
        w.emit(ind, f"out += _UVB[{n}] if {n} < 128 else _uvarint({n})")
    else:
        w.emit(ind, f"out += {w.struct_fn(fmt, 'pack')}({expr})")


def _write_value(w: _Writer, ind: int, type_: str, nullable: bool, compact: bool, expr: str) -> None:
    if type_ in FIXED:
        w.emit(ind, f"out += {w.struct_fn(FIXED[type_], 'pack')}({expr})")
        return
    if type_ == "uuid":
        w.emit(ind, f"out += {expr}.bytes")
        return
    if type_ == "records":
        if not nullable:  # write_records would write None as null, which a reader of this version refuses
            w.emit(ind, f"if {expr} is None: raise ValueError('records are null where the version allows none')")
        w.emit(ind, f"_write_records(out, parts, {expr}, {compact})")
        return
    value = w.var("_v")
    w.emit(ind, f"{value} = {expr}")
    if nullable:
        null = b"\x00" if compact else (b"\xff\xff" if type_ == "string" else b"\xff\xff\xff\xff")
        w.emit(ind, f"if {value} is None: out += {null!r}")
        w.emit(ind, "else:")
        ind += 1
    if type_ == "string":
        w.emit(ind, f"{value} = {value}.encode()")
    _write_length(w, ind, f"len({value})", compact, "h" if type_ == "string" else "i")
    w.emit(ind, f"out += {value}")


def _encode_field(w: _Writer, ind: int, f: FieldSpec, expr: str) -> None:
    compact = w.compact(f)
    nullable = w.nullable(f)
    if not f.is_array and not f.is_struct:
        _write_value(w, ind, f.type, nullable, compact, expr)
        return
    value = w.var("_v")
    w.emit(ind, f"{value} = {expr}")
    if f.is_struct and not f.is_array:
        if nullable:
            w.emit(ind, f"if {value} is None: out += b'\\xff'")
            w.emit(ind, "else:")
            ind += 1
            w.emit(ind, "out += b'\\x01'")
        _encode_struct(w, ind, f.fields, value)
        return
    if nullable:
        null = b"\x00" if compact else b"\xff\xff\xff\xff"
        w.emit(ind, f"if {value} is None: out += {null!r}")
        w.emit(ind, "else:")
        ind += 1
    if f.is_struct and not w.in_frozen and not _holds_records(f.fields):
        # A FrozenArray is encoded once per (message, version) and its bytes written again after that.
        saved, cached = w.var("_o"), w.var("_b")
        w.emit(ind, f"if type({value}) is _Frozen:")
        w.emit(ind + 1, f"{cached} = {value}.encoded.get({w.spec.name + '.' + f.name + '.v' + str(w.version)!r})")
        w.emit(ind + 1, f"if {cached} is None:")
        w.emit(ind + 2, f"{saved} = out")
        w.emit(ind + 2, "out = bytearray()")
        w.in_frozen = True  # arrays inside this one are cached with it: no checks of their own
        _encode_array(w, ind + 2, f, value, compact)
        w.in_frozen = False
        w.emit(ind + 2, f"{cached} = {value}.encoded[{w.spec.name + '.' + f.name + '.v' + str(w.version)!r}]"
                        " = bytes(out)")
        w.emit(ind + 2, f"out = {saved}")
        w.emit(ind + 1, f"out += {cached}")
        w.emit(ind, "else:")
        ind += 1
    _encode_array(w, ind, f, value, compact)


def _holds_records(fields: tuple[FieldSpec, ...]) -> bool:
    """Whether a struct has a records field at any depth (the encoder may move those to ``parts``)."""
    return any(f.type == "records" or (f.is_struct and _holds_records(f.fields)) for f in fields)


def _encode_array(w: _Writer, ind: int, f: FieldSpec, value: str, compact: bool) -> None:
    _write_length(w, ind, f"len({value})", compact, "i")
    element = f.element_type
    if element in FIXED:
        w.emit(ind, f"out += _pack('>%d{FIXED[element]}' % len({value}), *{value})")
        return
    item = w.var("_x")
    w.emit(ind, f"for {item} in {value}:")
    if f.is_struct:
        _encode_struct(w, ind + 1, f.fields, item)
    else:
        _write_value(w, ind + 1, element, False, compact, item)


def _encode_struct(w: _Writer, ind: int, fields: tuple[FieldSpec, ...], obj: str) -> None:
    v = w.version
    run: list[FieldSpec] = []

    def flush() -> None:
        if run:
            fmt = "".join(FIXED[f.type] for f in run)
            args = ", ".join(f"{obj}.{f.attr}" for f in run)
            w.emit(ind, f"out += {w.struct_fn(fmt, 'pack')}({args})")
            run.clear()

    for f in fields:
        if not f.present_in(v) or f.tagged_in(v):
            continue  # absent in this version, or tagged (written below, after the fields)
        if f.type in FIXED:
            run.append(f)
        else:
            flush()
            _encode_field(w, ind, f, f"{obj}.{f.attr}")
    flush()
    if w.spec.is_flexible(v):
        _encode_tagged(w, ind, [f for f in fields if f.tagged_in(v)], obj)
    elif not w.lines or w.lines[-1].endswith(":"):
        w.emit(ind, "pass")


def _encode_tagged(w: _Writer, ind: int, tagged: list[FieldSpec], obj: str) -> None:
    """The tagged-field section: a count, then (tag, size, value) in tag order for each field whose
    value is not its default (Kafka writes no defaults, and a reader takes a missing tag as one).
    All defaults -- nearly always -- cost one test of each field and the one 0 byte."""
    if not tagged:
        w.emit(ind, "out += b'\\x00'")
        return
    tagged = sorted(tagged, key=lambda f: f.tag)
    values = []
    for f in tagged:
        assert f.type != "records" and not (f.is_struct and _holds_records(f.fields)), f.name
        value = w.var("_v")
        w.emit(ind, f"{value} = {obj}.{f.attr}")
        values.append(value)
    w.emit(ind, f"if {' and '.join(_is_default(w, f, v) for f, v in zip(tagged, values))}:")
    w.emit(ind + 1, "out += b'\\x00'")
    w.emit(ind, "else:")
    ind += 1
    found, saved = w.var("_tf"), w.var("_o")
    w.emit(ind, f"{found} = []")
    for f, value in zip(tagged, values):
        w.emit(ind, f"if not ({_is_default(w, f, value)}):")
        w.emit(ind + 1, f"{saved} = out")
        w.emit(ind + 1, "out = bytearray()")
        _encode_field(w, ind + 1, f, value)
        w.emit(ind + 1, f"{found}.append(({f.tag}, out))")
        w.emit(ind + 1, f"out = {saved}")
    w.emit(ind, f"out += _uvarint(len({found}))")
    w.emit(ind, f"for _tag, _body in {found}:")
    w.emit(ind + 1, "out += _uvarint(_tag)")
    w.emit(ind + 1, "out += _uvarint(len(_body))")
    w.emit(ind + 1, "out += _body")


def _is_default(w: _Writer, f: FieldSpec, value: str) -> str:
    """An expression true when ``value`` (a field of spec ``f``) holds the field's default. Structs of
    plain fields compare field by field inline: Struct.__eq__ per partition would cost more than the
    rest of the partition's encoding."""
    if f.default is None:
        return f"{value} is None"
    if f.is_array:
        return f"({value} is not None and not {value})"
    if f.is_struct:
        if all(sub.type in FIXED or sub.type in ("string", "uuid") for sub in f.fields):
            default = w.cls.STRUCTS[f.struct_name]()
            checks = " and ".join(f"{value}.{sub.attr} == {w.const(getattr(default, sub.attr))}" for sub in f.fields)
            return f"({value} is not None and {checks})" if checks else "True"
        default = w.const(w.cls.STRUCTS[f.struct_name]())
        return f"({value} is {default} or {value} == {default})"
    return f"{value} == {w.default_expr(f)}"


def build_encoder(spec: MessageSpec, version: int, cls: type[Struct]):
    """The encoder function for ``spec`` at ``version`` and its source text."""
    w = _Writer(spec, version, cls)
    _encode_struct(w, 1, spec.fields, "o")
    return w.compile("encode", "def encode(o, out, parts):")
