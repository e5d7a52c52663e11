"""The HTTP plumbing the network summarizers share: one POST, its failures as ProviderErrors.

httpx is imported on first use, not at daemon start-up: most sessions never
summarize, and importing it takes about 0.15 s.

Timeouts: the candidate's ``timeout_seconds`` bounds connecting, sending and
*each read*, so a stream that goes quiet fails after that long however long the
whole answer takes. A stream that keeps sending keep-alives but no content is
caught by ``StallWatch`` instead.
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from sessiond.llm.errors import ProviderError, http_error_message, scrub
from sessiond.llm.retry_after import retry_after_from_headers, retry_after_from_text

if TYPE_CHECKING:
    import httpx

CONNECT_TIMEOUT_S = 10.0
# An error body or a non-streamed answer larger than this is not a summary we want.
MAX_BODY_BYTES = 8 * 1024 * 1024


def _hostname(url: str) -> str | None:
    try:
        return urlsplit(url).hostname
    except ValueError:  # "http://[::1/v1": reported when the request is made
        return None


def url_host(url: str) -> str:
    return _hostname(url) or url


def is_local_url(url: str) -> bool:
    """A server on this machine or the local network (llama.cpp, Ollama, vLLM...)."""
    host = (_hostname(url) or "").lower()
    if not host:
        return False
    if host == "localhost" or host.endswith((".localhost", ".local", ".lan", ".internal")):
        return True
    if "." not in host and ":" not in host:
        return True  # a bare LAN machine name
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


@asynccontextmanager
async def post(
    url: str,
    *,
    headers: dict[str, str],
    body: bytes,
    timeout_s: float,
    secrets: Iterable[str | None],
    model: str,
) -> AsyncIterator[httpx.Response]:
    """POST ``body`` and yield the response, its body not read yet.

    Transport failures become ProviderErrors: transient for timeouts and broken
    connections, ``other`` for a URL that cannot work. Their text never includes
    the request's headers. The HTTP status is the caller's to judge (providers
    word their errors differently).
    """
    import httpx

    secrets = tuple(secrets)
    timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, CONNECT_TIMEOUT_S))
    host = url_host(url)
    try:
        # No proxies from the environment for a local server: a corporate proxy
        # cannot reach the user's 127.0.0.1.
        async with (
            httpx.AsyncClient(timeout=timeout, trust_env=not is_local_url(url)) as client,
            client.stream("POST", url, headers=headers, content=body) as response,
        ):
            yield response
    except httpx.TimeoutException as exc:
        phase = {
            httpx.ConnectTimeout: "connecting",
            httpx.ReadTimeout: "waiting for data",
            httpx.WriteTimeout: "sending the request",
            httpx.PoolTimeout: "waiting for a connection",
        }.get(type(exc), "waiting")
        message = f"Request to {host} timed out after {timeout_s:g} s {phase}"
        raise ProviderError(message, error_kind="transient", model=model) from None
    except httpx.DecodingError as exc:
        message = scrub(f"Malformed response body from {host}: {exc}", secrets)
        raise ProviderError(message, error_kind="badResponse", model=model) from None
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
        # A mistyped base URL: retrying cannot help.
        message = scrub(f"Invalid URL for {model}: {exc or type(exc).__name__}", secrets)
        raise ProviderError(message, error_kind="other", model=model) from None
    except (httpx.ConnectError, httpx.RemoteProtocolError) as exc:
        message = scrub(f"Connection error with {host}: {exc or type(exc).__name__}", secrets)
        raise ProviderError(message, error_kind="transient", model=model) from None
    except httpx.TransportError as exc:
        message = scrub(f"Network error with {host}: {exc or type(exc).__name__}", secrets)
        raise ProviderError(message, error_kind="transient", model=model) from None
    except (httpx.HTTPError, httpx.StreamError) as exc:
        message = scrub(f"Request to {host} failed: {exc or type(exc).__name__}", secrets)
        raise ProviderError(message, error_kind="other", model=model) from None


async def read_body(response: httpx.Response, limit: int = MAX_BODY_BYTES) -> bytes:
    """The response body, at most ``limit`` bytes of it."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size >= limit:
            break
    return b"".join(chunks)[:limit]


async def status_error(
    response: httpx.Response, *, secrets: Iterable[str | None], model: str
) -> ProviderError:
    """The ProviderError for a non-2xx answer: pi-shaped text, kind, retry-after."""
    body = await read_body(response, 64 * 1024)
    secrets = tuple(secrets)
    message = scrub(http_error_message(response.status_code, body, secrets), secrets)
    retry_after = retry_after_from_headers(response.headers)
    if retry_after is None:
        retry_after = retry_after_from_text(message)
    return ProviderError(
        message, status=response.status_code, retry_after_ms=retry_after, model=model
    )


class StallWatch:
    """Fails a stream that stays open without new content for ``timeout_s``.

    Keep-alives (SSE comments, Anthropic's ``ping``) reset the read timeout but
    are not progress; this catches a server that only ever sends those.
    """

    def __init__(self, timeout_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._timeout = timeout_s
        self._clock = clock
        self._last = clock()

    def progressed(self) -> None:
        self._last = self._clock()

    def check(self, model: str) -> None:
        idle = self._clock() - self._last
        if idle > self._timeout:
            raise ProviderError(
                f"stream stall: no content from {model} for {idle:.1f} s",
                error_kind="transient",
                model=model,
            )
