"""The method tables: sessiond's handlers as module-level functions, bound to a daemon.

A handler is ``handler(daemon, ctx, params) -> result``: it reads its params, calls a
use case of ``service`` (or the store) on the session the daemon holds, and builds the
result. Each ``*_methods`` module has one ``MethodTable``; ``app.build_daemon`` binds
every table to one ``Daemon``. The binding keeps the handler's return annotation (the
schema's result type) and whether it is ``async``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from sessiond.jsonrpc import RequestContext, Router
from sessiond.jsonrpc.router import NoParams

if TYPE_CHECKING:
    from .daemon import Daemon

H = TypeVar("H", bound=Callable[..., object])


@dataclass(frozen=True)
class _Method:
    name: str
    params_type: Any
    handler: Callable[..., object]


class MethodTable:
    """The request methods of one module, registered by decorator."""

    def __init__(self) -> None:
        self._methods: list[_Method] = []

    def request(self, name: str, params_type: Any = NoParams) -> Callable[[H], H]:
        def register(handler: H) -> H:
            self._methods.append(_Method(name, params_type, handler))
            return handler

        return register

    def bind(self, router: Router, daemon: Daemon) -> None:
        """Register every method on ``router``, each handler called with ``daemon``."""
        for method in self._methods:
            router.add_request(method.name, method.params_type, _bound(method.handler, daemon))


def _bound(handler: Callable[..., Any], daemon: Daemon) -> Callable[[RequestContext, Any], Any]:
    if inspect.iscoroutinefunction(handler):

        @functools.wraps(handler)
        async def call_async(ctx: RequestContext, params: Any) -> Any:
            return await handler(daemon, ctx, params)

        return call_async

    @functools.wraps(handler)
    def call(ctx: RequestContext, params: Any) -> Any:
        return handler(daemon, ctx, params)

    return call
