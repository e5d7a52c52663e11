"""What the whole-process benchmarks share: how sessiond is run, and how times are shown."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path


def sessiond_command() -> list[str]:
    """The ``sessiond`` console script beside this Python, as a user or an editor runs it."""
    script = Path(sys.executable).with_name("sessiond")
    return [str(script)] if script.exists() else [sys.executable, "-m", "sessiond"]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms"


def median_and_range(values: list[float]) -> str:
    """The median and the range (lowest to highest) in milliseconds."""
    low, high = min(values) * 1000, ms(max(values))
    return f"{ms(statistics.median(values))} ({low:,.0f}\N{EN DASH}{high})"
