"""What the OpenAI-compatible and Anthropic summarizers share: one streaming POST.

A subclass says where to send (``_endpoint``), what (``_body``, ``_request_headers``)
and how to read the event stream (``_read``); this class keeps the key out of
reprs and logs, turns a non-2xx answer into a ``ProviderError``, and feeds the
progress meter.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import ClassVar

from sessiond.llm.base import Completion, CompletionRequest, ProgressCallback, ProgressMeter
from sessiond.llm.transport import post, status_error
from sessiond.redaction import header_secrets, url_secrets


class StreamingSummarizer:
    default_base_url: ClassVar[str]
    provider: ClassVar[str]

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        reasoning: bool = False,
        headers: Mapping[str, str] | None = None,
        label: str | None = None,
    ) -> None:
        self.model = model
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        self._api_key = api_key
        self.timeout_s = timeout_s
        self.reasoning = reasoning
        # Lower-cased so that ours replace, not duplicate, a configured "Authorization".
        self._headers = {k.lower(): v for k, v in (headers or {}).items()}
        self.label = label or f"{self.provider}/{model}"

    def __repr__(self) -> str:  # the key stays out of reprs, hence out of logs
        return f"{type(self).__name__}(label={self.label!r}, base_url={self.base_url!r})"

    @property
    def _secrets(self) -> tuple[str | None, ...]:
        return (self._api_key, *header_secrets(self._headers), *url_secrets(self.base_url))

    def _endpoint(self) -> str:
        raise NotImplementedError

    def _body(self, request: CompletionRequest) -> bytes:
        raise NotImplementedError

    def _request_headers(self) -> dict[str, str]:
        raise NotImplementedError

    async def _read(self, lines: AsyncIterator[str], meter: ProgressMeter) -> Completion:
        raise NotImplementedError

    async def complete(
        self, request: CompletionRequest, progress: ProgressCallback | None = None
    ) -> Completion:
        async with post(
            self._endpoint(),
            headers=self._request_headers(),
            body=self._body(request),
            timeout_s=self.timeout_s,
            secrets=self._secrets,
            model=self.label,
        ) as response:
            if not 200 <= response.status_code < 300:
                raise await status_error(response, secrets=self._secrets, model=self.label)
            return await self._read(response.aiter_lines(), ProgressMeter(progress, self.label))
