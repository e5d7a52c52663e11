"""Encoding core values to JSON the way pi writes them."""

from __future__ import annotations

from typing import Any, Final

import msgspec

from .messages import UnknownMessage


def enc_hook(value: Any) -> Any:
    if isinstance(value, UnknownMessage):
        return value.data
    raise NotImplementedError(f"cannot encode {type(value).__name__}")


JSON_ENCODER: Final = msgspec.json.Encoder(enc_hook=enc_hook)


def to_json(value: Any) -> bytes:
    return JSON_ENCODER.encode(value)


def to_builtins(value: Any) -> Any:
    return msgspec.to_builtins(value, enc_hook=enc_hook)
