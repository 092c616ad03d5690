"""Guidance the harness adds to the benchmark's system prompt."""

GUIDANCE = """
Work step by step: look before you change anything (for a database, inspect the table; for a shell, list files),
run one tool call per turn, and read its output before the next. Answers must be exact values, not sentences."""


def system_prompt(policy):
    return policy + "\n" + GUIDANCE
