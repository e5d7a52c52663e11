# ruff: noqa: E501  (the session's text is data: long literals read better unwrapped)
"""Write ``examples/sample-session.jsonl``: a small, readable pi session for the demo and README.

The story: a user asks a coding agent (pi with Claude Sonnet 4.5) to fix ``mdtoc``, a tiny
tool that prints a table of contents for Markdown files.

1. The first prompt is vague; the agent starts grepping the docs, the user aborts, goes back
   in the tree to the prompt and sends a clearer one (a branch without a summary).
2. Headings inside fenced code blocks must not appear in the table of contents.
3. Duplicate headings must get GitHub's ``-1``, ``-2`` anchors (with one overloaded-API
   error and its retry on the way).
4. The user compacts the session (the first part is summarized, the duplicate-heading work
   is kept), then runs ``!git status`` and asks for GitHub-style anchors for non-ASCII
   headings.
5. The user asks to try ``python-slugify`` instead; it transliterates, so the anchors stop
   matching GitHub. The user goes back in the tree with a summary of that attempt (pi's
   branch summary, labelled), and asks for a ``--max-depth`` flag instead.

Regenerate with ``python examples/make_sample.py`` from the repository root. The output is
deterministic. The compaction is the one pi's ``prepareCompaction`` computes at that point
with the ``keepRecentTokens`` this script prints (``keep_recent_tokens``).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from random import Random
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sessiond_testkit import pi_format as pf  # noqa: E402  (the repository root is not always on sys.path)

Json = dict[str, Any]
OUT = ROOT / "examples" / "sample-session.jsonl"
CWD = "/home/maya/code/mdtoc"
MODEL = pf.MODELS["claude-sonnet-4-5"]
SYSTEM_PROMPT_TOKENS = 4_870

# --- the project's files, as the agent reads them --------------------------------------

PARSER_PY = '''"""Find Markdown headings."""

from __future__ import annotations

import re
from dataclasses import dataclass

HEADING = re.compile(r"^(#{1,6})\\s+(.+?)\\s*#*\\s*$")


@dataclass(frozen=True)
class Heading:
    level: int
    title: str
    line: int


def parse_headings(text: str) -> list[Heading]:
    """Return every ATX heading in ``text``, in order."""
    headings = []
    for number, line in enumerate(text.splitlines(), start=1):
        match = HEADING.match(line)
        if match:
            headings.append(Heading(len(match[1]), match[2], number))
    return headings
'''

TEST_PARSER_PY = """from mdtoc.parser import Heading, parse_headings


def test_levels():
    text = "# Title\\n\\n## Install\\n\\n### From source\\n"
    assert parse_headings(text) == [
        Heading(1, "Title", 1),
        Heading(2, "Install", 3),
        Heading(3, "From source", 5),
    ]


def test_closing_hashes_are_dropped():
    assert parse_headings("## Usage ##")[0].title == "Usage"
"""

INSTALL_MD = """# Installing mdtoc

## With pip

```bash
# create a virtualenv first
python -m venv .venv
pip install mdtoc
```

## From source

