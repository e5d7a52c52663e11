"""The seams between the store's modules: each piece of state has one owner.

Read from the source: no module of ``store/`` imports another in a circle (type-only
imports included), and none uses an underscore name that another module defines (an
attribute or a function): what one module needs of another goes through public names.
"""

from __future__ import annotations

import ast
from pathlib import Path

import sessiond.store

STORE = Path(sessiond.store.__file__).parent


def _modules() -> dict[str, ast.Module]:
    return {path.stem: ast.parse(path.read_text()) for path in sorted(STORE.glob("*.py"))}


def _imports(tree: ast.Module) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module:
                found.add(node.module.split(".")[0])
            elif node.level == 1:
                found.update(alias.name for alias in node.names)
            elif node.module and node.module.startswith("sessiond.store."):
                found.add(node.module.split(".")[2])
    return found


def _in_store(node: ast.ImportFrom) -> bool:
    return node.level == 1 or (node.module or "").startswith("sessiond.store")


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(name: str) -> list[str] | None:
        state[name] = 1
        stack.append(name)
        for dep in sorted(graph[name] & graph.keys()):
            if state.get(dep) == 1:
                return [*stack[stack.index(dep) :], dep]
            if dep not in state and (found := visit(dep)) is not None:
                return found
        stack.pop()
        state[name] = 2
        return None

    for name in sorted(graph):
        if name not in state and (found := visit(name)) is not None:
            return found
    return None


def _own_private_names(tree: ast.Module) -> set[str]:
    """Underscore names the module itself defines: functions, classes, attributes it
    assigns, keyword fields of its dataclasses and structs."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {name for name in names if name.startswith("_")}


def test_no_import_circle_in_the_store() -> None:
    graph = {name: _imports(tree) - {name} for name, tree in _modules().items()}
    assert _cycle(graph) is None


def test_no_module_uses_another_modules_underscore_names() -> None:
    reaching: list[str] = []
    for name, tree in _modules().items():
        own = _own_private_names(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and _in_store(node):
                reaching += [
                    f"{name}: imports {node.module}.{alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_") and not alias.name.startswith("__")
                ]
            elif (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and node.attr not in own
            ):
                reaching.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    assert reaching == []


def test_the_check_sees_a_circle_and_a_reach() -> None:
    """The two checks above can fail: a circle and a reach, made up, are found."""
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    tree = ast.parse("def f(store):\n    return store._size\n")
    assert "_size" not in _own_private_names(tree)
