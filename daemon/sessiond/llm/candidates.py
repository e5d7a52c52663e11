"""From configured candidates to summarizers, with their keys read at call time.

A key lives in the environment variable the candidate names (``apiKeyEnv``);
settings never hold a key. With no ``apiKeyEnv`` and no ``baseUrl``, the
provider's usual variable is used (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``).
A candidate whose key is missing is skipped, as pi skips a model without an API
key, unless it needs none: a server on this machine or the local network that
was given no ``apiKeyEnv`` (llama.cpp, Ollama), pi's remote endpoint, the
client, or the extractive summarizer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sessiond.llm.anthropic import AnthropicSummarizer
from sessiond.llm.base import Summarizer
from sessiond.llm.delegated import DelegatedComplete, DelegatedSummarizer
from sessiond.llm.extractive import ExtractiveSummarizer
from sessiond.llm.openai import OpenAIChatSummarizer
from sessiond.llm.remote import RemoteSummarizer
from sessiond.llm.transport import is_local_url, url_host
from sessiond.redaction import header_secrets, remember, url_secrets
from sessiond.settings import SummarizerCandidate
from sessiond.settings_trust import key_variable

_AUTH_HEADERS = {"authorization", "x-api-key", "api-key"}


@dataclass(frozen=True)
class ResolvedCandidate:
    label: str
    summarizer: Summarizer | None
    # Why the candidate cannot be used now, when ``summarizer`` is None.
    skip_reason: str | None = None
    context_window: int | None = None
    # Whether an auth failure reads as pi's "requires usable credentials" error.
    model_backed: bool = False
    secrets: tuple[str, ...] = ()


def candidate_label(candidate: SummarizerCandidate) -> str:
    if candidate.kind in ("openai", "anthropic"):
        return f"{candidate.kind}/{candidate.model}"
    if candidate.kind == "remote":
        return f"remote/{url_host(candidate.base_url or '')}"
    if candidate.kind == "client":
        return f"client/{candidate.model or 'editor'}"
    return "extractive/rules"


def _key(
    candidate: SummarizerCandidate, environ: Mapping[str, str]
) -> tuple[bool, str | None, str | None]:
    """``(usable, key, reason_if_not)``."""
    env_name = key_variable(candidate.kind, candidate.api_key_env, candidate.base_url)
    if env_name:
        key = environ.get(env_name, "").strip()
        if key:
            remember(key)  # from now on, no log line or error of this process repeats it
            return True, key, None
        return False, None, f"No API key: environment variable {env_name} is not set"
    if candidate.kind == "remote" or is_local_url(candidate.base_url or ""):
        return True, None, None
    if any(name.lower() in _AUTH_HEADERS for name in candidate.headers):
        return True, None, None
    return False, None, "No API key: set apiKeyEnv to the variable that holds it"


def resolve(
    candidate: SummarizerCandidate, environ: Mapping[str, str], delegated: DelegatedComplete | None
) -> ResolvedCandidate:
    label = candidate_label(candidate)
    known_secrets = (*header_secrets(candidate.headers), *url_secrets(candidate.base_url))
    if candidate.kind == "extractive":
        return ResolvedCandidate(label, ExtractiveSummarizer())
    if candidate.kind == "client":
        if delegated is None:
            return ResolvedCandidate(label, None, "no client offered llm/complete")
        return ResolvedCandidate(
            label,
            DelegatedSummarizer(delegated, label=label),
            context_window=candidate.context_window,
        )
    if candidate.kind == "remote" and not candidate.base_url:
        return ResolvedCandidate(label, None, "a remote candidate needs baseUrl (its endpoint)")
    usable, key, reason = _key(candidate, environ)
    secrets = (key, *known_secrets) if key else known_secrets
    if not usable:
        return ResolvedCandidate(label, None, reason, model_backed=True, secrets=secrets)
    summarizer: Summarizer
    if candidate.kind == "remote":
        assert candidate.base_url is not None
        summarizer = RemoteSummarizer(
            candidate.base_url,
            timeout_s=candidate.timeout_seconds,
            api_key=key,
            headers=candidate.headers,
            label=label,
        )
    else:
        factory = OpenAIChatSummarizer if candidate.kind == "openai" else AnthropicSummarizer
        summarizer = factory(
            model=candidate.model,
            base_url=candidate.base_url,
            api_key=key,
            timeout_s=candidate.timeout_seconds,
            reasoning=candidate.reasoning,
            headers=candidate.headers,
            label=label,
        )
    return ResolvedCandidate(
        label,
        summarizer,
        context_window=candidate.context_window,
        model_backed=candidate.kind != "remote",
        secrets=secrets,
    )
