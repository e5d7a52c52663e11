"""pi-shaped messages and small conversations for the client's tests."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from sessiond_client import SessiondClient

USAGE = {"input": 100, "output": 50, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 150}


def now_ms() -> int:
    """pi's message timestamps; usage older than the latest compaction is ignored, as in pi."""
    return int(time.time() * 1000)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": now_ms()}


def assistant(text: str, *, tool_call: str | None = None) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    if tool_call is not None:
        content.append(
            {"type": "toolCall", "id": tool_call, "name": "read", "arguments": {"path": "a.py"}}
        )
    return {
        "role": "assistant",
        "content": content,
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "claude-test",
        "usage": USAGE,
        "stopReason": "toolUse" if tool_call else "stop",
        "timestamp": now_ms(),
    }


def tool_result(call_id: str, text: str) -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": "read",
        "content": [{"type": "text", "text": text}],
        "isError": False,
        "timestamp": now_ms(),
    }


def message(body: dict[str, Any]) -> dict[str, Any]:
    return {"type": "message", "message": body}


async def conversation(client: SessiondClient, session_id: str, turns: int = 6) -> list[str]:
    """Append ``turns`` user/assistant exchanges big enough to compact; returns the ids."""
    ids: list[str] = []
    for turn in range(turns):
        filler = f"turn {turn} " + "lorem ipsum dolor sit amet " * 40
        result = await client.append(
            session_id,
            [message(user(f"question {turn}: {filler}")), message(assistant(f"answer {turn}"))],
        )
        ids += result.ids
    return ids


# Settings that make a small conversation compactable and keep failures fast.
COMPACTABLE: dict[str, Any] = {
    "compaction": {"keepRecentTokens": 200, "shortSummary": False},
    "retry": {"enabled": False},
}


def with_candidates(*candidates: dict[str, Any], fallback: bool = False) -> dict[str, Any]:
    return {
        **COMPACTABLE,
        "summarizer": {"candidates": list(candidates), "extractiveFallback": fallback},
    }


def recorder(into: list[tuple[str, dict[str, Any]]]) -> Callable[[str, bytes], None]:
    def record(direction: str, body: bytes) -> None:
        into.append((direction, json.loads(body)))

    return record
