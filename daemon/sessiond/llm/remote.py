"""pi's remote compaction endpoint (``compaction.remoteEndpoint``): ``{systemPrompt, prompt}
-> {summary}``.

The failure texts are oh-my-pi's, word for word, because users and extensions
match on them.
"""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

import msgspec

from sessiond.llm.base import Completion, CompletionRequest, ProgressCallback, ProgressMeter
from sessiond.llm.errors import ProviderError
from sessiond.llm.retry_after import retry_after_from_headers
from sessiond.llm.transport import MAX_BODY_BYTES, post, read_body, url_host
from sessiond.redaction import header_secrets, url_secrets

MISSING_SUMMARY = "Remote compaction response missing summary"


class _RemoteRequest(msgspec.Struct, rename="camel"):
    system_prompt: str
    prompt: str


def _reason(status: int, phrase: str) -> str:
    if phrase:
        return phrase
    try:  # HTTP/2 has no reason phrase; fetch's statusText would be empty there too
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


class RemoteSummarizer:
    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 120.0,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        label: str | None = None,
    ) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self._api_key = api_key
        # Lower-cased so that ours replace, not duplicate, a configured "Authorization".
        self._headers = {k.lower(): v for k, v in (headers or {}).items()}
        self.label = label or f"remote/{url_host(url)}"

    def __repr__(self) -> str:
        return f"RemoteSummarizer(label={self.label!r})"

    async def complete(
        self, request: CompletionRequest, progress: ProgressCallback | None = None
    ) -> Completion:
        headers = {"content-type": "application/json", **self._headers}
        if self._api_key:
            headers["authorization"] = f"Bearer {self._api_key}"
        body = msgspec.json.encode(
            _RemoteRequest(system_prompt=request.system_prompt, prompt=request.prompt)
        )
        async with post(
            self.url,
            headers=headers,
            body=body,
            timeout_s=self.timeout_s,
            secrets=(self._api_key, *header_secrets(self._headers), *url_secrets(self.url)),
            model=self.label,
        ) as response:
            status = response.status_code
            if not 200 <= status < 300:
                reason = _reason(status, response.reason_phrase)
                raise ProviderError(
                    f"Remote compaction failed ({status} {reason})",
                    status=status,
                    retry_after_ms=retry_after_from_headers(response.headers),
                    model=self.label,
                )
            raw = await read_body(response, MAX_BODY_BYTES)
        summary = _summary(raw)
        if summary is None:
            raise ProviderError(MISSING_SUMMARY, error_kind="badResponse", model=self.label)
        ProgressMeter(progress, self.label).add(summary)
        return Completion(text=summary, model=self.label)


def _summary(raw: bytes) -> str | None:
    try:
        data: Any = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None
    if isinstance(data, dict):
        summary = data.get("summary")
        if isinstance(summary, str):
            return summary
    return None
