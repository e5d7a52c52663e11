"""Server-sent events, decoded line by line (the WHATWG event-stream rules we need).

An event is dispatched on the blank line that ends it. A stream that stops in
the middle of an event never dispatches it, as the standard says: a cut-off
final chunk is a truncated stream, not a malformed one.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable, Callable

import msgspec


class SseEvent(msgspec.Struct, frozen=True):
    event: str
    data: str


class SseDecoder:
    """Feed it lines without their line ending; it returns each complete event."""

    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []

    def feed(self, line: str) -> SseEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None  # a comment: servers use them as keep-alives
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        # "id" and "retry" only matter for reconnecting, which we never do.
        return None

    def _dispatch(self) -> SseEvent | None:
        if not self._data:
            self._event = ""
            return None
        event = SseEvent(event=self._event or "message", data="\n".join(self._data))
        self._event = ""
        self._data = []
        return event


def looks_like_sse(first_line: str) -> bool:
    """Whether a body's first non-blank line starts an event stream."""
    return first_line.startswith((":", "data:", "event:", "id:", "retry:"))


class PlainBody(msgspec.Struct, frozen=True):
    """The whole body of an answer that was not an event stream (``stream`` ignored)."""

    text: str


async def decode_body(
    lines: AsyncIterable[str], *, on_line: Callable[[], None], limit: int
) -> AsyncGenerator[SseEvent | PlainBody, None]:
    """Yield the events of an event stream, or one PlainBody for anything else.

    ``on_line`` runs after every line received, keep-alives included, so the
    caller can notice a stream that only ever keeps itself alive.
    """
    decoder: SseDecoder | None = None
    plain: list[str] = []
    size = 0
    async for line in lines:
        if decoder is None and not plain and looks_like_sse(line):
            decoder = SseDecoder()
        if decoder is not None:
            event = decoder.feed(line)
            if event is not None:
                # Resumes once the caller has handled the event, so the check
                # below sees any progress that event made.
                yield event
        elif plain or line.strip():
            plain.append(line)
            size += len(line) + 1
            if size > limit:
                break
        on_line()
    if decoder is None:
        yield PlainBody(text="\n".join(plain))
