"""The examples' replays, shared by every test of this folder that reads real traffic.

Each example spawns its own daemon(s) (``python -m sessiond serve``) with HOME and the XDG
directories in a fresh temporary directory. Spawning costs about a second, so the examples
a run needs are replayed in parallel threads as soon as the first test asks, once per run:
the examples whose tests were selected, or all of them when a test that looks at the whole
traffic was selected.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from .replay import Transcript, example_paths, replay

EXAMPLES = example_paths()
WORKERS = 4
# Tests parametrized by one example, and tests that read every example's traffic.
PER_EXAMPLE = ("test_example", "test_example_follows_the_schema")
WHOLE_TRAFFIC = (
    "test_every_message_type_is_validated",
    "test_go_types_from_quicktype_round_trip_the_traffic",
    "test_python_types_from_datamodel_code_generator_round_trip_the_traffic",
    "test_the_traffic_holds_no_field_the_schema_does_not_list",
)


@pytest.fixture(scope="session")
def replays(request: pytest.FixtureRequest) -> Iterator[dict[str, Future[Transcript]]]:
    """Start replaying the examples this run needs, in parallel."""
    items = request.session.items
    if any(item.originalname in WHOLE_TRAFFIC for item in items):
        selected = {path.name for path in EXAMPLES}
    else:
        selected = {
            item.callspec.params["example"].name
            for item in items
            if item.originalname in PER_EXAMPLE and hasattr(item, "callspec")
        }
    with tempfile.TemporaryDirectory(prefix="sessiond-protocol-") as tmp:
        root = Path(tmp)
        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            futures = {
                path.name: pool.submit(replay, path, root / path.stem)
                for path in EXAMPLES
                if path.name in selected
            }
            yield futures