~~~sh
# clone the repository
git clone https://example.org/maya/mdtoc
~~~
"""

SLUG_PY = '''"""Turn heading titles into anchors."""

from __future__ import annotations

import re

_DROP = re.compile(r"[^a-z0-9 -]")


def slugify(title: str) -> str:
    """GitHub-style anchor for ``title``."""
    return _DROP.sub("", title.lower()).replace(" ", "-")
'''

TOC_PY = '''"""Render the table of contents."""

from __future__ import annotations

from mdtoc.parser import Heading
from mdtoc.slug import slugify


def render(headings: list[Heading], max_level: int = 6) -> str:
    lines = []
    for h in headings:
        if h.level <= max_level:
            indent = "  " * (h.level - 1)
            lines.append(f"{indent}- [{h.title}](#{slugify(h.title)})")
    return "\\n".join(lines)
'''

CLI_PY = '''"""mdtoc command line."""

from __future__ import annotations

import argparse
from pathlib import Path

from mdtoc.parser import parse_headings
from mdtoc.toc import render


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mdtoc")
    parser.add_argument("file", type=Path)
    args = parser.parse_args(argv)
    print(render(parse_headings(args.file.read_text(encoding="utf-8"))))
    return 0
'''


class Session:
    """Appends entries the way pi's SessionManager does: each one a child of the leaf."""

    def __init__(self) -> None:
        self.rng = Random(20260514)
        self.ids = pf.IdMaker(self.rng)
        self.now = 1_778_749_925_123  # 2026-05-14T09:12:05.123Z
        self.lines: list[bytes] = []
        self.leaf: str | None = None
        self.entries: list[Json] = []
        self.context_tokens = 0  # estimateTokens of everything in the LLM context
        self.cached = 0
        self.call_n = 0

    def tick(self, seconds: float) -> None:
        self.now += int(seconds * 1000) + self.rng.randint(0, 999)

    def add(self, build: Any, *args: Any) -> str:
        id_ = self.ids()
        entry = build(id_, self.leaf, pf.iso(self.now), *args)
        self.entries.append(entry)
        self.lines.append(msgspec.json.encode(entry) + b"\n")
        self.leaf = id_
        return id_

    # messages

    def user(self, text: str, wait: float = 40) -> str:
        self.tick(wait)
        self.context_tokens += math.ceil(pf.js_len(text) / 4)
        msg = pf.user_message([pf.text_block(text)], self.now - 12)
        return self.add(pf.message_entry, msg)

    def call(self, name: str, **arguments: Any) -> Json:
        self.call_n += 1
        suffix = "".join(
            self.rng.choices("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz0123456789", k=20)
        )
        return pf.tool_call_block(f"toolu_01{suffix}", name, arguments)

    def assistant(
        self,
        *blocks: Json,
        stop: str | None = None,
        seconds: float = 6,
        error: str | None = None,
    ) -> str:
        content = list(blocks)
        stop = stop or ("toolUse" if any(b["type"] == "toolCall" for b in content) else "stop")
        chars = 0
        for b in content:
            if b["type"] == "text":
                chars += pf.js_len(b["text"])
            elif b["type"] == "thinking":
                chars += pf.js_len(b["thinking"])
            elif b["type"] == "toolCall":
                chars += len(b["name"]) + pf.js_len(msgspec.json.encode(b["arguments"]).decode())
        tokens = math.ceil(chars / 4)
        start = self.now + 300
        self.now = start + int(seconds * 1000)
        if stop == "error":
            usage = pf.usage(MODEL, 0, 0, 0, 0)
            response_id = None
        else:
            prompt = SYSTEM_PROMPT_TOKENS + self.context_tokens
            input_ = self.rng.randint(3, 9)
            cache_read = min(self.cached, prompt - input_)
            out = tokens + self.rng.randint(4, 40) if stop != "aborted" else tokens
            usage = pf.usage(MODEL, input_, out, cache_read, prompt - input_ - cache_read)
            self.cached = prompt
            response_id = "msg_01" + "".join(
                self.rng.choices(
                    "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz0123456789", k=22
                )
            )
        self.context_tokens += tokens
        msg = pf.assistant_message(MODEL, content, usage, stop, start, response_id, error)
        return self.add(pf.message_entry, msg)

    def result(self, call: Json, text: str, is_error: bool = False, details: Any = None) -> str:
        self.tick(0.4 if call["name"] != "bash" else 2.5)
        self.context_tokens += math.ceil(pf.js_len(text) / 4)
        if is_error and details is None:
            details = {}
        msg = pf.tool_result_message(
            call["id"], call["name"], [pf.text_block(text)], is_error, self.now - 1, details
        )
        return self.add(pf.message_entry, msg)

    def write(self, path: Path) -> None:
        path.write_bytes(b"".join(self.lines))


def thinking(text: str, s: Session) -> Json:
    sig_chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    signature = "".join(s.rng.choices(sig_chars, k=344))
    return pf.thinking_block(text, signature)


def text(t: str) -> Json:
    return pf.text_block(t)


def diff(first: int, removed: list[str], added: list[str]) -> str:
    width = len(str(first + max(len(removed), len(added)) + 1))
    out = [f" {str(first - 1).rjust(width)} ..."]
    out += [f"-{str(first + i).rjust(width)} {line}" for i, line in enumerate(removed)]
    out += [f"+{str(first + i).rjust(width)} {line}" for i, line in enumerate(added)]
    return "\n".join(out)


