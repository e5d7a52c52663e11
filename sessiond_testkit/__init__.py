"""What the tests and the benchmarks share: realistic pi session files, made on demand.

- ``generate_session``: sessions of any size as pi 0.73.1 writes them, deterministic from a
  seed (``python -m sessiond_testkit.generate_session --help``);
- ``pi_format``: builders for pi's v3 lines, key order and number format as pi writes them;
- ``corpus``: the seeded text the generator draws from.

Not part of sessiond: it is neither installed with it nor imported by it. The tests find it
through pytest's ``pythonpath`` (pyproject.toml); the benchmarks, run from the repository
root with ``python -m bench....``, find it there.
"""
