"""Persistence of FDCR turns and reports as keyed store objects, so a round resumes in the middle of FDCR."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from ecdysis.evolution.fdcr.report import FDCRReport, Turn
from ecdysis.protocols import Store
from ecdysis.records import Role, stable_hash

log = logging.getLogger(__name__)

NAMESPACE = "fdcr"
REPORT_KEY = "report"


def object_key(run_id: str, round: int, name: str) -> str:
    """The key of one round's FDCR object in the ``fdcr`` namespace: ``<run_id>/<round>/<name>``, so objects
    of a round live under ``fdcr/<run_id>/<round>/`` (turns ``p1-analyst``..., ``moderator``, ``report``)."""
    return f"{run_id}/{round}/{name}"


def input_digest(role: Role, schema_name: str, messages: Sequence[dict[str, Any]]) -> str:
    """What a turn was asked, as a digest: role, expected schema and the exact messages."""
    return stable_hash({"role": role.value, "schema": schema_name, "messages": list(messages)})


class TurnJournal:
    """Loads and saves the turns of one round. Without a store it remembers nothing (every turn is asked)."""

    def __init__(self, store: Store | None, run_id: str, round: int) -> None:
        self._store = store
        self._run_id, self._round = run_id, round
        self.prefix = f"{NAMESPACE}/{object_key(run_id, round, '')}"

    def _key(self, name: str) -> str:
        return object_key(self._run_id, self._round, name)

    def load(self, key: str, digest: str) -> Turn | None:
        """The finished turn under ``key`` if it was asked exactly ``digest``; else None (it must be asked again)."""
        if self._store is None:
            return None
        data = self._store.get_object(NAMESPACE, self._key(key))
        if data is None:
            return None
        try:
            turn = Turn.model_validate_json(data)
        except ValidationError as exc:
            log.warning("FDCR turn %s%s is unreadable, asking again: %s", self.prefix, key, exc)
            return None
        if turn.input_digest != digest:
            log.info("FDCR turn %s%s was asked different input, asking again", self.prefix, key)
            return None
        return turn.model_copy(update={"resumed": True})

    def save(self, turn: Turn) -> None:
        """Persist a finished turn (stored with ``resumed`` false: it was asked when it was made)."""
        if self._store is not None:
            stored = turn.model_copy(update={"resumed": False})
            self._store.put_object(NAMESPACE, self._key(turn.key), stored.model_dump_json().encode())

    def save_report(self, report: FDCRReport) -> None:
        """Persist the round's report under ``fdcr/<run_id>/<round>/report``."""
        if self._store is not None:
            self._store.put_object(NAMESPACE, self._key(REPORT_KEY), report.model_dump_json(indent=1).encode())

    def load_report(self) -> FDCRReport | None:
        """The stored report of the round, if any."""
        if self._store is None:
            return None
        data = self._store.get_object(NAMESPACE, self._key(REPORT_KEY))
        return None if data is None else FDCRReport.model_validate_json(data)
