"""Benchmarks for sessiond, each against pi in the same run (see README.md here)."""
