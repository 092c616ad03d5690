"""``python -m benchmarks``: run every benchmark side by side and write BENCHMARKS.md (see benchmarks.suite)."""

from benchmarks.suite import main

if __name__ == "__main__":
    raise SystemExit(main())
