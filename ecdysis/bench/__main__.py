"""``python -m ecdysis.bench``: run every benchmark side by side and write BENCHMARKS.md (see ecdysis.bench.suite)."""

from ecdysis.bench.suite import main

if __name__ == "__main__":
    raise SystemExit(main())
