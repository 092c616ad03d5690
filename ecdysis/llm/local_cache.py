"""Where the local-model runtime and its models are cached: one folder in the user's cache, and the pinned
llama-cpp-python version whose source both the wheel and llama.cpp's own server are built from."""

from __future__ import annotations

from ecdysis.usercache import cache_dir

LLAMA_CPP_VERSION = "0.3.36"
CACHE_DIR = cache_dir()
WHEEL_DIR = CACHE_DIR / "wheels"
MODEL_DIR = CACHE_DIR / "models"
