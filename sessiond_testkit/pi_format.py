"""Builders for pi v3 session lines, byte-for-byte in the shape pi 0.73.1 writes them.

pi writes each line with ``JSON.stringify(entry)``, so the key order of every object is the
order in which pi's code assigns the keys, and keys whose value is ``undefined`` are left out.
The builders below reproduce that order (it matters: a reader that only looks at a line's
prefix sees ``custom`` and ``custom_message`` entries start with ``customType``, not ``id``).
``msgspec.json.encode`` keeps dict insertion order and escapes exactly the characters that
``JSON.stringify`` escapes; the one number difference (``1.0`` vs ``1``) is handled by
:func:`js_number`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from random import Random
from typing import Any

Json = dict[str, Any]

#: The thinking levels pi knows (``getSupportedThinkingLevels``).
THINKING_LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh")

#: pi's prefix for a summary of an abandoned branch (what ``generateBranchSummary`` prepends
#: to the model's text); a generated ``branch_summary`` should look like the real thing.
BRANCH_SUMMARY_PREAMBLE = (
    "The user explored a different conversation branch before returning here.\n"
    "Summary of that exploration:\n\n"
)


@dataclass(frozen=True)
class Model:
    """A model as pi-ai describes it; prices are USD per million tokens."""

    provider: str
    id: str
    api: str
    input_price: float
    output_price: float
    cache_read_price: float
    cache_write_price: float
    context_window: int
    reasoning: bool = True


#: Real entries of pi-ai 0.73.1's model table, so that provider/api/model triples and
#: costs look like the ones pi writes.
MODELS: dict[str, Model] = {
    m.id: m
    for m in (
        Model("anthropic", "claude-sonnet-4-5", "anthropic-messages", 3, 15, 0.3, 3.75, 200_000),
        Model("anthropic", "claude-opus-4-5", "anthropic-messages", 5, 25, 0.5, 6.25, 200_000),
        Model("anthropic", "claude-haiku-4-5", "anthropic-messages", 1, 5, 0.1, 1.25, 200_000),
        Model("openai", "gpt-5.1-codex", "openai-responses", 1.25, 10, 0.125, 0, 400_000),
        Model("google", "gemini-2.5-pro", "google-generative-ai", 1.25, 10, 0.125, 0, 1_048_576),
    )
}


def js_number(value: float) -> float | int:
    """Return ``value`` as JSON.stringify would print it: integral floats lose their ``.0``."""
    if value == int(value):
        return int(value)
    return value


_second_cache: dict[int, str] = {}


def iso(ms: int) -> str:
    """``new Date(ms).toISOString()``: UTC, millisecond precision, trailing ``Z``."""
    sec, milli = divmod(ms, 1000)
    prefix = _second_cache.get(sec)
    if prefix is None:
        t = time.gmtime(sec)
        prefix = (
            f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}T"
            f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}."
        )
        if len(_second_cache) > 4096:
            _second_cache.clear()
        _second_cache[sec] = prefix
    return f"{prefix}{milli:03d}Z"


def uuid7(ms: int, rng: Random) -> str:
    """A UUIDv7 string (pi 0.73.1 makes session ids with ``uuid.v7()``), seeded for determinism."""
    rand_a = rng.getrandbits(12)
    rand_b = rng.getrandbits(62)
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | rand_a << 64 | 0b10 << 62 | rand_b
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


class IdMaker:
    """Entry ids as pi makes them: 8 lowercase hex digits, unique within the session."""

    def __init__(self, rng: Random) -> None:
        self._rng = rng
        self.used: set[str] = set()

    def __call__(self) -> str:
        while True:
            candidate = f"{self._rng.getrandbits(32):08x}"
            if candidate not in self.used:
                self.used.add(candidate)
                return candidate


# --- header and entries -----------------------------------------------------------------


def header(session_id: str, timestamp: str, cwd: str, parent_session: str | None = None) -> Json:
    h: Json = {
        "type": "session",
        "version": 3,
        "id": session_id,
        "timestamp": timestamp,
        "cwd": cwd,
    }
    if parent_session is not None:
        h["parentSession"] = parent_session
    return h


def message_entry(id_: str, parent: str | None, ts: str, message: Json) -> Json:
    return {"type": "message", "id": id_, "parentId": parent, "timestamp": ts, "message": message}


def thinking_level_entry(id_: str, parent: str | None, ts: str, level: str) -> Json:
    return {
        "type": "thinking_level_change",
        "id": id_,
        "parentId": parent,
        "timestamp": ts,
        "thinkingLevel": level,
    }


def model_change_entry(id_: str, parent: str | None, ts: str, model: Model) -> Json:
    return {
        "type": "model_change",
        "id": id_,
        "parentId": parent,
        "timestamp": ts,
        "provider": model.provider,
        "modelId": model.id,
    }


def compaction_entry(
    id_: str,
    parent: str | None,
    ts: str,
    summary: str,
    first_kept_entry_id: str,
    tokens_before: int,
    details: Json | None,
    from_hook: bool | None = False,
) -> Json:
    # AgentSession passes fromExtension (a boolean) through, so pi-made entries say false.
    e: Json = {
        "type": "compaction",
        "id": id_,
        "parentId": parent,
        "timestamp": ts,
        "summary": summary,
        "firstKeptEntryId": first_kept_entry_id,
        "tokensBefore": tokens_before,
    }
    if details is not None:
        e["details"] = details
    if from_hook is not None:
        e["fromHook"] = from_hook
    return e


def branch_summary_entry(
    id_: str,
    parent: str | None,
    ts: str,
    summary: str,
    details: Json | None,
    from_hook: bool | None = False,
) -> Json:
    e: Json = {
        "type": "branch_summary",
        "id": id_,
        "parentId": parent,
        "timestamp": ts,
        "fromId": parent if parent is not None else "root",
        "summary": summary,
    }
    if details is not None:
        e["details"] = details
    if from_hook is not None:
        e["fromHook"] = from_hook
    return e


def custom_entry(id_: str, parent: str | None, ts: str, custom_type: str, data: Any) -> Json:
    # pi builds this object with customType/data before the base fields.
    e: Json = {"type": "custom", "customType": custom_type}
    if data is not None:
        e["data"] = data
    e.update(id=id_, parentId=parent, timestamp=ts)
    return e


def custom_message_entry(
    id_: str,
    parent: str | None,
    ts: str,
    custom_type: str,
    content: str | list[Json],
    display: bool,
    details: Any = None,
) -> Json:
    # Same quirk as custom entries: the base fields come last.
    e: Json = {
        "type": "custom_message",
        "customType": custom_type,
        "content": content,
        "display": display,
    }
    if details is not None:
        e["details"] = details
    e.update(id=id_, parentId=parent, timestamp=ts)
    return e


def label_entry(id_: str, parent: str | None, ts: str, target_id: str, label: str | None) -> Json:
    e: Json = {
        "type": "label",
        "id": id_,
        "parentId": parent,
        "timestamp": ts,
        "targetId": target_id,
    }
    if label is not None:
        e["label"] = label
    return e


def session_info_entry(id_: str, parent: str | None, ts: str, name: str) -> Json:
    return {
        "type": "session_info",
        "id": id_,
        "parentId": parent,
        "timestamp": ts,
        "name": name.strip(),
    }


# --- messages ---------------------------------------------------------------------------


def text_block(text: str) -> Json:
    return {"type": "text", "text": text}


def image_block(data: str, mime_type: str = "image/png") -> Json:
    return {"type": "image", "data": data, "mimeType": mime_type}


def thinking_block(thinking: str, signature: str | None) -> Json:
    b: Json = {"type": "thinking", "thinking": thinking}
    if signature is not None:
        b["thinkingSignature"] = signature
    return b


def tool_call_block(call_id: str, name: str, arguments: Json) -> Json:
    return {"type": "toolCall", "id": call_id, "name": name, "arguments": arguments}


def user_message(content: str | list[Json], ts_ms: int) -> Json:
    return {"role": "user", "content": content, "timestamp": ts_ms}


def usage(model: Model, input_: int, output: int, cache_read: int, cache_write: int) -> Json:
    """Usage with cost computed the way pi-ai's ``calculateCost`` does (same float ops)."""
    c_in = (model.input_price / 1_000_000) * input_
    c_out = (model.output_price / 1_000_000) * output
    c_cr = (model.cache_read_price / 1_000_000) * cache_read
    c_cw = (model.cache_write_price / 1_000_000) * cache_write
    total = c_in + c_out + c_cr + c_cw
    return {
        "input": input_,
        "output": output,
        "cacheRead": cache_read,
        "cacheWrite": cache_write,
        "totalTokens": input_ + output + cache_read + cache_write,
        "cost": {
            "input": js_number(c_in),
            "output": js_number(c_out),
            "cacheRead": js_number(c_cr),
            "cacheWrite": js_number(c_cw),
            "total": js_number(total),
        },
    }


