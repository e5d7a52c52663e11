"""Context-overflow detection (pi-ai 1.6.0): did the provider refuse or cut the prompt?

An error whose message matches what providers say when the prompt is too long
(pi's patterns, plus oh-my-pi's), unless it reads as rate limiting; or a
"silent" overflow: the provider answered normally but reports a prompt larger
than the window, or stopped for length without writing anything at a full
window.
"""

from __future__ import annotations

import re
from functools import cache

from .messages import AnyMessage, AssistantMessage

# Each pattern is pi's (or oh-my-pi's) regular expression cut at its ``.*``: its pieces
# must appear in this order on one line (JavaScript's ``.`` stops at \n, \r, U+2028
# and U+2029). Matched whole, ``a.*b.*c`` backtracks in cubic time over a line that
# repeats ``a`` and ``b`` without ``c``: 15 KB of "input too long " took two minutes,
# and error messages come from providers, session files and clients. Piece by piece,
# the earliest match of each piece after the previous one decides in linear time; each
# piece is a literal (at most with an optional last letter that no following piece
# begins with), so the leftmost match is also the one that ends first.
_OVERFLOW_PATTERNS: tuple[tuple[str, ...], ...] = (
    # pi (pi-ai 1.6.0's list)
    ("prompt (?:is )?too long",),
    ("prompt exceeds max length",),
    ("input is too long for requested model",),
    ("exceeds the context window",),
    (r"exceeds (?:the )?(?:model'?s )?maximum context length(?: of [\d,]+ tokens?|\s*\([\d,]+\))",),
    ("context window exceeded",),
    ("input token count", "exceeds the maximum"),
    (r"maximum prompt length is \d+",),
    ("reduce the length of the messages",),
    (r"maximum context length is \d+ tokens",),
    (r"exceeds (?:the )?maximum allowed input length of [\d,]+ tokens?",),
    (r"input \(\d+ tokens\) is longer than the model'?s context length \(\d+ tokens\)",),
    (r"exceeds the limit of \d+",),
    ("exceeds the available context size",),
    ("greater than the context length",),
    ("context window exceeds limit",),
    ("exceeded model token limit",),
    (r"too large for model with \d+ maximum context length",),
    (r"prompt has [\d,]+ tokens?, but the configured context size is [\d,]+ tokens?",),
    ("model_context_window_exceeded",),
    ("prompt too long; exceeded (?:max )?context length",),
    ("range of input length should be",),
    ("context[_ ]length[_ ]exceeded",),
    ("too many tokens",),
    ("token limit exceeded",),
    # any HTTP 413 (a request too large in bytes), as an SDK error or a status line
    (r"^(?:[\w -]+ API error \(413\):|413(?:\s|:|$))",),
    # oh-my-pi
    ("requested tokens?", "exceed", "context (window|length|size)"),
    ("context (window|length|size)", "(exceeded|overflow|too small)"),
    ("(prompt|input)", "(too long|too large)", "(context|n_ctx)"),
    ("requested tokens?", "(exceeds?|greater than)", "(n_ctx|context)"),
    ("request_too_large",),
    ("request exceeds the maximum size",),
    ("payload too large",),
    ("entity too large",),
    (r"\b413\b", r"\b(request|payload|entity)\b", r"\btoo large\b"),
)
_LINE_END = re.compile("[\n\r\u2028\u2029]")

_Pieces = tuple[re.Pattern[str], ...]


@cache
def _patterns() -> tuple[re.Pattern[str], tuple[_Pieces, ...], re.Pattern[str], re.Pattern[str]]:
    """Compiled on first use (start-up time): the one-piece overflow patterns as one
    expression, the others piece by piece, bare-status, not-overflow."""
    single = re.compile(
        "|".join(f"(?:{p[0]})" for p in _OVERFLOW_PATTERNS if len(p) == 1), re.IGNORECASE
    )
    chained = tuple(
        tuple(re.compile(piece, re.IGNORECASE) for piece in p)
        for p in _OVERFLOW_PATTERNS
        if len(p) > 1
    )
    # Cerebras answers an oversized prompt with a bare status line (pi 1.6 reads it so only
    # from Cerebras). pi's ``\s*(status code)?\s*`` with the optional part folded in, so
    # that a long run of spaces is not tried at every split between the two ``\s*``.
    no_body = re.compile(r"^4(00|13)\s*(?:status code\s*)?\(no body\)", re.IGNORECASE)
    # Rate limiting can mention sizes too; pi never treats these as overflow.
    not_overflow = re.compile(
        r"^(?:Throttling error|Service unavailable):|rate limit|too many requests", re.IGNORECASE
    )
    return single, chained, no_body, not_overflow


def _in_order_on_one_line(pieces: _Pieces, text: str) -> bool:
    first, rest = pieces[0], pieces[1:]
    position = 0
    while (found := first.search(text, position)) is not None:
        line_end = _LINE_END.search(text, found.end())
        end = line_end.start() if line_end is not None else len(text)
        at = found.end()
        for piece in rest:
            match = piece.search(text, at, end)
            if match is None:
                break
            at = match.end()
        else:
            return True
        # The first piece's earliest match on this line was the best start it had.
        position = end + 1
    return False


# A "length" stop with no output at 99 % of the window: the prompt filled it.
_FULL_WINDOW_SHARE = 0.99


def is_overflow_error_message(text: str, provider: str | None = None) -> bool:
    """True when a provider's error text says the prompt did not fit. A bare 400/413
    status line counts from Cerebras only, or when the provider is not known."""
    single, chained, no_body, not_overflow = _patterns()
    if not_overflow.search(text):
        return False
    if single.search(text):
        return True
    if provider in (None, "cerebras") and no_body.search(text):
        return True
    return any(_in_order_on_one_line(pieces, text) for pieces in chained)


def is_context_overflow(message: AnyMessage, context_window: int | None = None) -> bool:
    """pi's ``isContextOverflow(assistantMsg, contextWindow?)``."""
    if not isinstance(message, AssistantMessage):
        return False
    if (
        message.stop_reason == "error"
        and message.error_message
        and is_overflow_error_message(message.error_message, message.provider)
    ):
        return True
    if not context_window:
        return False
    prompt_tokens = message.usage.input + message.usage.cache_read
    if message.stop_reason == "stop" and prompt_tokens > context_window:
        return True
    return (
        message.stop_reason == "length"
        and message.usage.output == 0
        and prompt_tokens >= context_window * _FULL_WINDOW_SHARE
    )
