"""Protobuf schemas: ``.proto`` text compiled to a FileDescriptorProto by protoc (the one grpcio-tools
ships, run in a child process so its messages can be read and its C++ never shares this process), or a
base64 FileDescriptorProto as confluent-kafka's Protobuf serializer registers, checked by building it in a
protobuf DescriptorPool. No .proto text is parsed here.

References: a referenced schema is the file the referring one imports under the reference's name; protoc
gets them as a descriptor set (``--descriptor_set_in``), so a dependency registered as a descriptor works
as well as one registered as text. Google's well-known types come from protoc's own include directory.

Compatibility: Confluent's Protobuf rules, over descriptors (``_differences``): what a message, field,
oneof or package change does to data written with the other schema. docs/schema-registry.md lists them.
"""

from __future__ import annotations

import base64
import binascii
import functools
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from google.protobuf import descriptor_pb2, descriptor_pool

from eoslog.schema_registry.formats import Dependency, Incompatibility, ParsedSchema, SchemaInvalid

FileDescriptorProto = descriptor_pb2.FileDescriptorProto
FieldDescriptorProto = descriptor_pb2.FieldDescriptorProto
_ABSL_NOISE = re.compile(r"WARNING: All log messages before absl::InitializeLog|[IWEF]\d{4} \d\d:\d\d:")
MAIN_FILE = "schema.proto"  # the name a text schema is compiled under when nothing names it
COMPILE_TIMEOUT_S = 30.0

# Scalar types whose values read as each other on the wire (Confluent: a change inside a group is
# FIELD_NUMERIC_LABEL_CHANGED or FIELD_STRING_OR_BYTES_LABEL_CHANGED, compatible; across groups
# FIELD_SCALAR_KIND_CHANGED, not).
_T = FieldDescriptorProto
_WIRE_GROUPS = [
    {_T.TYPE_INT32, _T.TYPE_UINT32, _T.TYPE_INT64, _T.TYPE_UINT64, _T.TYPE_BOOL},
    {_T.TYPE_SINT32, _T.TYPE_SINT64},
    {_T.TYPE_FIXED32, _T.TYPE_SFIXED32},
    {_T.TYPE_FIXED64, _T.TYPE_SFIXED64},
    {_T.TYPE_STRING, _T.TYPE_BYTES},
    {_T.TYPE_FLOAT},
    {_T.TYPE_DOUBLE},
]
_NAMED = {_T.TYPE_MESSAGE, _T.TYPE_ENUM, _T.TYPE_GROUP}


class ProtobufSchema(ParsedSchema):
    schema_type = "PROTOBUF"

    def __init__(self, file: FileDescriptorProto, closure: dict[str, FileDescriptorProto]) -> None:
        self.file = file
        self.closure = closure  # import name -> file, every file this one needs, transitively
        bare = FileDescriptorProto()
        bare.CopyFrom(file)
        bare.ClearField("name")
        bare.ClearField("source_code_info")
        self.canonical = base64.b64encode(bare.SerializeToString(deterministic=True)).decode()
        self.normalized = self.canonical

    def serialized(self) -> str:
        """The file as base64 FileDescriptorProto: what ``format=serialized`` answers."""
        return base64.b64encode(self.file.SerializeToString(deterministic=True)).decode()

    def read_errors(self, writer: ParsedSchema) -> list[Incompatibility]:
        if not isinstance(writer, ProtobufSchema):
            return [Incompatibility("TYPE_CHANGED", "/", f"the other schema is {writer.schema_type}, not PROTOBUF")]
        return _differences(original=writer.file, update=self.file)


def parse_protobuf(text: str, dependencies: tuple[Dependency, ...] = (), name: str = MAIN_FILE) -> ProtobufSchema:
    closure: dict[str, FileDescriptorProto] = {}
    for dependency in dependencies:
        if not isinstance(dependency.schema, ProtobufSchema):
            raise SchemaInvalid(f"reference {dependency.name!r} is a {dependency.schema.schema_type} schema")
        closure.update(dependency.schema.closure)
        file = FileDescriptorProto()
        file.CopyFrom(dependency.schema.file)
        file.name = dependency.name  # imported under the reference's name
        closure[dependency.name] = file
    descriptor = _from_base64(text)
    if descriptor is None:
        descriptor = _compile(text, name, closure)
    _check_builds(descriptor, closure)
    return ProtobufSchema(descriptor, closure)


