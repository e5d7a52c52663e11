"""The daemon's structure, read from its source with ``ast``: layers, cycles, private names,
module size.

Layers, lowest first (a module imports only from its own layer or lower ones, lazy and
type-checking imports included):

- the bottom: ``wire`` (the values the file, the daemon and its clients share), errors,
  paths, redaction, settings, the version;
- ``core`` (the session file's types and the algorithms over them, pure);
- ``store`` (the session file on disk);
- ``tiktoken_offline`` (the o200k encoding, cached with the store's safe-file helpers);
- ``llm`` (summarizers);
- ``service`` (sessions, compaction, navigation);
- the generic JSON-RPC layer;
- ``api`` (sessiond's protocol methods);
- ``cli``.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

DAEMON = Path(__file__).resolve().parents[1] / "daemon" / "sessiond"
JSONRPC = "jsonrpc"
LAYERS: list[set[str]] = [
    {"_version", "errors", "paths", "redaction", "settings", "settings_trust", "wire"},
    {"core"},
    {"store"},
    {"tiktoken_offline"},
    {"llm"},
    {"service"},
    {JSONRPC},
    {"api"},
    {"cli", "__main__", ""},
]
# The protocol's params and results, above the values in ``wire`` but below everything
# that does I/O: they import neither the store nor the service.
PROTOCOL_TYPES = ("api.types", "api.hook_types", "api.notification_types", "api.entry_types")
MAX_LINES = 500


@dataclass(frozen=True)
class Import:
    source: str  # the importing module, "sessiond.store.session"
    target: str  # a daemon module it imports
    line: int
    type_checking: bool


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(DAEMON.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(DAEMON.rglob("*.py"))}


@cache
def tree_of(name: str) -> ast.Module:
    return ast.parse(modules()[name].read_text(encoding="utf-8"))


def _type_checking_blocks(tree: ast.Module) -> set[int]:
    """Ids of the import nodes under ``if TYPE_CHECKING:``."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            for child in node.body:
                inside.update(id(n) for n in ast.walk(child))
    return inside


def imports_of(name: str) -> Iterator[Import]:
    known = modules()
    tree = tree_of(name)
    guarded = _type_checking_blocks(tree)
    package = name if known[name].name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            targets = [module]
            targets += [f"{module}.{alias.name}" for alias in node.names]
        for target in targets:
            if target in known and target != name:
                yield Import(name, target, node.lineno, id(node) in guarded)


def layer_of(module: str) -> int:
    top = module.split(".")[1] if "." in module else ""
    for rank, names in enumerate(LAYERS):
        if top in names:
            return rank
    raise AssertionError(f"{module} is in no layer: add its package to LAYERS")


def all_imports() -> list[Import]:
    return [found for name in modules() for found in imports_of(name)]


def test_the_scan_sees_the_daemon() -> None:
    names = modules()
    assert len(names) > 100
    assert "sessiond.api.session_methods" in names and "sessiond.wire.usage" in names
    found = {(i.source, i.target) for i in all_imports()}
    assert ("sessiond.api.session_methods", "sessiond.api.daemon") in found
    assert ("sessiond.store.export", "sessiond.wire.context") in found


def test_every_module_is_in_a_layer() -> None:
    for name in modules():
        layer_of(name)


def test_no_module_imports_from_a_higher_layer() -> None:
    upward = [
        f"{i.source} (line {i.line}) imports {i.target}"
        for i in all_imports()
        if layer_of(i.target) > layer_of(i.source)
    ]
    assert upward == []


def test_wire_imports_nothing_of_sessiond() -> None:
    for name, path in modules().items():
        if name.startswith("sessiond.wire"):
            text = path.read_text(encoding="utf-8")
            assert "sessiond" not in {
                node.module.split(".")[0]
                for node in ast.walk(tree_of(name))
                if isinstance(node, ast.ImportFrom) and node.module and not node.level
            }, text[:200]


def test_the_protocol_types_import_neither_the_store_nor_the_service() -> None:
    for short in PROTOCOL_TYPES:
        name = f"sessiond.{short}"
        assert name in modules()
        for found in imports_of(name):
            layer = found.target.split(".")[1]
            assert layer not in {"store", "service", "llm", JSONRPC}, found


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycles_between_daemon_modules() -> None:
    """No circle of imports that run: a type-only import (under ``TYPE_CHECKING``) may
    point back, so that a module can name the type of the object that owns it."""
    edges: dict[str, set[str]] = defaultdict(set)
    for name in modules():
        edges[name] = set()
    for found in all_imports():
        if not found.type_checking:
            edges[found.source].add(found.target)
    # A cycle this test must see: two modules importing each other.
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert _cycles(edges) == []


def _own_private_names(tree: ast.Module) -> set[str]:
    """The underscore names a module defines: its functions, methods and classes, the
    attributes it assigns (``self._x = ...``, class and module level)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Attribute):
            names.add(node.target.attr)
    return {name for name in names if _private(name)}


def _private_uses(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """``x._name`` where ``x`` is not ``self`` or ``cls`` and ``_name`` is not one this
    module defines (a classmethod may use its own class's private method on a new
    instance), and every ``from m import _name``."""
    own = _own_private_names(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue
            if isinstance(owner, ast.Call) and ast.unparse(owner.func) == "super":
                continue
            if node.attr in own:
                continue
            yield node.lineno, ast.unparse(node)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if _private(alias.name):
                    yield node.lineno, f"from {node.module} import {alias.name}"


def _private(attribute: str) -> bool:
    return attribute.startswith("_") and not attribute.startswith("__")


def test_no_module_touches_another_modules_private_names() -> None:
    """Only the owner of an underscore name uses it: no ``x._name`` of another module's
    on anything but ``self`` or ``cls``, and no ``from m import _name``."""
    sample = ast.parse(
        "from m import _hidden\nm._secret\nself._own\nsuper()._base\n"
        "class A:\n    def _mine(self): ...\nA()._mine()\n"
    )
    assert [text for _, text in _private_uses(sample)] == [
        "from m import _hidden",
        "m._secret",
    ]
    found = [
        f"{name}:{line}: {text}"
        for name in modules()
        for line, text in _private_uses(tree_of(name))
    ]
    assert found == []


def test_no_daemon_module_is_over_500_lines() -> None:
    long = {
        name: count
        for name, path in modules().items()
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def test_no_class_or_type_name_is_defined_twice() -> None:
    """A name means one thing across the daemon (``Usage`` was three types)."""
    where: dict[str, list[str]] = defaultdict(list)
    for name in modules():
        for node in tree_of(name).body:
            if isinstance(node, ast.ClassDef):
                where[node.name].append(name)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if (
                        isinstance(target, ast.Name)
                        and target.id[:1].isupper()
                        and not target.id.isupper()
                    ):
                        where[target.id].append(name)
    assert where["TokenUsage"] == ["sessiond.core.messages"]
    twice = {type_name: found for type_name, found in where.items() if len(found) > 1}
    assert twice == {}
