"""sessiond: a local sidecar daemon that owns LLM coding-agent sessions.

The public Python API is small on purpose; everything else is an
implementation module that may change between releases.
"""

from ._version import __version__
from .errors import SessiondError

__all__ = ["SessiondError", "__version__"]
