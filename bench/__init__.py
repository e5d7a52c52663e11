"""Benchmarks for sessiond and the pi session generator they use."""
