"""What a name is, and where the conversation's names are found.

A name is what a reader would look up: a path, a function, a type, a command, a flag,
a value. The conversation marks most of them itself, in code spans; code the
assistant wrote declares more; paths and code-shaped words (``snake_case``,
``camelCase``, ``kebab-case-name``) are names wherever they appear. Plain language is
never a name, even in backticks: a span made only of words, one of which is an English
function word ("for", "that", "and"), is prose quoted in code font or backticks paired
wrongly, and a span that starts or ends with a space is the latter.
"""

from __future__ import annotations

import re
from typing import Final

from sessiond.llm.extractive.text import FUNCTION_WORDS, cached, strip_fences, unique

# Longer spans are code or text, not a name one would look up.
MAX_NAME_CHARS: Final = 80
_PUNCTUATED_WORDS: Final = 3

# A code span on one line; runs of two or more backticks are fences, not spans.
_CODE_SPAN: Final = re.compile(r"(?<!`)`([^`\n]{1,200})`(?!`)")
# Declarations start a line (after indentation and modifiers): "pub fn build(",
# "export async function load(", "class Store", "type Id =".
DECLARATION: Final = re.compile(
    r"^[ \t]*(?:(?:export|default|pub(?:\([a-z]+\))?|public|private|protected|static|async"
    r"|abstract|final|override|unsafe|const|extern|declare|internal|open|data|sealed)\s+)*"
    r"(def|class|function\*?|fn|func|interface|type|struct|enum|trait|impl|module"
    r"|object|record|protocol|extension)\s+([A-Za-z_$][\w$]{2,})",
    re.MULTILINE,
)
# Identifiers that are code by their shape alone, and member chains ("vi.stubEnv",
# "process.env.NODE_ENV") whose last part is one.
_SHAPED = (
    r"(?:[A-Za-z][a-z0-9]*_[A-Za-z0-9_]+|[a-z][a-z0-9]*[A-Z][A-Za-z0-9]*"
    r"|[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*|[A-Z]{2,}_[A-Z0-9_]+)"
)
_CODE_WORD: Final = re.compile(rf"(?<![\w.$])(?:[A-Za-z_$][\w$]*\.)*{_SHAPED}\b")
# File extensions common enough that "name.ext" in prose is a file name.
_EXTENSIONS = (
    "py|pyi|ts|tsx|js|jsx|mjs|cjs|json|jsonl|md|mdx|toml|yaml|yml|rs|go|sh|bash|zsh|txt|css"
    "|scss|html|sql|lua|java|kt|swift|rb|php|c|h|cc|cpp|hpp|cs|vue|svelte|lock|env|ini|cfg"
    "|conf|xml|csv|proto|graphql|tf|nix|ex|exs|erl|hs|ml|scala|dart|zig|r|ipynb|dockerfile"
)
_FILE_NAME_END: Final = re.compile(rf"\.(?:{_EXTENSIONS})$")
# Paths, file names and code-shaped words written without backticks in prose.
_PROSE_NAME: Final = re.compile(
    r"(?<![\w/.@`-])(?:~|\.{1,2})?/?(?:[\w@.-]++/)+[\w@.-]*\w(?:\{[^}\s]*\})?"
    rf"|(?<![\w/.@`-])[\w-]{{2,}}\.(?:{_EXTENSIONS})\b(?![\w/-])"
    r"|\b[a-z][a-z0-9]*(?:-[a-z0-9]+){2,}\b"
    r"|\b[a-z]+[A-Z]\w*\b|\b[a-z][a-z0-9]*_[a-z0-9_]+\b"
)
# The scheme's length is bounded: unbounded, every word start of a long run like
# "a-a-a-..." scanned to its end looking for "://" (quadratic). Real schemes are short.
_URL: Final = re.compile(r"\b[a-z][a-z0-9+.-]{0,31}://\S+")
_ANY_SPAN: Final = re.compile(r"`[^`\n]*`")
# Keywords a declaration pattern can catch in prose that happens to follow one.
_KEYWORDS: Final = frozenset({"for", "in", "of", "as", "is", "new", "from", "import", "the"})


def is_plain(span: str) -> bool:
    """Whether backticked text is plain language rather than code (see the module)."""
    if span != span.strip():
        return True
    words = span.split()
    if len(words) >= _PUNCTUATED_WORDS:
        # Words with a sentence's punctuation ("Done. Moving on...") are prose too.
        words = [word.strip(".,;:!?\u2026") for word in words]
    if not words or not all(word.isalpha() for word in words):
        return False
    # "git push origin main" is a command; "for the tests" is a phrase.
    return any(word.lower() in FUNCTION_WORDS for word in words)


def is_name(span: str) -> bool:
    """Whether backticked text names something one would look up: code, not too long."""
    return bool(span) and len(span) <= MAX_NAME_CHARS and not is_plain(span)


@cached
def code_spans(text: str) -> tuple[str, ...]:
    """The names written in backticks outside fenced blocks, in order, each once."""
    return tuple(unique(span for span in _CODE_SPAN.findall(strip_fences(text)) if is_name(span)))


@cached
def prose_names(text: str) -> tuple[str, ...]:
    """Paths and code-shaped words outside code spans and URLs. Words joined by a slash
    are a path only when they look like one (a file name's extension at the end, or
    ``/``, ``~/``, ``./``, ``../`` at the start): "pause/resume" is a pair of words."""
    prose = _URL.sub(" ", _ANY_SPAN.sub(" ", strip_fences(text)))
    found = (match.group(0).rstrip(".") for match in _PROSE_NAME.finditer(prose))
    return tuple(
        unique(
            name
            for name in found
            if len(name) <= MAX_NAME_CHARS and ("/" not in name or _looks_like_path(name))
        )
    )


def _looks_like_path(name: str) -> bool:
    return name.startswith(("/", "~/", "./", "../")) or _FILE_NAME_END.search(name) is not None


def declared(code: str) -> list[str]:
    """The functions and types a piece of code declares."""
    return unique(name for _, name in DECLARATION.findall(code) if name.lower() not in _KEYWORDS)


def declared_functions(code: str) -> set[str]:
    """The names a piece of code declares as functions (written ``name()`` in a summary)."""
    return {name for kind, name in DECLARATION.findall(code) if kind in _FUNCTION_KINDS}


_FUNCTION_KINDS: Final = frozenset({"def", "function", "function*", "fn", "func"})


def code_words(code: str) -> list[str]:
    """Identifiers in code that are code by their shape (``snake_case``, ``camelCase``,
    ``PascalCase``, ``SCREAMING_CASE``), in order, each once."""
    return unique(word for word in _CODE_WORD.findall(code) if len(word) <= MAX_NAME_CHARS)


def names_only_in_code(text: str) -> str:
    """``text`` with code font kept on names only: a code span of plain words is written
    as the words, so that a sentence taken from the conversation keeps its meaning and
    shows no false names. Quotes (lines opening with ">") and fenced blocks are verbatim
    and left as they are."""
    if "`" not in text:
        return text
    lines: list[str] = []
    fenced = False
    for line in text.split("\n"):
        stripped = line.lstrip()
        if stripped.startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced and not stripped.startswith(">") and "`" in line:
            lines.append(_CODE_SPAN.sub(_unless_name, line))
            continue
        lines.append(line)
    return "\n".join(lines)


def _unless_name(span: re.Match[str]) -> str:
    return span.group(1) if is_plain(span.group(1)) else span.group(0)
