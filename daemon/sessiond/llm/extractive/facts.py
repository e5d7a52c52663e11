"""What the rules read out of a parsed conversation: turns, tool actions and their outcome.

A turn is a user request and everything up to the next one. Each tool call is
paired with the tool result that answers it (results follow their calls in
order, as pi serializes them), so that an edit counts as made only when its
result is not an error, and a command as passed only when its output shows no
failure. Nothing here judges importance; ``build`` does that.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from sessiond.llm.extractive.names import code_words, declared, declared_functions
from sessiond.llm.extractive.parse import ParsedPrompt, Part, unwrap_summary
from sessiond.llm.extractive.text import unique

_COMMAND_KEYS = ("command", "cmd", "script")
# Where edit and write calls carry the new text, where edits carry the old, and where a
# patch tool carries its diff.
_NEW_KEYS = ("newText", "new_text", "new_string", "newString", "content", "new_source")
_OLD_KEYS = ("oldText", "old_text", "old_string", "oldString")
_PATCH_KEYS = ("patch", "diff", "input")
# Names an edit brought in beyond what it declares, at most (a file written whole
# would otherwise list every identifier in it).
_MAX_ADDED = 16
_PATH_KEYS = ("path", "file_path", "filePath", "file", "notebook_path")
_WRITE_TOOLS = frozenset(
    {"write", "edit", "multiedit", "multi_edit", "apply_patch", "notebookedit"}
)
_READ_TOOLS = frozenset({"read", "view", "cat", "open"})
# Tools that hand a task to a sub-agent, whose result is that agent's report.
_DELEGATE_TOOLS = frozenset({"task", "agent", "subagent", "sub_agent", "dispatch_agent"})
# A tool that failed says so on its first line (pi's edit, read and write errors do).
_FAILED_START = re.compile(
    r"^\s*(error\b|could not|couldn't|cannot|can't|failed|failure|no such file|not found"
    r"|file not found|permission denied|enoent|eacces|invalid\b|unknown\b|aborted|refused)",
    re.IGNORECASE,
)
# A command failed when its exit status says so; some tools print only a summary.
_FAILED_COMMAND = re.compile(
    r"exited with (?:code|status) [1-9]|exit (?:code|status):? [1-9]|command not found"
    r"|\b[1-9]\d* (?:failed|errors?)\b|^FAIL(?:ED)?\b|Traceback \(most recent call last\)",
    re.IGNORECASE | re.MULTILINE,
)
# A compiler's or checker's diagnostic at the start of a line, as tsc ("a.ts(3,5): error
# TS2307: ..."), rustc ("error[E0599]: ...") and gcc, clang or mypy ("a.py:3: error: ...")
# write them: the check failed even when a pipe (``| tail``) hid its exit status.
_DIAGNOSTIC = re.compile(
    r"^(?:[^\s:()]{1,300}(?:\(\d{1,7},\d{1,7}\)|:\d{1,7}(?::\d{1,7})?):? )?"
    r"error(?:\[E\d{1,5}\]| TS\d{1,5})?: ",
    re.MULTILINE,
)
_ERROR_LINE = re.compile(
    r"\b(error|exception|traceback|failed|failure|fatal|panic|denied|no such file|not found"
    r"|cannot|can't|could not|unable to|segmentation fault|assert)",
    re.IGNORECASE,
)
_EXIT_LINE = re.compile(r"exited with (code|status) \d+|exit (code|status):? \d+", re.IGNORECASE)
_NO_ERROR = re.compile(r"\b(0|no) (failed|failures|errors?)\b", re.IGNORECASE)
# A shell run the user made themselves (pi's "!command"), as the model is shown it
# (``core.convert.bash_execution_text``): a command and its output, not a request.
_USER_SHELL_RUN = re.compile(r"Ran `(.+)`\n")


@dataclass
class Action:
    """One tool call and, once its result is read, whether it worked."""

    tool: str
    path: str | None = None
    command: str | None = None
    answered: bool = False
    error: str | None = None
    # Functions and types the call's new text declares (edits and writes).
    defines: tuple[str, ...] = ()
    # Code-shaped names the new text has and the replaced text had not.
    added: tuple[str, ...] = ()
    # Which of the declared names are functions.
    functions: frozenset[str] = frozenset()
    # The lines the new text brought, and those it took away (edits and writes).
    added_lines: tuple[str, ...] = ()
    removed_lines: tuple[str, ...] = ()
    # The call's arguments and the text of its result, for the rules that read them
    # (a change's lines, a search's pattern, a task list).
    args: dict[str, object] = field(default_factory=dict)
    result: str = ""

    @property
    def succeeded(self) -> bool:
        return self.answered and self.error is None

    @property
    def writes(self) -> bool:
        return self.tool.lower() in _WRITE_TOOLS

    @property
    def reads(self) -> bool:
        return self.tool.lower() in _READ_TOOLS


@dataclass
class TurnFacts:
    """A user request (None for what came before the first one) and the work after it."""

    request: str | None
    actions: list[Action] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)
    # Whether the last thing in the turn is the assistant's text: the turn was answered.
    ended_with_reply: bool = False

    @property
    def final_reply(self) -> str | None:
        return self.replies[-1] if self.ended_with_reply and self.replies else None


@dataclass
class Facts:
    turns: list[TurnFacts] = field(default_factory=list)
    earlier_summaries: list[str] = field(default_factory=list)
    additional_context: list[str] = field(default_factory=list)
    focus: str | None = None
    last_tool_result: str | None = None
    size: int = 0
    # The assistant's reasoning: read for the names it works with, never quoted.
    thoughts: list[str] = field(default_factory=list)
    # What sub-agents the assistant delegated to reported back: the assistant's work too.
    reports: list[str] = field(default_factory=list)
    # What the rules worked out once for this conversation: a summary is rendered again
    # at smaller sizes from the same facts.
    memo: dict[object, object] = field(default_factory=dict)

    @property
    def requests(self) -> list[str]:
        return [turn.request for turn in self.turns if turn.request is not None]

    @property
    def actions(self) -> list[Action]:
        return [action for turn in self.turns for action in turn.actions]

    @property
    def replies(self) -> list[str]:
        return [reply for turn in self.turns for reply in turn.replies]

    @property
    def last_reply(self) -> str | None:
        replies = self.replies
        return replies[-1] if replies else None

    @property
    def pending_request(self) -> str | None:
        """The last request when the assistant did nothing at all after it."""
        if self.turns:
            last = self.turns[-1]
            if last.request is not None and not last.actions and not last.replies:
                return last.request
        return None

    @property
    def files_modified(self) -> list[str]:
        return _paths(action for action in self.actions if action.writes)

    @property
    def files_changed(self) -> list[str]:
        """Files an edit or write succeeded on."""
        return _paths(action for action in self.actions if action.writes and action.succeeded)

    @property
    def files_read(self) -> list[str]:
        return _paths(action for action in self.actions if action.reads)

    @property
    def files_only_read(self) -> list[str]:
        """Files read and not changed (pi's rule, but only successful changes count)."""
        modified = set(self.files_changed)
        return [path for path in self.files_read if path not in modified]


def _paths(actions: Iterable[Action]) -> list[str]:
    seen: dict[str, None] = {}
    for action in actions:
        if action.path:
            seen.setdefault(action.path, None)
    return list(seen)


def extract(parsed: ParsedPrompt) -> Facts:
    facts = Facts(additional_context=list(parsed.additional_context), focus=parsed.focus)
    waiting: deque[Action] = deque()
    for part in parsed.parts:
        facts.size += len(part.text)
        _read_part(facts, part, waiting)
    return facts


def _current(facts: Facts) -> TurnFacts:
    if not facts.turns:
        facts.turns.append(TurnFacts(request=None))
    return facts.turns[-1]


def _read_part(facts: Facts, part: Part, waiting: deque[Action]) -> None:
    if part.role == "user":
        summary = unwrap_summary(part.text)
        if summary is not None:
            facts.earlier_summaries.append(summary)
            return
        shell_run = _USER_SHELL_RUN.match(part.text)
        if shell_run is not None:
            output = part.text[shell_run.end() :]
            action = Action(tool="bash", command=shell_run.group(1).strip(), answered=True)
            action.error = result_error(output, command=True)
            _current(facts).actions.append(action)
            return
        request = part.text.strip()
        if request:
            _silent(waiting)
            facts.turns.append(TurnFacts(request=request))
    elif part.role == "assistant":
        _silent(waiting)
        text = part.text.strip()
        if text:
            turn = _current(facts)
            turn.replies.append(text)
            turn.ended_with_reply = True
    elif part.role == "thinking":
        if part.text.strip():
            facts.thoughts.append(part.text)
    elif part.role == "toolCalls":
        turn = _current(facts)
        turn.ended_with_reply = False
        _silent(waiting)
        for call in part.calls:
            action = Action(tool=call.name, path=_first_str(call.args, _PATH_KEYS), args=call.args)
            command = _first_str(call.args, _COMMAND_KEYS)
            if command is not None:
                action.command = command.strip()
            if action.writes:
                action.defines, action.added = changed_names(call.args)
                action.functions = frozenset(declared_functions(_new_text(call.args)))
                action.added_lines, action.removed_lines = changed_lines(call.args)
            turn.actions.append(action)
            waiting.append(action)
    elif part.role == "toolResult":
        facts.last_tool_result = part.text
        _current(facts).ended_with_reply = False
        if waiting:
            action = _answered_by(waiting, part.text)
            action.answered = True
            action.result = part.text
            action.error = result_error(part.text, command=action.command is not None)
            if action.tool.lower() in _DELEGATE_TOOLS and action.error is None:
                facts.reports.append(part.text)


def _silent(waiting: deque[Action]) -> None:
    """The calls whose results never came before the conversation went on. The prompt
    leaves an empty result out (a ``mkdir`` prints nothing), and a run that was stopped
    says so in a result, so these answered with nothing: they worked. Results follow the
    message that made their calls; a later message's results are not theirs."""
    while waiting:
        waiting.popleft().answered = True


def _answered_by(waiting: deque[Action], result: str) -> Action:
    """The waiting call a result answers: the oldest, unless the result names the file of
    a later one and not the oldest's (a file tool's "File created successfully at:
    PATH" after a silent command, whose empty result the prompt left out); the calls
    passed over answered with nothing."""
    first = waiting[0]
    if len(waiting) > 1 and not (first.path and first.path in result):
        for index, action in enumerate(waiting):
            if index and action.path and action.path in result:
                for _ in range(index):
                    waiting.popleft().answered = True
                break
    return waiting.popleft()


def _first_str(args: dict[str, object], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def changed_names(args: dict[str, object]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What an edit or write is about: the functions and types its new text declares,
    and the code-shaped names it brings in that the text it replaces did not have."""
    new = _new_text(args)
    old = "\n".join(_keyed_strings(args, _OLD_KEYS))
    defines = declared(new)
    before = set(code_words(old))
    added = [name for name in code_words(new) if name not in before and name not in defines]
    return tuple(defines), tuple(unique(added)[:_MAX_ADDED])


def changed_lines(args: dict[str, object]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The lines an edit or write brought and those it took away: of its new text, those
    the replaced text did not have, and the other way round; of a patch, its added and
    removed lines."""
    old_lines = [line for text in _keyed_strings(args, _OLD_KEYS) for line in text.splitlines()]
    new_lines = [line for text in _keyed_strings(args, _NEW_KEYS) for line in text.splitlines()]
    old = {line.strip() for line in old_lines}
    new = {line.strip() for line in new_lines}
    added = [line for line in new_lines if line.strip() and line.strip() not in old]
    removed = [line for line in old_lines if line.strip() and line.strip() not in new]
    for patch in _keyed_strings(args, _PATCH_KEYS):
        for line in patch.splitlines():
            if line.startswith("+") and not line.startswith("+++") and line[1:].strip():
                added.append(line[1:])
            elif line.startswith("-") and not line.startswith("---") and line[1:].strip():
                removed.append(line[1:])
    return tuple(added), tuple(removed)


def _new_text(args: dict[str, object]) -> str:
    return "\n".join(_keyed_strings(args, (*_NEW_KEYS, *_PATCH_KEYS)))


def _keyed_strings(args: dict[str, object], keys: tuple[str, ...]) -> list[str]:
    """The strings under any of ``keys`` in the arguments, however nested (pi's and
    Claude Code's multi-edits are lists of objects); walked with a stack, not recursion:
    the nesting is the transcript's to choose."""
    found: list[str] = []
    stack: list[tuple[object, bool]] = [(args, False)]
    while stack:
        item, wanted = stack.pop()
        if isinstance(item, str):
            if wanted:
                found.append(item)
        elif isinstance(item, list):
            stack.extend((value, wanted) for value in reversed(item))
        elif isinstance(item, dict):
            stack.extend(
                (value, wanted or key in keys) for key, value in reversed(list(item.items()))
            )
    return found


def result_error(text: str, *, command: bool) -> str | None:
    """The line that says a tool failed, or None when its result reads as a success."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if command:
        failed = _FAILED_COMMAND.search(text) is not None or _DIAGNOSTIC.search(text) is not None
    else:
        failed = _FAILED_START.match(first) is not None
    if not failed:
        return None
    return first_error_line(text) or first


def first_error_line(text: str) -> str | None:
    """The first line naming an error, preferring one that is not just an exit status."""
    fallback: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or _NO_ERROR.search(stripped) or not _ERROR_LINE.search(stripped):
            if stripped and _EXIT_LINE.search(stripped) and fallback is None:
                fallback = stripped
            continue
        if sum(char.isalnum() for char in stripped) < len(stripped) * 0.4:
            continue  # a rule of "=====" around a word is a heading, not the error
        if _EXIT_LINE.search(stripped):
            fallback = fallback or stripped
            continue
        return stripped
    return fallback
