"""The method table: which handler serves which request or notification, with its params type.

A handler takes a context and its decoded params and returns the result: a
``msgspec.Struct``, builtins, or ``msgspec.Raw`` (pre-encoded JSON, sent as it is). It
may be ``async def`` (runs as its own task, cancellable by ``$/cancelRequest``) or a
plain ``def`` (runs inline, for methods that never wait; cheaper, not cancellable).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Generic, TypeVar

import msgspec

from sessiond.core.absent import decode_reading_null_as_absent
from sessiond.errors import InvalidParamsError
from sessiond.jsonrpc.envelopes import UNDECODABLE
from sessiond.jsonrpc.handler_context import NotificationContext, RequestContext

P = TypeVar("P")
H = TypeVar("H", bound=Callable[..., object])

# Methods the connection itself implements; registering them would be silently ignored.
RESERVED_METHODS = frozenset({"exit", "$/cancelRequest"})
_EMPTY_PARAMS = b"{}"


class NoParams(msgspec.Struct):
    """Params type of a method that takes none (any fields sent are ignored)."""


@dataclass(frozen=True, slots=True)
class _Spec(Generic[P]):
    params_type: Any
    handler: Callable[..., object]
    is_async: bool
    decoder: msgspec.json.Decoder[P] = field(repr=False)

    def decode_params(self, raw: msgspec.Raw) -> P:
        """The params as the handler's type. Absent or ``null`` params count as ``{}``, and
        an optional field sent as null as one left out. Raises ``InvalidParamsError``."""
        try:
            size = len(raw)
            if size == 0 or (size == 4 and bytes(raw) == b"null"):
                empty: P = self.decoder.decode(_EMPTY_PARAMS)
                return empty
            params: P = decode_reading_null_as_absent(self.decoder, raw, self.params_type)
        except UNDECODABLE as exc:
            raise _invalid_params(exc) from None
        return params


def _invalid_params(exc: Exception) -> InvalidParamsError:
    """-32602 naming the offending field: msgspec's message with ``$`` spelled ``params``."""
    text = str(exc)
    message, _, where = text.partition(" - at `")
    if where:
        path = "params" + where.rstrip("`")[1:]
        return InvalidParamsError(f"Invalid params: {message} - at `{path}`", path=path)
    return InvalidParamsError(f"Invalid params: {message}")


@dataclass(frozen=True, slots=True)
class RequestSpec(_Spec[P]):
    """A registered request method (``handler(ctx: RequestContext, params: P)``)."""


@dataclass(frozen=True, slots=True)
class NotificationSpec(_Spec[P]):
    """A registered notification method (``handler(ctx: NotificationContext, params: P)``)."""


class Router:
    def __init__(self) -> None:
        self._requests: dict[str, RequestSpec[Any]] = {}
        self._notifications: dict[str, NotificationSpec[Any]] = {}

    @property
    def requests(self) -> Mapping[str, RequestSpec[Any]]:
        """Registered request methods, read-only (for schema generation and docs)."""
        return MappingProxyType(self._requests)

    @property
    def notifications(self) -> Mapping[str, NotificationSpec[Any]]:
        return MappingProxyType(self._notifications)

    def request(self, method: str, params_type: type[P] | Any = NoParams) -> Callable[[H], H]:
        """Decorator registering a request handler ``(ctx: RequestContext, params) -> result``."""

        def register(handler: H) -> H:
            self.add_request(method, params_type, handler)
            return handler

        return register

    def notification(self, method: str, params_type: type[P] | Any = NoParams) -> Callable[[H], H]:
        """Decorator registering a notification handler ``(ctx: NotificationContext, params)``."""

        def register(handler: H) -> H:
            self.add_notification(method, params_type, handler)
            return handler

        return register

    def add_request(
        self,
        method: str,
        params_type: type[P] | Any,
        handler: Callable[[RequestContext, P], object],
    ) -> None:
        self._check_new(method)
        self._requests[method] = RequestSpec(
            params_type, handler, _is_async(handler), msgspec.json.Decoder(params_type)
        )

    def add_notification(
        self,
        method: str,
        params_type: type[P] | Any,
        handler: Callable[[NotificationContext, P], object],
    ) -> None:
        self._check_new(method)
        self._notifications[method] = NotificationSpec(
            params_type, handler, _is_async(handler), msgspec.json.Decoder(params_type)
        )

    def _check_new(self, method: str) -> None:
        if not isinstance(method, str) or not method:
            raise ValueError(f"method name must be a non-empty string, not {method!r}")
        if method in RESERVED_METHODS:
            raise ValueError(f"{method!r} is handled by the connection and cannot be registered")
        if method in self._requests or method in self._notifications:
            raise ValueError(f"{method!r} is already registered")


def _is_async(handler: Callable[..., object]) -> bool:
    """``async def`` functions, and objects whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        getattr(handler, "__call__", None)  # noqa: B004 - looking for an async __call__
    )
