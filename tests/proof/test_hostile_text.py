"""Text from outside is read in linear time: error messages, summaries and conversations.

Four readers of untrusted text backtracked badly on crafted input, found by feeding
every reader long runs of short units and comparing the time at n and 4n characters:

- Overflow detection (``isContextOverflow``'s patterns) matched ``a.*b.*c`` whole:
  15 KB of "input too long " took two minutes, on the event loop, at the end of a turn.
  An error message comes from a provider, a session file or a client's append.
- Replacing a summary's file tags (``\\s*<read-files>.*?</read-files>``) rescanned from
  every space: a model answering 100 KB of spaces cost 44 s.
- The offline summarizer's URL and wrapped-summary patterns rescanned to the end from
  every word start: a 400 KB line of "a-a-a-..." took a minute.
- Scrubbing key-shaped text from provider errors looked for a digit to the end of the
  run from every "sk-" in it: 120 KB of "sk-sk-..." took 110 s.

Each reader must decide exactly as the regular expressions it replaced (checked on
random texts against them) and finish texts of a few hundred KB in a small fraction of
the bound below; quadratic or cubic readers take minutes to hours on them.
"""

from __future__ import annotations

import json
import random
import re
import secrets
import time
from collections.abc import Callable

import pytest

from sessiond.core.fileops import strip_file_tags, with_file_tags
from sessiond.core.overflow import is_overflow_error_message
from sessiond.llm.base import CompletionRequest
from sessiond.llm.extractive import extractive_summary

# Linear readers take well under a second on these texts on a loaded 2-core machine.
BOUND_S = 10.0

# The overflow patterns as written in pi-ai 1.6.0 and oh-my-pi, with JavaScript's ``.``
# (which stops at every line terminator), as the reference the new matcher must equal.
_JS_DOT = "[^\n\r\u2028\u2029]"
_REFERENCE_PATTERNS = (
    r"prompt (?:is )?too long|prompt exceeds max length"
    r"|input is too long for requested model|exceeds the context window"
    r"|exceeds (?:the )?(?:model'?s )?maximum context length(?: of [\d,]+ tokens?|\s*\([\d,]+\))"
    r"|context window exceeded"
    r"|exceeds (?:the )?maximum allowed input length of [\d,]+ tokens?"
    r"|input \(\d+ tokens\) is longer than the model'?s context length \(\d+ tokens\)"
    r"|prompt has [\d,]+ tokens?, but the configured context size is [\d,]+ tokens?"
    r"|range of input length should be"
    r"|^(?:[\w -]+ API error \(413\):|413(?:\s|:|$))"
    r"|input token count.*exceeds the maximum|maximum prompt length is \d+"
    r"|reduce the length of the messages|maximum context length is \d+ tokens"
    r"|exceeds the limit of \d+|exceeds the available context size"
    r"|greater than the context length|context window exceeds limit"
    r"|exceeded model token limit|too large for model with \d+ maximum context length"
    r"|model_context_window_exceeded|prompt too long; exceeded (?:max )?context length"
    r"|context[_ ]length[_ ]exceeded|too many tokens|token limit exceeded"
    r"|requested tokens?.*exceed.*context (window|length|size)"
    r"|context (window|length|size).*(exceeded|overflow|too small)"
    r"|(prompt|input).*(too long|too large).*(context|n_ctx)"
    r"|requested tokens?.*(exceeds?|greater than).*(n_ctx|context)"
    r"|request_too_large|request exceeds the maximum size|payload too large|entity too large"
    r"|\b413\b.*\b(request|payload|entity)\b.*\btoo large\b"
).replace(".*", _JS_DOT + "*")
_REFERENCE = re.compile(_REFERENCE_PATTERNS, re.IGNORECASE)
_REFERENCE_NO_BODY = re.compile(r"^4(00|13)\s*(status code)?\s*\(no body\)", re.IGNORECASE)
_REFERENCE_NOT = re.compile(
    r"^(?:Throttling error|Service unavailable):|rate limit|too many requests", re.IGNORECASE
)


def reference_overflow(text: str) -> bool:
    if _REFERENCE_NOT.search(text):
        return False
    return bool(_REFERENCE.search(text) or _REFERENCE_NO_BODY.search(text))


def reference_strip_file_tags(text: str) -> str:
    return re.sub(r"\s*<(read-files|modified-files)>.*?</\1>", "", text, flags=re.DOTALL)


def random_texts(pieces: list[str], count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 9))) for _ in range(count)]


def timed(read: Callable[[str], object], text: str) -> float:
    started = time.perf_counter()
    read(text)
    return time.perf_counter() - started


OVERFLOW_PIECES = [
    "input", "prompt", " too long", "too large", " context", "n_ctx", "requested token", "s",
    " exceed", "exceeds", "greater than", "413", " request", "payload", "entity", "window",
    "length", "size", "exceeded", "overflow", "too small", "\n", "\r", "\u2028", " ", "x",
    "_", "400", "status code", "(no body)", "input token count", " exceeds the maximum",
    "rate limit", "TOO LARGE", "1",
]  # fmt: skip


