"""Benchmarks: plain functions returning figures (no timed assertions in tests)."""
