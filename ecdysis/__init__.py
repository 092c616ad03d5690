"""Ecdysis: efficient and effective training of runtime harnesses for LLM agents."""

__version__ = "0.1.0"
