"""The stateful layer: compaction and navigation runs, hooks, events, per-session actors."""
