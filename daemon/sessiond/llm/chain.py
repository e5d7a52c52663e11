"""Candidates tried in order, with oh-my-pi's retries and backoff for compaction.

Auto mode (auto-compaction, and sessiond's default): for each usable candidate,
try; an auth failure moves on; a rate limit, a usage limit, a transient failure
or any failure that names a retry-after is retried after
``baseDelayMs * 2**attempt`` (or the retry-after, if longer), at most
``maxRetries`` times; a wait longer than ``maxCandidateDelayMs`` moves on when
another candidate remains; an overflow is never retried; anything else moves
on. Manual mode is pi's manual path: no retries, only auth failures move on,
any other failure is raised at once.

When every candidate failed in auto mode, the offline extractive summarizer
stands in (``extractiveFallback``, on by default) and says why in
``fallbackReason``. A manual run never falls back: the user asked for a model's
summary, so pi's credentials error (or the failure) is raised and nothing is
written. With no candidate configured at all it is simply the summarizer.

When pi's remote endpoint is configured (and ``remoteEnabled``), history,
update and short summaries go there instead of to a model (``llm.remote``); turn
prefixes and branch summaries still use the candidates.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, TypeAlias

import msgspec

from sessiond.errors import OperationCancelledError
from sessiond.llm.base import (
    Attempt,
    Completion,
    CompletionRequest,
    ProgressCallback,
    Summarizer,
)
from sessiond.llm.candidates import ResolvedCandidate, resolve
from sessiond.llm.delegated import DelegatedComplete
from sessiond.llm.errors import (
    NO_AVAILABLE_MODEL,
    ProviderError,
    credentials_error,
    scrub,
    scrub_error,
    scrub_secrets,
)
from sessiond.llm.extractive import MODEL_LABEL as EXTRACTIVE_LABEL
from sessiond.llm.extractive import ExtractiveSummarizer
from sessiond.llm.remote import RemoteSummarizer
from sessiond.llm.retry_after import retry_after_from_text
from sessiond.redaction import url_secrets
from sessiond.settings import RetrySettings, Settings, SummarizerSettings

_log = logging.getLogger(__name__)

Mode: TypeAlias = Literal["auto", "manual"]
SleepFn: TypeAlias = Callable[[float], Awaitable[None]]
# Fits a request to a candidate's context window (None: window unknown).
RequestFitter: TypeAlias = Callable[[CompletionRequest, int | None], CompletionRequest]

REMOTE_PURPOSES = frozenset({"history", "update", "short"})
REMOTE_TIMEOUT_S = 120.0
_RETRYABLE_KINDS = frozenset({"transient", "usageLimit", "rateLimit"})


def retry_delay_ms(error: ProviderError, attempt: int, retry: RetrySettings) -> int | None:
    """The wait before retrying after failed try number ``attempt`` (0-based), or
    None when this failure is not to be retried."""
    if not retry.enabled or attempt >= retry.max_retries:
        return None
    retry_after = error.retry_after_ms
    if retry_after is None:
        retry_after = retry_after_from_text(error.message)
    if retry_after is None and error.error_kind not in _RETRYABLE_KINDS:
        return None
    delay: int = retry.base_delay_ms * 2**attempt
    return delay if retry_after is None else max(delay, retry_after)


@dataclass
class _Run:
    """What one ``complete`` call carries from candidate to candidate."""

    secrets: tuple[str, ...]
    progress: ProgressCallback | None
    mode: Mode
    attempts: list[Attempt] = field(default_factory=list)


class SummarizerChain:
    """The summarizer compaction and branch summaries call. Build it per call site
    or keep one: keys are read from the environment on every ``complete``."""

    def __init__(
        self,
        summarizer: SummarizerSettings | None = None,
        retry: RetrySettings | None = None,
        *,
        remote_endpoint: str | None = None,
        delegated: DelegatedComplete | None = None,
        sleep: SleepFn = asyncio.sleep,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.settings = summarizer or SummarizerSettings()
        self.retry = retry or RetrySettings()
        self.remote_endpoint = remote_endpoint
        self._delegated = delegated
        self._sleep = sleep
        self._environ = environ

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        delegated: DelegatedComplete | None = None,
        sleep: SleepFn = asyncio.sleep,
        environ: Mapping[str, str] | None = None,
    ) -> SummarizerChain:
        compaction = settings.compaction
        endpoint = compaction.remote_endpoint if compaction.remote_enabled else None
        return cls(
            settings.summarizer,
            settings.retry,
            remote_endpoint=endpoint or None,
            delegated=delegated,
            sleep=sleep,
            environ=environ,
        )

    def candidates(self, request: CompletionRequest) -> list[ResolvedCandidate]:
        """What ``complete`` would try for this request, keys looked up now."""
        if self.remote_endpoint and request.purpose in REMOTE_PURPOSES:
            remote = RemoteSummarizer(self.remote_endpoint, timeout_s=REMOTE_TIMEOUT_S)
            secrets = tuple(url_secrets(self.remote_endpoint))
            return [ResolvedCandidate(remote.label, remote, secrets=secrets)]
        environ = os.environ if self._environ is None else self._environ
        return [resolve(c, environ, self._delegated) for c in self.settings.candidates]

    async def complete(
        self,
        request: CompletionRequest,
        progress: ProgressCallback | None = None,
        *,
        mode: Mode = "auto",
        fit: RequestFitter | None = None,
    ) -> Completion:
        candidates = self.candidates(request)
        if not candidates:
            return await self._extractive(request, progress, [], reason=None)
        run = _Run(
            secrets=tuple(secret for c in candidates for secret in c.secrets),
            progress=progress,
            mode=mode,
        )
        last_error: ProviderError | None = None
        for index, candidate in enumerate(candidates):
            if candidate.summarizer is None:
                _log.info("summarizer %s skipped: %s", candidate.label, candidate.skip_reason)
                run.attempts.append(
                    Attempt(
                        candidate=candidate.label,
                        attempt=0,
                        outcome="skipped",
                        error=candidate.skip_reason,
                    )
                )
                continue
            fitted = request if fit is None else fit(request, candidate.context_window)
            more_remain = any(c.summarizer is not None for c in candidates[index + 1 :])
            outcome = await self._try_candidate(candidate, fitted, run, more_remain=more_remain)
            if isinstance(outcome, Completion):
                return msgspec.structs.replace(outcome, attempts=run.attempts)
            last_error = outcome
        final = self._final(self._give_up_error(candidates, last_error, mode), run.attempts)
        if self.settings.extractive_fallback and mode == "auto":
            _log.warning("every summarizer failed, using the extractive one: %s", final.message)
            return await self._extractive(request, progress, run.attempts, reason=final.message)
        raise final

    async def _try_candidate(
        self,
        candidate: ResolvedCandidate,
        request: CompletionRequest,
        run: _Run,
        *,
        more_remain: bool,
    ) -> Completion | ProviderError:
        """One candidate, retried as the rules say: its completion, or the error to
        remember when moving on. Raises in manual mode and on cancellation."""
        assert candidate.summarizer is not None
        attempt = 0
        while True:
            try:
                result = await candidate.summarizer.complete(request, run.progress)
            except OperationCancelledError:
                raise  # the client cancelled llm/complete: the user's cancel
            except ProviderError as exc:
                error = scrub_error(exc, run.secrets)
            except Exception as exc:
                # A bug in a summarizer must not cost the user the compaction.
                _log.debug("summarizer %s raised", candidate.label, exc_info=True)
                text = scrub(str(exc) or type(exc).__name__, run.secrets)
                error = ProviderError(text, model=candidate.label)
            else:
                run.attempts.append(
                    Attempt(candidate=candidate.label, attempt=attempt + 1, outcome="ok")
                )
                # A model (or a proxy) can echo the key it was called with; the summary
                # goes into the session file, where a key must never be.
                cleaned = scrub_secrets(result.text, run.secrets)
                if cleaned != result.text:
                    _log.warning("summarizer %s: redacted a key in its summary", candidate.label)
                    result = msgspec.structs.replace(result, text=cleaned)
                return result
            record = Attempt(
                candidate=candidate.label,
                attempt=attempt + 1,
                outcome="error",
                error_kind=error.error_kind,
                error=error.message,
                status=error.status,
            )
            run.attempts.append(record)
            if error.error_kind == "auth":
                _log.warning("summarizer %s: auth failed: %s", candidate.label, error.message)
                if candidate.model_backed:
                    return error.with_message(credentials_error(candidate.label))
                return error
            if run.mode == "manual":
                raise self._final(error, run.attempts)
            delay = self._wait_before_retry(error, attempt, more_remain=more_remain)
            if delay is None:
                _log.warning(
                    "summarizer %s failed (%s): %s",
                    candidate.label,
                    error.error_kind,
                    error.message,
                )
                return error
            record.delay_ms = delay
            _log.info(
                "summarizer %s failed (%s), retry %d in %d ms: %s",
                candidate.label,
                error.error_kind,
                attempt + 1,
                delay,
                error.message,
            )
            attempt += 1
            await self._sleep(delay / 1000)

    def _wait_before_retry(
        self, error: ProviderError, attempt: int, *, more_remain: bool
    ) -> int | None:
        """Milliseconds to wait before trying the same candidate again, or None to
        move on. An overflow would fail the same way again: never retried."""
        if error.error_kind == "overflow":
            return None
        delay = retry_delay_ms(error, attempt, self.retry)
        if delay is None:
            return None
        if delay > self.retry.max_candidate_delay_ms and more_remain:
            return None
        # pi's maxDelayMs: a longer server-requested wait is not waited out.
        if 0 < self.retry.max_delay_ms < delay:
            return None
        return delay

    @staticmethod
    def _give_up_error(
        candidates: list[ResolvedCandidate], last_error: ProviderError | None, mode: Mode
    ) -> ProviderError:
        if last_error is not None:
            return last_error
        if mode == "manual":
            # pi's manual path: nothing had usable credentials.
            first = next((c for c in candidates if c.model_backed), None)
            text = credentials_error(first.label if first is not None else None)
            return ProviderError(text, error_kind="auth")
        return ProviderError(NO_AVAILABLE_MODEL, error_kind="other")

    @staticmethod
    def _final(error: ProviderError, attempts: list[Attempt]) -> ProviderError:
        final = error.with_message(error.message)
        final.attempts = list(attempts)
        final.details["attempts"] = msgspec.to_builtins(final.attempts)
        return final

    @staticmethod
    async def _extractive(
        request: CompletionRequest,
        progress: ProgressCallback | None,
        attempts: list[Attempt],
        *,
        reason: str | None,
    ) -> Completion:
        result = await ExtractiveSummarizer().complete(request, progress)
        done = [*attempts, Attempt(candidate=EXTRACTIVE_LABEL, attempt=1, outcome="ok")]
        return msgspec.structs.replace(result, attempts=done, fallback_reason=reason)


if TYPE_CHECKING:  # the chain stands wherever a single summarizer would
    _chain_is_a_summarizer: type[Summarizer] = SummarizerChain