def _from_base64(text: str) -> FileDescriptorProto | None:
    stripped = text.strip()
    if not stripped or any(c.isspace() for c in stripped):
        return None  # .proto text has spaces; base64 has none
    try:
        data = base64.b64decode(stripped, validate=True)
    except (binascii.Error, ValueError):
        return None
    file = FileDescriptorProto()
    try:
        file.ParseFromString(data)
    except Exception:  # noqa: BLE001 - protobuf's DecodeError differs by implementation
        return None
    if not file.message_type and not file.enum_type and not file.name and not file.package:
        return None
    if not file.name:
        file.name = MAIN_FILE
    return file


def _grpc_tools_root() -> tuple[str, str]:
    spec = importlib.util.find_spec("grpc_tools")
    if spec is None or not spec.submodule_search_locations:
        raise SchemaInvalid("Protobuf schemas need grpcio-tools: pip install 'eoslog[schema-registry]'")
    package = Path(next(iter(spec.submodule_search_locations)))
    return str(package.parent), str(package / "_proto")


_PROTOC = (
    "import sys\n"
    "sys.path.insert(0, sys.argv[1])\n"
    "from grpc_tools import _protoc_compiler\n"
    "sys.exit(_protoc_compiler.run_main([a.encode() for a in ['protoc'] + sys.argv[2:]]))\n"
)


def _compile(text: str, name: str, closure: dict[str, FileDescriptorProto]) -> FileDescriptorProto:
    root, well_known = _grpc_tools_root()
    with tempfile.TemporaryDirectory(prefix="eoslog-protoc-") as work:
        source = Path(work, "src", name)
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text(text)
        out = Path(work, "out.pb")
        args = [f"-I{Path(work, 'src')}", f"-I{well_known}", f"--descriptor_set_out={out}"]
        if closure:
            deps = descriptor_pb2.FileDescriptorSet(file=list(closure.values()))
            deps_path = Path(work, "deps.pb")
            deps_path.write_bytes(deps.SerializeToString())
            args.insert(0, f"--descriptor_set_in={deps_path}")
        try:
            done = subprocess.run([sys.executable, "-I", "-S", "-c", _PROTOC, root, *args, name], check=False,
                                  cwd=work, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S,
                                  env={"PATH": os.environ.get("PATH", "")})
        except subprocess.TimeoutExpired:
            raise SchemaInvalid(f"protoc did not finish within {COMPILE_TIMEOUT_S:.0f} s") from None
        if done.returncode != 0:
            output = (done.stderr or done.stdout).replace(str(Path(work, "src")) + os.sep, "")
            # protoc's own diagnostics only: not the logging library's start-up notices it prints first
            message = "\n".join(line for line in output.strip().splitlines() if not _ABSL_NOISE.match(line))
            raise SchemaInvalid(message or f"protoc exited with {done.returncode}")
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
    (file,) = [f for f in files if f.name == name]
    return file


@functools.lru_cache(maxsize=64)
def _well_known(name: str) -> FileDescriptorProto | None:
    if not name.startswith("google/protobuf/"):
        return None
    _, include = _grpc_tools_root()
    if not Path(include, name).exists():
        return None
    return _compile(Path(include, name).read_text(), name, {})


def _check_builds(file: FileDescriptorProto, closure: dict[str, FileDescriptorProto]) -> None:
    """Adds the file and everything it imports to a fresh pool: unknown types, clashing names and missing
    imports fail here, whatever way the descriptor came."""
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(proto: FileDescriptorProto, chain: tuple[str, ...]) -> None:
        if proto.name in added:
            return
        for dependency in proto.dependency:
            if dependency in chain:
                raise SchemaInvalid(f"import cycle through {dependency!r}")
            found = closure.get(dependency) or _well_known(dependency)
            if found is None:
                raise SchemaInvalid(f"{proto.name!r} imports {dependency!r}, which no reference names")
            add(found, chain + (proto.name,))
        try:
            pool.Add(proto)
            pool.FindFileByName(proto.name)
        except Exception as exc:  # noqa: BLE001 - the pool's errors are TypeError or descriptor errors
            raise SchemaInvalid(f"{proto.name}: {exc}") from None
        added.add(proto.name)

    add(file, ())


# ---- compatibility -----------------------------------------------------------------------------------

def _messages(file: FileDescriptorProto) -> dict[str, descriptor_pb2.DescriptorProto]:
    found = {}

    def walk(prefix: str, message) -> None:
        name = f"{prefix}.{message.name}" if prefix else message.name
        found[name] = message
        for nested in message.nested_type:
            if not nested.options.map_entry:
                walk(name, nested)

    for message in file.message_type:
        walk(file.package, message)
    return found


