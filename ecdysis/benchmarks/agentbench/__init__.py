"""AgentBench's DBBench and OS-interaction tasks (THUDM/AgentBench, Apache-2.0; data not included)."""