def test_overflow_is_decided_as_pis_patterns_decide_it() -> None:
    texts = random_texts(OVERFLOW_PIECES, 40_000, seed=7)
    found = 0
    for text in texts:
        expected = reference_overflow(text)
        assert is_overflow_error_message(text) == expected, repr(text)
        found += expected
    # The sample must exercise both answers, the chained patterns' among them.
    assert 200 < found < len(texts) - 200
    assert is_overflow_error_message("The input was too long for the context window")
    assert not is_overflow_error_message("input too long\nfor the context window")
    assert not is_overflow_error_message("input too long\rfor the context window")


@pytest.mark.parametrize(
    "text",
    [
        "input too long " * 30_000,
        "requested tokens exceed " * 20_000,
        "x 413 request " * 40_000,
        "context window " * 30_000,
        "400" + " " * 500_000,
        "input token count " * 30_000,
    ],
    ids=["prompt-too-long", "requested-exceed", "413-request", "context", "no-body", "gemini"],
)
def test_a_crafted_error_message_is_read_in_linear_time(text: str) -> None:
    assert not is_overflow_error_message(text)
    assert timed(is_overflow_error_message, text) < BOUND_S


def test_file_tags_are_replaced_as_before() -> None:
    pieces = ["<read-files>", "</read-files>", "<modified-files>", "</modified-files>", " ",
              "\n", "a", "x y", "<read-files", "\t"]  # fmt: skip
    for text in random_texts(pieces, 40_000, seed=11):
        assert strip_file_tags(text) == reference_strip_file_tags(text), repr(text)
    summary = "## Goal\nx\n\n<read-files>\na.py\n</read-files>\n\n<modified-files>\nb.py\n</modified-files>"
    assert (
        with_file_tags(summary, ["c.py"], []) == "## Goal\nx\n\n<read-files>\nc.py\n</read-files>"
    )


@pytest.mark.parametrize(
    "text",
    [" " * 400_000, "<read-files>" * 40_000, "<read-files> </modified-files>\n" * 15_000],
    ids=["spaces", "unclosed", "mismatched"],
)
def test_a_crafted_summary_has_its_file_tags_replaced_in_linear_time(text: str) -> None:
    assert timed(lambda t: with_file_tags(t, ["a.py"], ["b.py"]), text) < BOUND_S


def summarize(text: str) -> str:
    code = json.dumps(text)
    todos = json.dumps([{"content": text, "status": "pending"}])
    prompt = (
        f"<conversation>\n[User]: {text}\n\n[Assistant]: {text}\n\n[Tool result]: {text}"
        f'\n\n[Assistant tool calls]: edit(path="x.py", oldText={code}, newText={code})'
        "\n\n[Tool result]: Successfully replaced text in x.py."
        # The rules that read tools' arguments and results: a file read, a search and what
        # it found, a patch, a task list, a tool that makes things elsewhere, a
        # sub-agent's report and a command's output (commits).
        f"\n\n[Assistant tool calls]: Read(file_path={code}); Grep(pattern={code}, path={code})"
        f"; apply_patch(input={code}); TodoWrite(todos={todos}); TaskCreate(subject={code})"
        f'; mcp__t__create_issue(title={code}); Task(prompt={code}); bash(command="git commit")'
        + f"\n\n[Tool result]: {text}" * 8
        + f"\n</conversation>\n\n<previous-summary>\n{text}\n</previous-summary>"
    )
    return extractive_summary(
        CompletionRequest(system_prompt="", prompt=prompt, max_tokens=4000, purpose="update")
    )


@pytest.mark.parametrize(
    "unit",
    [
        "a-",
        "a.",
        "-a",
        ".a",
        "<summary>",
        "<read-files>\na\n",
        "a_",
        "aB",
        "a/",
        # The rules on names, sentences and requests (code font, member chains, file
        # names, declarations, headings, tables, commands, notes).
        "a.b",
        "`a` ",
        "`",
        "aB.",
        "a_b.",
        "a.md ",
        "fn a\n",
        "# a\n",
        "| a\n",
        "/a\n",
        "[a]\n",
        "<a>\n",
        "I ",
        # The rules on tools' results and changes (commits, search hits, patches,
        # declarations read, numbered lines, task numbers).
        "[a 1234567] b\n",
        "a/b:1: c\n",
        "+a\n",
        "-a\n",
        "type a,\n",
        "  1→a\n",
        "#1 ",
        "a(",
    ],
)
def test_the_offline_summary_of_a_crafted_conversation_takes_linear_time(unit: str) -> None:
    text = unit * (200_000 // len(unit))
    assert timed(summarize, text) < BOUND_S


def test_key_shaped_text_is_scrubbed_in_linear_time() -> None:
    from sessiond.llm.errors import scrub

    crafted = "sk-" * 60_000
    assert timed(lambda t: scrub(t, []), crafted) < BOUND_S
    assert scrub(crafted, []) == crafted, "no digit: not a key"
    # Fresh keys: scrubbing also removes pieces of secrets other tests made known.
    bearer, key = "z" + secrets.token_hex(12), "sk-" + secrets.token_hex(16)
    leaked = f"proxy said: Bearer {bearer} and {key}, sorry"
    assert scrub(leaked, []) == "proxy said: [redacted] and [redacted], sorry"