def edit_result(s: Session, call: Json, first: int) -> str:
    edits = call["arguments"]["edits"]
    removed = edits[0]["oldText"].split("\n")
    added = edits[0]["newText"].split("\n")
    path = call["arguments"]["path"]
    return s.result(
        call,
        f"Successfully replaced {len(edits)} block(s) in {path}.",
        details={"diff": diff(first, removed, added), "firstChangedLine": first},
    )


def build() -> tuple[Session, dict[str, str]]:
    s = Session()
    ids: dict[str, str] = {}
    header_ts = pf.iso(s.now)
    session_id = pf.uuid7(s.now, s.rng)
    s.lines.append(msgspec.json.encode(pf.header(session_id, header_ts, CWD)) + b"\n")
    s.tick(0.01)
    s.add(pf.model_change_entry, MODEL)
    ids["thinking"] = s.add(pf.thinking_level_entry, "medium")

    # 1. A vague first prompt, aborted, then edited in the tree.
    s.user("the table of contents is wrong for some of my docs, can you fix it?", wait=25)
    c = s.call("grep", pattern="toc", path="docs")
    s.assistant(
        thinking(
            "The user says the TOC is wrong for some docs. No example given; let me look for docs that use a TOC.",
            s,
        ),
        c,
    )
    s.result(
        c,
        "docs/usage.md:3: <!-- toc -->\ndocs/usage.md:12: <!-- tocstop -->\ndocs/faq.md:1: ## Why is my toc empty?",
    )
    s.assistant(
        thinking("Let me open docs/usage.md and compare its headings with", s),
        stop="aborted",
        seconds=2,
        error="Request was aborted",
    )
    ids["aborted"] = s.leaf or ""
    # /tree → the first prompt: pi moves the leaf to its parent and puts the text back in the
    # editor; nothing is written until the edited prompt is sent.
    s.leaf = ids["thinking"]
    s.context_tokens = 0
    s.cached = 0

    # 2. Headings inside code fences.
    ids["prompt"] = s.user(
        "mdtoc puts the `# comments` from inside ```bash code blocks into the table of contents. "
        'Repro: `python -m mdtoc examples/install.md` lists "create a virtualenv first" as a '
        "heading. Can you fix that? Fences with ~~~ should work too.",
        wait=70,
    )
    c = s.call("ls", path=".")
    s.assistant(thinking("Start by getting the layout of the project.", s), c, seconds=3)
    s.result(c, ".github/\nREADME.md\nexamples/\npyproject.toml\nsrc/\ntests/")
    c1 = s.call("read", path="src/mdtoc/parser.py")
    c2 = s.call("read", path="tests/test_parser.py")
    s.assistant(text("Let me look at the parser and its tests."), c1, c2, seconds=3)
    s.result(c1, PARSER_PY)
    s.result(c2, TEST_PARSER_PY)
    c = s.call("bash", command="python -m mdtoc examples/install.md")
    s.assistant(
        thinking(
            "parse_headings looks at every line on its own, so a line starting with '#' inside a "
            "fence matches HEADING. Reproduce first.",
            s,
        ),
        c,
    )
    s.result(
        c,
        "- [Installing mdtoc](#installing-mdtoc)\n  - [With pip](#with-pip)\n"
        "- [create a virtualenv first](#create-a-virtualenv-first)\n  - [From source](#from-source)\n"
        "- [clone the repository](#clone-the-repository)",
    )
    c = s.call("read", path="examples/install.md")
    s.assistant(
        text("Reproduced: both comment lines inside the fences show up as level-1 headings."),
        c,
        seconds=2,
    )
    s.result(c, INSTALL_MD)
    old = (
        "    headings = []\n    for number, line in enumerate(text.splitlines(), start=1):\n"
        "        match = HEADING.match(line)"
    )
    new = (
        "    headings = []\n    in_fence = False\n"
        "    for number, line in enumerate(text.splitlines(), start=1):\n"
        '        if line.lstrip().startswith("```"):\n            in_fence = not in_fence\n'
        "            continue\n        if in_fence:\n            continue\n"
        "        match = HEADING.match(line)"
    )
    c = s.call("edit", path="src/mdtoc/parser.py", edits=[{"oldText": old, "newText": new}])
    s.assistant(
        text("I'll track whether we are inside a fenced block and skip those lines."),
        c,
        seconds=9,
    )
    edit_result(s, c, 20)
    test_add = (
        "\n\ndef test_headings_inside_fences_are_ignored():\n"
        '    text = "# Real\\n\\n```bash\\n# not a heading\\n```\\n\\n~~~\\n# nor this\\n~~~\\n"\n'
        '    assert [h.title for h in parse_headings(text)] == ["Real"]\n'
    )
    old_t = '    assert parse_headings("## Usage ##")[0].title == "Usage"\n'
    c = s.call(
        "edit", path="tests/test_parser.py", edits=[{"oldText": old_t, "newText": old_t + test_add}]
    )
    s.assistant(text("And a regression test covering both fence styles."), c, seconds=7)
    edit_result(s, c, 15)
    c = s.call("bash", command="python -m pytest -q")
    s.assistant(c, seconds=2)
    failing = (
        ".F..                                                                     [100%]\n"
        "=================================== FAILURES ===================================\n"
        "__________________ test_headings_inside_fences_are_ignored ___________________\n\n"
        "    def test_headings_inside_fences_are_ignored():\n"
        '        text = "# Real\\n\\n```bash\\n# not a heading\\n```\\n\\n~~~\\n# nor this\\n~~~\\n"\n'
        '>       assert [h.title for h in parse_headings(text)] == ["Real"]\n'
        "E       AssertionError: assert ['Real', 'nor this'] == ['Real']\n"
        "E         Left contains one more item: 'nor this'\n\n"
        "tests/test_parser.py:19: AssertionError\n"
        "=========================== short test summary info ============================\n"
        "FAILED tests/test_parser.py::test_headings_inside_fences_are_ignored - Assertion...\n"
        "1 failed, 3 passed in 0.04s\n\n"
        "Command exited with code 1"
    )
    s.result(c, failing, is_error=True)
    old2 = (
        '        if line.lstrip().startswith("```"):\n            in_fence = not in_fence\n'
        "            continue\n        if in_fence:\n            continue"
    )
    new2 = (
        "        fence = FENCE.match(line)\n"
        "        if fence and (opener is None or fence[1][0] == opener[0] and len(fence[1]) >= len(opener)):\n"
        "            opener = None if opener else fence[1]\n            continue\n"
        "        if opener:\n            continue"
    )
    c = s.call(
        "edit",
        path="src/mdtoc/parser.py",
        edits=[
            {"oldText": old2, "newText": new2},
            {"oldText": "    in_fence = False\n", "newText": "    opener: str | None = None\n"},
            {
                "oldText": 'HEADING = re.compile(r"^(#{1,6})\\s+(.+?)\\s*#*\\s*$")\n',
                "newText": 'HEADING = re.compile(r"^(#{1,6})\\s+(.+?)\\s*#*\\s*$")\nFENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")\n',
            },
        ],
    )
    s.assistant(
        thinking(
            "Tilde fences are not handled, and a fence must be closed by the same character "
            "with at least the same length (CommonMark). Use a regex and remember the opener.",
            s,
        ),
        c,
        seconds=12,
    )
    edit_result(s, c, 8)
    c = s.call("bash", command="python -m pytest -q && python -m mdtoc examples/install.md")
    s.assistant(c, seconds=2)
    s.result(
        c,
        "....                                                                     [100%]\n4 passed in 0.03s\n"
        "- [Installing mdtoc](#installing-mdtoc)\n  - [With pip](#with-pip)\n  - [From source](#from-source)",
    )
    ids["fence_done"] = s.assistant(
        text(
            "Fixed. `parse_headings` in `src/mdtoc/parser.py` now skips fenced code blocks:\n\n"
            "- a fence opens with three or more backticks or tildes (up to three spaces of indent);\n"
            "- it closes only with the same character and at least the same length, as in CommonMark;\n"
            "- `tests/test_parser.py` has a regression test with both fence styles.\n\n"
            "`python -m mdtoc examples/install.md` now lists only the three real headings."
        ),
        seconds=8,
    )

    # 3. Duplicate headings.
    ids["dupes"] = s.user(
        "Nice. Next bug: README.md has two `## Usage` sections and both links point to #usage. "
        "GitHub names the second one #usage-1.",
        wait=95,
    )
    c1 = s.call("read", path="src/mdtoc/slug.py")
    c2 = s.call("read", path="src/mdtoc/toc.py")
    s.assistant(c1, c2, seconds=3)
    s.result(c1, SLUG_PY)
    s.result(c2, TOC_PY)
    s.assistant(
        stop="error",
        seconds=1,
        error='529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},'
        '"request_id":"req_011CVm4hTqRZ2bXpa9cKJw3N"}',
    )
    old_s = 'def slugify(title: str) -> str:\n    """GitHub-style anchor for ``title``."""\n    return _DROP.sub("", title.lower()).replace(" ", "-")\n'
    new_s = (
        old_s + "\n\nclass Slugger:\n"
        '    """Unique anchors within one document: repeats get -1, -2, ... like GitHub."""\n\n'
        "    def __init__(self) -> None:\n        self._seen: dict[str, int] = {}\n\n"
        "    def slug(self, title: str) -> str:\n        base = slugify(title)\n"
        "        n = self._seen.get(base, 0)\n        self._seen[base] = n + 1\n"
        '        return base if n == 0 else f"{base}-{n}"\n'
    )
    c = s.call("edit", path="src/mdtoc/slug.py", edits=[{"oldText": old_s, "newText": new_s}])
    s.assistant(
        thinking(
            "slugify is stateless; uniqueness needs per-document state. Add a Slugger and use it in render().",
            s,
        ),
        text(
            "Anchors need to be unique per document, so I'll add a small `Slugger` that counts repeats."
        ),
        c,
        seconds=10,
    )
    edit_result(s, c, 9)
    old_r = "    lines = []\n    for h in headings:"
    new_r = "    lines = []\n    slugger = Slugger()\n    for h in headings:"
    old_l = '            lines.append(f"{indent}- [{h.title}](#{slugify(h.title)})")'
    new_l = '            lines.append(f"{indent}- [{h.title}](#{slugger.slug(h.title)})")'
    c = s.call(
        "edit",
        path="src/mdtoc/toc.py",
        edits=[
            {"oldText": old_r, "newText": new_r},
            {"oldText": old_l, "newText": new_l},
            {
                "oldText": "from mdtoc.slug import slugify",
                "newText": "from mdtoc.slug import Slugger",
            },
        ],
    )
    s.assistant(c, seconds=5)
    edit_result(s, c, 5)
    c = s.call("bash", command="python -m pytest -q && python -m mdtoc README.md | grep -i usage")
    s.assistant(c, seconds=2)
    s.result(
        c,
        "......                                                                   [100%]\n6 passed in 0.04s\n  - [Usage](#usage)\n  - [Usage](#usage-1)",
    )
    s.assistant(
        text(
            "Done: `render()` in `src/mdtoc/toc.py` now uses a per-document `Slugger` "
            "(`src/mdtoc/slug.py`), so the second `## Usage` links to `#usage-1`, the third to "
            "`#usage-2`, matching GitHub."
        ),
        seconds=5,
    )

    # 4. The user compacts: everything before the duplicate-heading request is summarized.
    path_ids = _path(s.entries, s.leaf)
    keep = _tokens_from(s.entries, path_ids, ids["dupes"])
    s.tick(35)
    last_usage = next(
        e["message"]["usage"]["totalTokens"]
        for e in reversed(s.entries)
        if e["type"] == "message"
        and e["message"]["role"] == "assistant"
        and e["message"]["stopReason"] == "stop"
    )
    summary = (
        "## Goal\n"
        "- Fix mdtoc (Markdown table-of-contents tool) so headings inside fenced code blocks are ignored.\n\n"
        "## Constraints & Preferences\n- Fences written with ~~~ must work too.\n\n"
        "## Progress\n### Done\n"
        "- [x] Reproduced with `python -m mdtoc examples/install.md` (comments in fences listed as headings)\n"
        "- [x] `parse_headings` in `src/mdtoc/parser.py` skips fenced blocks (FENCE regex, closing fence "
        "must use the same character and be at least as long)\n"
        "- [x] Regression test `test_headings_inside_fences_are_ignored` in `tests/test_parser.py`; 4 tests pass\n\n"
        "### In Progress\n- (none)\n\n### Blocked\n- (none)\n\n"
        "## Key Decisions\n- **Follow CommonMark fence rules**: a `~~~` line must not close a ``` fence.\n\n"
        "## Next Steps\n1. Wait for the user's next request.\n\n"
        "## Critical Context\n- Run tests with `python -m pytest -q`."
        + pf.format_file_operations(
            ["examples/install.md"], ["src/mdtoc/parser.py", "tests/test_parser.py"]
        )
    )
    ids["compaction"] = s.add(
        pf.compaction_entry,
        summary,
        ids["dupes"],
        last_usage,
        {
            "readFiles": ["examples/install.md"],
            "modifiedFiles": ["src/mdtoc/parser.py", "tests/test_parser.py"],
        },
    )
    s.context_tokens = math.ceil(pf.js_len(summary) / 4) + keep
    s.cached = 0

    s.tick(60)
    status = (
        " M src/mdtoc/parser.py\n M src/mdtoc/slug.py\n M src/mdtoc/toc.py\n M tests/test_parser.py"
    )
    bash_msg = pf.bash_execution_message("git status --short", status, 0, False, False, s.now - 180)
    s.context_tokens += math.ceil((len("git status --short") + len(status)) / 4)
    s.add(pf.message_entry, bash_msg)
    s.tick(20)
    s.add(pf.session_info_entry, "mdtoc: code fences, anchors")
    s.tick(5)
    s.add(pf.label_entry, ids["fence_done"], "fence fix ✅")

    # Non-ASCII anchors.
    s.user(
        "Now non-ASCII headings: `## Café ☕` should link to #café- and `## 日本語のメモ` to "
        "#日本語のメモ, like GitHub does. Right now the first becomes #caf and the second is empty.",
        wait=50,
    )
    c = s.call(
        "bash",
        command="python -c \"from mdtoc.slug import slugify; print(repr(slugify('Café ☕')), repr(slugify('日本語のメモ')))\"",
    )
    s.assistant(
        thinking(
            "_DROP removes everything outside [a-z0-9 -]. GitHub lowercases, drops punctuation and "
            "symbols (so the emoji goes) but keeps letters in any script, then turns spaces into "
            "hyphens — the space before the emoji stays, hence the trailing hyphen.",
            s,
        ),
        c,
        seconds=8,
    )
    s.result(c, "'caf' ''")
    old_d = '_DROP = re.compile(r"[^a-z0-9 -]")\n'
    new_d = '_DROP = re.compile(r"[^\\w\\- ]")\n'
    c = s.call("edit", path="src/mdtoc/slug.py", edits=[{"oldText": old_d, "newText": new_d}])
    s.assistant(text("Keep word characters of any script instead of ASCII only."), c, seconds=6)
    edit_result(s, c, 7)
    test_u = (
        "from mdtoc.slug import Slugger, slugify\n\n\n"
        "def test_non_ascii_titles_keep_their_letters():\n"
        '    assert slugify("Café ☕") == "café-"\n'
        '    assert slugify("日本語のメモ") == "日本語のメモ"\n\n\n'
        "def test_repeats_are_numbered():\n    s = Slugger()\n"
        '    assert [s.slug("Usage"), s.slug("Usage"), s.slug("Usage")] == ["usage", "usage-1", "usage-2"]\n'
    )
    c = s.call("write", path="tests/test_slug.py", content=test_u)
    s.assistant(c, seconds=6)
    s.result(c, f"Successfully wrote {len(test_u.encode())} bytes to tests/test_slug.py")
    c = s.call("bash", command="python -m pytest -q")
    s.assistant(c, seconds=2)
    ids["unicode_done_result"] = s.result(
        c,
        "........                                                                 [100%]\n8 passed in 0.05s",
    )
    ids["unicode_done"] = s.assistant(
        text(
            "Non-ASCII headings now keep their letters: `## Café ☕` → `#café-` and `## 日本語のメモ` → "
            "`#日本語のメモ`, the same anchors GitHub generates. The emoji is dropped but the space "
            "before it still becomes a hyphen, which is what GitHub does too. Tests are in "
            "`tests/test_slug.py` (8 passing)."
        ),
        seconds=6,
    )
    context_at_unicode_done = s.context_tokens

    # 5. The python-slugify detour, abandoned.
    s.user(
        "Hmm, instead of maintaining our own regex, could we just use the python-slugify package?",
        wait=120,
    )
    c1 = s.call("read", path="pyproject.toml")
    c2 = s.call("bash", command="pip install python-slugify==8.0.4")
    s.assistant(c1, c2, seconds=4)
    s.result(
        c1,
        '[project]\nname = "mdtoc"\nversion = "0.3.0"\nrequires-python = ">=3.10"\ndependencies = []\n',
    )
    s.result(
        c2,
        "Collecting python-slugify==8.0.4\nCollecting text-unidecode>=1.3\nInstalling collected packages: text-unidecode, python-slugify\nSuccessfully installed python-slugify-8.0.4 text-unidecode-1.3",
    )
    c1 = s.call(
        "edit",
        path="pyproject.toml",
        edits=[{"oldText": "dependencies = []", "newText": 'dependencies = ["python-slugify>=8"]'}],
    )
    c2 = s.call(
        "edit",
        path="src/mdtoc/slug.py",
        edits=[
            {
                "oldText": '    return _DROP.sub("", title.lower()).replace(" ", "-")',
                "newText": "    return _slugify(title)",
            },
            {
                "oldText": "import re\n",
                "newText": "import re\n\nfrom slugify import slugify as _slugify\n",
            },
        ],
    )
    s.assistant(c1, c2, seconds=7)
    edit_result(s, c1, 5)
    edit_result(s, c2, 5)
    c = s.call("bash", command="python -m pytest -q tests/test_slug.py")
    s.assistant(c, seconds=2)
    s.result(
        c,
        "F.                                                                       [100%]\n"
        "E       AssertionError: assert 'cafe' == 'café-'\n"
        "FAILED tests/test_slug.py::test_non_ascii_titles_keep_their_letters - AssertionError\n"
        "1 failed, 1 passed in 0.06s\n\nCommand exited with code 1",
        is_error=True,
    )
    c = s.call(
        "bash", command="python -c \"from slugify import slugify; print(slugify('日本語のメモ'))\""
    )
    s.assistant(c, seconds=3)
    s.result(c, "ri-ben-yu-nomemo")
    ids["slugify_leaf"] = s.assistant(
        text(
            "python-slugify transliterates to ASCII: `Café ☕` becomes `cafe` and `日本語のメモ` becomes "
            "`ri-ben-yu-nomemo`, so the links would no longer match the anchors GitHub renders. "
            "`allow_unicode=True` keeps the letters but still strips the trailing hyphen. I'd keep "
            "our own 3-line regex; shall I revert?"
        ),
        seconds=7,
    )

    # /tree → back to the answer before the detour, with a summary (and a label on it).
    s.tick(40)
    s.leaf = ids["unicode_done"]
    branch_summary = (
        pf.BRANCH_SUMMARY_PREAMBLE
        + "## Goal\nReplace mdtoc's hand-written slug regex with the python-slugify package.\n\n"
        "## Constraints & Preferences\n- Anchors must stay identical to GitHub's.\n\n"
        "## Progress\n### Done\n- [x] Added `python-slugify>=8` to `pyproject.toml` and called it from "
        "`slugify()` in `src/mdtoc/slug.py`\n\n### In Progress\n- (none)\n\n### Blocked\n"
        "- python-slugify transliterates (`Café ☕` → `cafe`, `日本語のメモ` → `ri-ben-yu-nomemo`); "
        "`tests/test_slug.py` fails\n\n"
        "## Key Decisions\n- **Keep the hand-written regex**: the package cannot reproduce GitHub's anchors.\n\n"
        "## Next Steps\n1. Do not add the dependency."
        + pf.format_file_operations([], ["pyproject.toml", "src/mdtoc/slug.py"])
    )
    ids["branch_summary"] = s.add(
        pf.branch_summary_entry,
        branch_summary,
        {"readFiles": [], "modifiedFiles": ["pyproject.toml", "src/mdtoc/slug.py"]},
    )
    s.add(pf.label_entry, ids["branch_summary"], "slugify attempt (dropped)")
    s.context_tokens = context_at_unicode_done + math.ceil(pf.js_len(branch_summary) / 4)
    s.cached = 0

    # --max-depth on the new branch.
    s.user("OK, keep our regex. Last thing: add a `--max-depth N` option to the CLI.", wait=30)
    c = s.call("read", path="src/mdtoc/cli.py")
    s.assistant(c, seconds=3)
    s.result(c, CLI_PY)
    c = s.call(
        "edit",
        path="src/mdtoc/cli.py",
        edits=[
            {
                "oldText": '    parser.add_argument("file", type=Path)\n',
                "newText": '    parser.add_argument("file", type=Path)\n'
                '    parser.add_argument("--max-depth", type=int, default=6, metavar="N",\n'
                '                        help="only list headings down to level N (default: 6)")\n',
            },
            {
                "oldText": '    print(render(parse_headings(args.file.read_text(encoding="utf-8"))))',
                "newText": '    headings = parse_headings(args.file.read_text(encoding="utf-8"))\n'
                "    print(render(headings, max_level=args.max_depth))",
            },
        ],
    )
    s.assistant(
        text("`render()` already takes `max_level`, so this is only CLI plumbing."),
        c,
        seconds=8,
    )
    edit_result(s, c, 14)
    c = s.call(
        "bash", command="python -m mdtoc --max-depth 2 examples/install.md && python -m pytest -q"
    )
    s.assistant(c, seconds=2)
    s.result(
        c,
        "- [Installing mdtoc](#installing-mdtoc)\n  - [With pip](#with-pip)\n  - [From source](#from-source)\n"
        "........                                                                 [100%]\n8 passed in 0.05s",
    )
    s.assistant(
        text(
            "Added `--max-depth N` (default 6) to `src/mdtoc/cli.py`; it is passed to "
            "`render(max_level=...)`. Summary of the session's changes:\n\n"
            "- `src/mdtoc/parser.py`: headings inside ``` and ~~~ fences are ignored\n"
            "- `src/mdtoc/slug.py`: GitHub-style anchors, including repeats (`-1`, `-2`) and "
            "non-ASCII titles\n"
            "- `src/mdtoc/toc.py`, `src/mdtoc/cli.py`: unique anchors per document, `--max-depth`\n"
            "- tests in `tests/test_parser.py` and `tests/test_slug.py` (8 passing) 🎉"
        ),
        seconds=9,
    )
    return s, {**ids, "keep_recent_tokens": str(keep)}


