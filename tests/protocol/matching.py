"""The placeholder rules of ``protocol/examples`` (described in ``protocol/README.md``).

In an expected (``receive``) message:

- ``"<any>"``, ``"<string>"``, ``"<number>"``, ``"<integer>"``, ``"<boolean>"``,
  ``"<object>"``, ``"<array>"``, ``"<null>"``: any value of that JSON type;
  ``"<timestamp>"``: an ISO 8601 UTC time as JavaScript prints it
  (``2025-01-02T03:04:05.678Z``);
- ``"<re:PATTERN>"``: a string in which the regular expression PATTERN is found;
- ``"<name>"``: a variable. Bound to the value on its first sight (any JSON value),
  compared with it on every later sight, in received and sent messages alike;
- a string with a bound ``<name>`` inside it (``"<tmp>/s.jsonl"``) has the value
  substituted, then is compared as text; unbound names inside text stay literal text;
- an object holding the key ``"..."`` may have keys it does not list; otherwise
  the key sets must be equal. Arrays match element by element, same length.

In a sent message the variables are replaced by their values, and
``"<repeat:N:TEXT>"`` becomes TEXT repeated N times (large tool outputs).
"""

from __future__ import annotations

import re
from typing import Any

PLACEHOLDER = re.compile(r"^<([A-Za-z_][A-Za-z0-9_]*)>$")
EMBEDDED = re.compile(r"<([A-Za-z_][A-Za-z0-9_]*)>")
REPEAT = re.compile(r"^<repeat:(\d+):(.*)>$", re.DOTALL)
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
PARTIAL_KEY = "..."


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


TYPES: dict[str, Any] = {
    "any": lambda value: True,
    "string": lambda value: isinstance(value, str),
    "number": _is_number,
    "integer": lambda value: isinstance(value, int) and not isinstance(value, bool),
    "boolean": lambda value: isinstance(value, bool),
    "object": lambda value: isinstance(value, dict),
    "array": lambda value: isinstance(value, list),
    "null": lambda value: value is None,
    "timestamp": lambda value: isinstance(value, str) and TIMESTAMP.match(value) is not None,
}


class Mismatch(AssertionError):
    """Where and how a received message differs from the example."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"at {where}: {problem}")
        self.where = where
        self.problem = problem


def _show(value: Any, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


class Bindings:
    """The variables of one scenario: predefined ones, then those bound on first sight."""

    def __init__(self, predefined: dict[str, Any] | None = None) -> None:
        self.values: dict[str, Any] = dict(predefined or {})

    def __contains__(self, name: str) -> bool:
        return name in self.values

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    # -- expected (received) messages

    def match(self, expected: Any, actual: Any, where: str = "$") -> None:
        """Raise ``Mismatch`` unless ``actual`` matches ``expected``; bind new variables.

        A failed match may leave variables bound from its first part; the scenario
        fails anyway, so that does not matter.
        """
        if isinstance(expected, str):
            self._match_string(expected, actual, where)
        elif isinstance(expected, dict):
            self._match_object(expected, actual, where)
        elif isinstance(expected, list):
            if not isinstance(actual, list):
                raise Mismatch(where, f"expected an array, got {_show(actual)}")
            if len(expected) != len(actual):
                raise Mismatch(
                    where,
                    f"expected {len(expected)} elements, got {len(actual)}: {_show(actual)}",
                )
            for index, (item, value) in enumerate(zip(expected, actual)):
                self.match(item, value, f"{where}[{index}]")
        elif isinstance(expected, bool) or expected is None:
            if actual is not expected:
                raise Mismatch(where, f"expected {expected!r}, got {_show(actual)}")
        elif _is_number(expected):
            if not _is_number(actual) or actual != expected:
                raise Mismatch(where, f"expected {expected!r}, got {_show(actual)}")
        else:
            raise Mismatch(where, f"the example holds a non-JSON value {expected!r}")

    def _match_string(self, expected: str, actual: Any, where: str) -> None:
        if expected.startswith("<re:") and expected.endswith(">"):
            pattern = expected[4:-1]
            if not isinstance(actual, str) or re.search(pattern, actual) is None:
                raise Mismatch(where, f"expected text matching /{pattern}/, got {_show(actual)}")
            return
        placeholder = PLACEHOLDER.match(expected)
        if placeholder is not None:
            name = placeholder.group(1)
            if name in TYPES:
                if not TYPES[name](actual):
                    raise Mismatch(where, f"expected {expected}, got {_show(actual)}")
                return
            if name in self.values:
                bound = self.values[name]
                if not _same(bound, actual):
                    raise Mismatch(
                        where,
                        f"<{name}> was bound to {_show(bound)}, got {_show(actual)}",
                    )
                return
            self.values[name] = actual
            return
        text = self.substitute_text(expected)
        if actual != text:
            raise Mismatch(where, f"expected {_show(text)}, got {_show(actual)}")

    def _match_object(self, expected: dict[str, Any], actual: Any, where: str) -> None:
        if not isinstance(actual, dict):
            raise Mismatch(where, f"expected an object, got {_show(actual)}")
        partial = PARTIAL_KEY in expected
        wanted = [key for key in expected if key != PARTIAL_KEY]
        missing = [key for key in wanted if key not in actual]
        if missing:
            raise Mismatch(where, f"missing keys {missing} in {_show(actual)}")
        if not partial:
            extra = sorted(set(actual) - set(wanted))
            if extra:
                raise Mismatch(where, f"unexpected keys {extra} in {_show(actual)}")
        for key in wanted:
            self.match(expected[key], actual[key], f"{where}.{key}")

    # -- sent messages

    def substitute(self, template: Any) -> Any:
        """A message to send: variables replaced by their values, repeats expanded."""
        if isinstance(template, str):
            repeat = REPEAT.match(template)
            if repeat is not None:
                return repeat.group(2) * int(repeat.group(1))
            placeholder = PLACEHOLDER.match(template)
            if placeholder is not None:
                name = placeholder.group(1)
                if name not in self.values:
                    raise AssertionError(f"the example sends <{name}> before it was bound")
                return self.values[name]
            return self.substitute_text(template)
        if isinstance(template, dict):
            return {key: self.substitute(value) for key, value in template.items()}
        if isinstance(template, list):
            return [self.substitute(item) for item in template]
        return template

    def substitute_text(self, text: str) -> str:
        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            value = self.values.get(name)
            return value if isinstance(value, str) else match.group(0)

        return EMBEDDED.sub(replace, text)


def _same(left: Any, right: Any) -> bool:
    """JSON equality (``true`` is not ``1``, ``1`` is ``1.0``)."""
    if isinstance(left, bool) or isinstance(right, bool) or left is None or right is None:
        return left is right
    if _is_number(left) or _is_number(right):
        return _is_number(left) and _is_number(right) and left == right
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_same(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(_same(a, b) for a, b in zip(left, right))
    return isinstance(left, str) and isinstance(right, str) and left == right
