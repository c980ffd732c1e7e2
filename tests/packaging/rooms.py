"""eoslog's rooms and the import arrows between them, read from the source with ast (nothing is imported).

A room is a top-level package or module of ``src/eoslog``. Room A has an arrow to room B when a module of
A imports from B anywhere in the file: at the top, inside a function, or under ``if TYPE_CHECKING:``; each
is a dependency a reader has to follow. Modules named in strings (``importlib.import_module``, the CLI's
lazy command table) are not arrows. A circle is a path of arrows that comes back to its first room.

    python tests/packaging/rooms.py [SRC_DIR]   # the rooms, their arrows and their circles

The rules are tests/packaging/test_layers.py.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "eoslog"
SOURCE = Path(__file__).resolve().parents[2] / "src" / PACKAGE


@dataclass(frozen=True)
class Import:
    path: Path    # the importing file
    line: int
    source: str   # the importing module, e.g. "eoslog.security.client"
    target: str   # the module imported from, e.g. "eoslog.server.config"

    def __str__(self) -> str:
        shown = self.path.relative_to(SOURCE.parents[1]) if self.path.is_relative_to(SOURCE.parents[1]) else self.path
        return f"{shown}:{self.line}: {self.source} imports {self.target}"


def module_name(path: Path, source: Path = SOURCE) -> str:
    parts = path.relative_to(source.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def room(module: str) -> str | None:
    """``eoslog.security.client`` -> ``security``; None for the package itself and for other packages."""
    parts = module.split(".")
    return parts[1] if parts[0] == PACKAGE and len(parts) > 1 else None


def imports(source: Path = SOURCE) -> list[Import]:
    """Every import of an eoslog module by an eoslog module, in file and line order."""
    found = []
    for path in sorted(source.rglob("*.py")):
        module = module_name(path, source)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(node, module, path.name == "__init__.py")
                # `from eoslog import log`: the names are rooms; below the root a name changes no room
                targets = [f"{base}.{alias.name}" for alias in node.names] if base == PACKAGE else [base]
            else:
                continue
            found += [Import(path, node.lineno, module, target) for target in targets if room(target)]
    return sorted(found, key=lambda i: (str(i.path), i.line))


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    package = package[:len(package) - node.level + 1]
    return ".".join(package + ([node.module] if node.module else []))


def rooms(source: Path = SOURCE) -> list[str]:
    names = {p.name for p in source.iterdir() if p.is_dir() and p.name != "__pycache__"}
    names |= {p.stem for p in source.glob("*.py") if p.stem != "__init__"}
    return sorted(names)


def arrows(found: list[Import]) -> dict[tuple[str, str], list[Import]]:
    """(from room, to room) -> the imports that make that arrow."""
    made: dict[tuple[str, str], list[Import]] = defaultdict(list)
    for i in found:
        ends = room(i.source), room(i.target)
        if ends[0] is not None and ends[0] != ends[1]:
            made[ends].append(i)
    return dict(made)


def circles(edges) -> list[tuple[str, ...]]:
    """Every elementary circle, each starting at its alphabetically first room, shortest first."""
    following: dict[str, set[str]] = defaultdict(set)
    for start, end in edges:
        following[start].add(end)
    found = []

    def walk(path: list[str]) -> None:
        for after in sorted(following[path[-1]]):
            if after == path[0]:
                found.append(tuple(path))
            elif after > path[0] and after not in path:
                walk(path + [after])

    for first in sorted(following):
        walk([first])
    return sorted(found, key=lambda c: (len(c), c))


def describe(circle: tuple[str, ...], made: dict[tuple[str, str], list[Import]]) -> str:
    """``a -> b -> a``, then one import per arrow: where to look to break it."""
    steps = list(zip(circle, circle[1:] + circle[:1]))
    return " -> ".join(circle + circle[:1]) + "".join(f"\n    {made[step][0]}" for step in steps)


def main(source: Path) -> None:
    made = arrows(imports(source))
    names = rooms(source)
    print(len(names), "rooms")
    for name in names:
        print(f"  {name:14s} -> {', '.join(sorted(b for a, b in made if a == name))}")
    found = circles(made)
    print(len(found), "circles")
    for circle in found:
        print("   ", " -> ".join(circle + circle[:1]))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else SOURCE)