def assistant_message(
    model: Model,
    content: list[Json],
    usage_: Json,
    stop_reason: str,
    ts_ms: int,
    response_id: str | None = None,
    error_message: str | None = None,
) -> Json:
    m: Json = {
        "role": "assistant",
        "content": content,
        "api": model.api,
        "provider": model.provider,
        "model": model.id,
        "usage": usage_,
        "stopReason": stop_reason,
        "timestamp": ts_ms,
    }
    # pi-ai sets these while streaming, after the object exists, so they come last.
    if response_id is not None:
        m["responseId"] = response_id
    if error_message is not None:
        m["errorMessage"] = error_message
    return m


def tool_result_message(
    call_id: str,
    tool_name: str,
    content: list[Json],
    is_error: bool,
    ts_ms: int,
    details: Any = None,
) -> Json:
    m: Json = {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": tool_name,
        "content": content,
    }
    if details is not None:
        m["details"] = details
    m["isError"] = is_error
    m["timestamp"] = ts_ms
    return m


def bash_execution_message(
    command: str,
    output: str,
    exit_code: int | None,
    cancelled: bool,
    truncated: bool,
    ts_ms: int,
    full_output_path: str | None = None,
    exclude_from_context: bool | None = None,
) -> Json:
    m: Json = {"role": "bashExecution", "command": command, "output": output}
    if exit_code is not None:
        m["exitCode"] = exit_code
    m["cancelled"] = cancelled
    m["truncated"] = truncated
    if full_output_path is not None:
        m["fullOutputPath"] = full_output_path
    m["timestamp"] = ts_ms
    if exclude_from_context is not None:
        m["excludeFromContext"] = exclude_from_context
    return m


# --- estimates (pi's chars/4 rule, used to place cuts and size usage plausibly) ----------


def js_len(s: str) -> int:
    """``s.length`` in JavaScript: UTF-16 code units (astral characters count twice)."""
    if s.isascii():
        return len(s)
    return len(s.encode("utf-16-le")) // 2


def format_file_operations(read_files: list[str], modified_files: list[str]) -> str:
    """The ``<read-files>``/``<modified-files>`` tail pi appends to summaries."""
    sections = []
    if read_files:
        sections.append("<read-files>\n" + "\n".join(read_files) + "\n</read-files>")
    if modified_files:
        sections.append("<modified-files>\n" + "\n".join(modified_files) + "\n</modified-files>")
    if not sections:
        return ""
    return "\n\n" + "\n\n".join(sections)


def file_lists(read: set[str], modified: set[str]) -> tuple[list[str], list[str]]:
    """``computeFileLists``: read-only files and modified files, each sorted.

    JS sorts by UTF-16 code units; sorting the UTF-16 encodings reproduces that order.
    """

    def key(s: str) -> bytes:
        return s.encode("utf-16-be")

    return sorted(read - modified, key=key), sorted(modified, key=key)