def _group(field_type: int) -> int:
    for i, group in enumerate(_WIRE_GROUPS):
        if field_type in group:
            return i
    return -1


def _differences(original: FileDescriptorProto, update: FileDescriptorProto) -> list[Incompatibility]:
    """The incompatible differences from ``original`` (the writer) to ``update`` (the reader)."""
    found: list[Incompatibility] = []
    if original.package != update.package:
        found.append(Incompatibility("PACKAGE_CHANGED", "#/", f"package {original.package!r} became "
                                     f"{update.package!r}"))
        return found
    old_messages, new_messages = _messages(original), _messages(update)
    for name, old in old_messages.items():
        path = f"#/{name}"
        new = new_messages.get(name)
        if new is None:
            found.append(Incompatibility("MESSAGE_REMOVED", path, f"message {name} was removed"))
            continue
        old_fields = {f.number: f for f in old.field}
        new_fields = {f.number: f for f in new.field}
        for number, field in old_fields.items():
            here = f"{path}/{number}"
            if number not in new_fields:
                if field.label == _T.LABEL_REQUIRED:
                    found.append(Incompatibility("REQUIRED_FIELD_REMOVED", here, f"required field {field.name} "
                                                 "was removed"))
                elif field.HasField("oneof_index") and not field.proto3_optional:
                    found.append(Incompatibility("ONEOF_FIELD_REMOVED", here, f"field {field.name} was removed "
                                                 "from its oneof"))
                continue
            found.extend(_field_change(field, new_fields[number], here))
        for number, field in new_fields.items():
            if number not in old_fields and field.label == _T.LABEL_REQUIRED:
                found.append(Incompatibility("REQUIRED_FIELD_ADDED", f"{path}/{number}",
                                             f"required field {field.name} was added"))
        found.extend(_oneof_moves(old, new, old_fields, new_fields, path))
    return found


def _field_change(old, new, path: str) -> list[Incompatibility]:
    if (old.label == _T.LABEL_REPEATED) != (new.label == _T.LABEL_REPEATED):
        return [Incompatibility("FIELD_KIND_CHANGED", path, f"field {new.name} changed between repeated and "
                                "singular")]
    if (old.type in _NAMED) != (new.type in _NAMED) or (old.type in _NAMED and old.type != new.type):
        return [Incompatibility("FIELD_KIND_CHANGED", path, f"field {new.name} changed kind")]
    if old.type in _NAMED:
        if old.type_name.lstrip(".") != new.type_name.lstrip("."):
            return [Incompatibility("FIELD_NAMED_TYPE_CHANGED", path, f"field {new.name} changed from "
                                    f"{old.type_name.lstrip('.')} to {new.type_name.lstrip('.')}")]
        return []
    if _group(old.type) != _group(new.type):
        return [Incompatibility("FIELD_SCALAR_KIND_CHANGED", path, f"field {new.name} changed from "
                                f"{_type_name(old.type)} to {_type_name(new.type)}")]
    return []


def _type_name(field_type: int) -> str:
    return _T.Type.Name(field_type).removeprefix("TYPE_").lower()


def _oneof_moves(old, new, old_fields, new_fields, path: str) -> list[Incompatibility]:
    """A field moved into a oneof that already existed, or several fields into a new one, changes what
    the writer's data means: only one member of a oneof survives a read."""
    def real_oneof(message, field):
        if not field.HasField("oneof_index") or field.proto3_optional:
            return None
        return message.oneof_decl[field.oneof_index].name

    old_oneofs = {real_oneof(old, f) for f in old.field} - {None}
    moved: dict[str, list[str]] = {}
    for number, field in new_fields.items():
        oneof = real_oneof(new, field)
        if oneof is None or number not in old_fields or real_oneof(old, old_fields[number]) == oneof:
            continue
        moved.setdefault(oneof, []).append(field.name)
    found = []
    for oneof, names in moved.items():
        if oneof in old_oneofs:
            found.append(Incompatibility("FIELD_MOVED_TO_EXISTING_ONEOF", f"{path}/{oneof}",
                                         f"field(s) {', '.join(names)} moved into the existing oneof {oneof}"))
        elif len(names) > 1:
            found.append(Incompatibility("MULTIPLE_FIELDS_MOVED_TO_ONEOF", f"{path}/{oneof}",
                                         f"fields {', '.join(names)} moved into the new oneof {oneof}"))
    return found
