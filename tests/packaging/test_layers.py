"""The rooms of src/eoslog (top-level packages) and the import arrows between them (issue 36): every module
has a room, no new circle, and the lower rooms never reach up into the server. The graph comes from the
source (rooms.py, which `python tests/packaging/rooms.py` prints), so no module is imported."""

from __future__ import annotations

import ast
import re

import pytest
from rooms import SOURCE, arrows, circles, describe, imports, room, rooms

# What stays at the package root; everything else belongs to a room.
ROOT_MODULES = {"__init__", "__main__", "cli"}

# The circles still left, each from its alphabetically first room. Only to shrink: a new circle fails
# test_no_new_circle, and one broken and not taken out of here fails test_every_allowed_circle_still_exists.
ALLOWED_CIRCLES: set[tuple[str, ...]] = set()

# Rooms below the server: none may import from server/, not even under TYPE_CHECKING.
BELOW_THE_SERVER = ("records", "log", "protocol", "security", "client", "coordinator", "cluster", "share", "api")
# Modules may grow to this size; a longer one is split by responsibility (../shared/STYLE.md, issue 36).
MAX_MODULE_LINES = 700
# The transaction coordinator's extensions (coordinator/transaction/engine.py is their whole contract).
EXTENSIONS = ("coordinator/transaction_groups", "coordinator/check_back")


def test_no_loose_module_at_the_package_root():
    loose = sorted(set(rooms()) - ROOT_MODULES - {p.name for p in SOURCE.iterdir() if (p / "__init__.py").exists()})
    assert loose == [], f"modules or folders at the root of src/eoslog that belong in a room: {loose}"


@pytest.fixture(scope="module")
def found():
    return imports()  # every file parsed once for the module's tests


def test_no_new_circle(found):
    made = arrows(found)
    new = [describe(c, made) for c in circles(made) if c not in ALLOWED_CIRCLES]
    assert not new, "new circle(s) between rooms:\n" + "\n".join(new)


def test_every_allowed_circle_still_exists(found):
    gone = ALLOWED_CIRCLES - set(circles(arrows(found)))
    assert not gone, f"no longer circles, take them out of ALLOWED_CIRCLES: {sorted(gone)}"


def test_rooms_below_the_server_do_not_import_it(found):
    climbs = [str(i) for i in found if room(i.source) in BELOW_THE_SERVER and room(i.target) == "server"]
    assert not climbs, "imports of server/ from below it:\n" + "\n".join(climbs)


def test_no_room_imports_the_test_harness(found):
    """eoslog.testing is for tests; what commands start (brokers, ZooKeeper, Spark) is in tools/local/ and
    server/embedded.py, and testing/ re-exports it."""
    uses = [str(i) for i in found if room(i.target) == "testing" and room(i.source) != "testing"]
    assert not uses, "imports of the test harness outside it:\n" + "\n".join(uses)


def test_the_graph_sees_every_kind_of_import(tmp_path):
    """The rules above can fail only if the graph sees each way a module can name another."""
    package = tmp_path / "eoslog"
    for folder in ("a", "b", "c", "d", "e", "f"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "a" / "m.py").write_text("import eoslog.b.x\n")
    (package / "b" / "m.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                        "    from eoslog.c.x import Y\n")
    (package / "c" / "m.py").write_text("def f():\n    from ..d import x\n")
    (package / "d" / "m.py").write_text("from eoslog import e\nfrom . import sibling\n")
    (package / "e" / "m.py").write_text("from eoslog.a.z import w\n")
    made = arrows(imports(package))
    assert set(made) == {("a", "b"), ("b", "c"), ("c", "d"), ("d", "e"), ("e", "a")}
    assert circles(made) == [("a", "b", "c", "d", "e")]
    assert "tools" not in rooms(package) and "f" in rooms(package)


def test_the_handlers_never_branch_on_the_mode():
    """A single node is a cluster of one: the replica layer and the metadata cache answer for both modes."""
    branches = [f"{path.relative_to(SOURCE)}:{number}: {line.strip()}"
                for path in sorted((SOURCE / "api").glob("*.py"))
                for number, line in enumerate(path.read_text().splitlines(), 1)
                if re.search(r"\bcluster is (not )?None\b|\b(broker|services|context)\.cluster\b", line)]
    assert not branches, "api/ reads the mode:\n" + "\n".join(branches)


def test_no_module_is_too_long():
    long = [f"{path.relative_to(SOURCE)}: {count} lines" for path in sorted(SOURCE.rglob("*.py"))
            if (count := len(path.read_text().splitlines())) > MAX_MODULE_LINES]
    assert not long, f"modules over {MAX_MODULE_LINES} lines:\n" + "\n".join(long)


def test_extensions_use_no_private_member_of_the_coordinator():
    """Transaction groups and check-back transactions reach the coordinator through engine.py only."""
    reaching = []
    for folder in EXTENSIONS:
        for path in sorted((SOURCE / folder).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                        and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
                    reaching.append(f"{path.relative_to(SOURCE)}:{node.lineno}: .{node.attr}")
    assert not reaching, "private members used by an extension:\n" + "\n".join(reaching)


def test_every_handler_is_annotated():
    """Each API module's ``handle`` (and ``error_response``) says what it is given: the typed context of
    api/context.py and its API's request message."""
    bare = []
    for path in sorted((SOURCE / "api").glob("*.py")):
        if path.name.startswith("_") or path.stem in ("context", "errors"):
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in ("handle", "error_response"):
                context, request = node.args.args[:2]
                if getattr(context.annotation, "id", None) != "RequestContext" or request.annotation is None:
                    bare.append(f"api/{path.name}: {node.name}")
    assert not bare, "handlers without their context and request types:\n" + "\n".join(bare)