def _path(entries: list[Json], leaf: str | None) -> list[str]:
    by_id = {e["id"]: e for e in entries}
    out = []
    while leaf is not None:
        out.append(leaf)
        leaf = by_id[leaf]["parentId"]
    return out[::-1]


def _estimate(message: Json) -> int:
    """pi's estimateTokens for the message roles this sample uses."""
    role = message["role"]
    chars = 0
    if role == "bashExecution":
        chars = pf.js_len(message["command"]) + pf.js_len(message["output"])
    else:
        for b in message["content"]:
            if b["type"] == "text":
                chars += pf.js_len(b["text"])
            elif b["type"] == "thinking":
                chars += pf.js_len(b["thinking"])
            elif b["type"] == "toolCall":
                chars += len(b["name"]) + pf.js_len(msgspec.json.encode(b["arguments"]).decode())
    return math.ceil(chars / 4)


def _tokens_from(entries: list[Json], path_ids: list[str], first_kept: str) -> int:
    """The keepRecentTokens for which pi's findCutPoint lands exactly on ``first_kept``."""
    by_id = {e["id"]: e for e in entries}
    start = path_ids.index(first_kept)
    return sum(
        _estimate(by_id[i]["message"]) for i in path_ids[start:] if by_id[i]["type"] == "message"
    )


def main() -> int:
    session, ids = build()
    session.write(OUT)
    print(f"wrote {OUT.relative_to(ROOT)}: {len(session.entries)} entries")
    for k, v in ids.items():
        print(f"  {k}: {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
