"""``python -m perf``: run every benchmark side by side and write BENCHMARKS.md (see perf.suite)."""

from perf.suite import main

if __name__ == "__main__":
    raise SystemExit(main())
