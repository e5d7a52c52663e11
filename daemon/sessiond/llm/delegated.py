"""Client-delegated summarization: an editor that holds the user's model access does it.

The daemon supplies the callable; it sends ``llm/complete`` (the request's fields,
camelCase) to a client that declared ``capabilities.llm`` and returns the text
of the answer. Cancelling the task that awaits ``complete`` cancels that await,
which is where the daemon sends ``$/cancelRequest``. The daemon never sees a key.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeAlias

from sessiond.errors import OperationCancelledError
from sessiond.llm.base import Completion, CompletionRequest, ProgressCallback, ProgressMeter
from sessiond.llm.errors import ProviderError

DelegatedComplete: TypeAlias = Callable[[CompletionRequest], Awaitable[str]]


class DelegatedSummarizer:
    def __init__(self, call: DelegatedComplete, *, label: str = "client/editor") -> None:
        self._call = call
        self.label = label

    def __repr__(self) -> str:
        return f"DelegatedSummarizer(label={self.label!r})"

    async def complete(
        self, request: CompletionRequest, progress: ProgressCallback | None = None
    ) -> Completion:
        try:
            text = await self._call(request)
        except (ProviderError, OperationCancelledError):
            raise  # a cancelled llm/complete is the user's cancel, not a failure
        except Exception as exc:
            # A JSON-RPC error answer, a disconnect, a timeout: the client's words
            # are the error text, classified like a provider's.
            message = str(exc) or type(exc).__name__
            raise ProviderError(message, model=self.label) from None
        if not isinstance(text, str) or not text.strip():
            raise ProviderError(
                f"{self.label} returned no summary text", error_kind="badResponse", model=self.label
            )
        ProgressMeter(progress, self.label).add(text)
        return Completion(text=text, model=self.label)
