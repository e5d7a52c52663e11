"""Wire-shaped entry bodies (what a client sends to session/append)."""

from __future__ import annotations

from typing import Any

import msgspec


def user(text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "message", "message": {"role": "user", "content": text, **extra}}


def assistant(
    text: str = "ok",
    *,
    input: int = 100,
    output: int = 50,
    stop: str = "stop",
    tools: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += tools or []
    return {
        "type": "message",
        "message": {
            "role": "assistant",
            "content": content,
            "api": "anthropic-messages",
            "provider": "anthropic",
            "model": "claude-test",
            "usage": {
                "input": input,
                "output": output,
                "cacheRead": 0,
                "cacheWrite": 0,
                "totalTokens": input + output,
                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
            },
            "stopReason": stop,
            **extra,
        },
    }


def tool_result(text: str, *, tool: str = "bash", call_id: str = "call-1") -> dict[str, Any]:
    return {
        "type": "message",
        "message": {
            "role": "toolResult",
            "toolCallId": call_id,
            "toolName": tool,
            "content": [{"type": "text", "text": text}],
            "isError": False,
        },
    }


def tool_call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "toolCall", "id": f"call-{name}", "name": name, "arguments": arguments}


def stored_line(entry_id: str, parent: str | None, text: str) -> bytes:
    """A user message's line as another program (pi) writes it to the file."""
    body = {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": "2026-05-01T10:00:00.000Z",
        "message": {"role": "user", "content": text, "timestamp": 1},
    }
    return msgspec.json.encode(body) + b"\n"


def omp_file(
    path: Any,
    lines: list[dict[str, Any]] = (),  # type: ignore[assignment]
    *,
    title: str = "A session",
    source: str | None = "user",
) -> Any:
    """An oh-my-pi 18 session file: its title line, the header, then ``lines`` as they are."""
    from sessiond.core.title_slot import serialize_title_slot

    header = {
        "type": "session",
        "version": 3,
        "id": "01900000-0000-7000-8000-000000000001",
        "timestamp": "2026-09-27T09:00:00.000Z",
        "cwd": "/work/project",
    }
    body = b"".join(msgspec.json.encode(line) + b"\n" for line in [header, *lines])
    path.write_bytes(serialize_title_slot(title, source, "2026-09-27T09:00:00.000Z") + body)
    return path


def omp_entry(kind: str, entry_id: str, parent: str | None, **fields: Any) -> dict[str, Any]:
    """A line as oh-my-pi writes it: type, id, parentId, timestamp, then the fields."""
    return {
        "type": kind,
        "id": entry_id,
        "parentId": parent,
        "timestamp": "2026-09-27T09:00:01.000Z",
        **fields,
    }
