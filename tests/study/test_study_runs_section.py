"""``STUDY.md``'s runs section travels: it names no path of the machine that ran the study, names each run shipped as
a replay pack by its path in the repository, and says how the rest are regenerated."""

from __future__ import annotations

from ecdysis.replay.pack import shipped_packs
from ecdysis.study.results import StudyRow
from ecdysis.study.table import runs_paragraph

SE_TRAIN = "dbbench-qwen-a49c5331bc-se-train-343e05"


def _row(configuration: str, train: str | None, evaluated: str) -> StudyRow:
    return StudyRow(configuration=configuration, model="local/qwen-1.5b", eval_run=evaluated, train_run=train,
                    harness=None, n_tasks=20, accuracy=None, pass_at_k=None, pass_hat_k=None, training_time_s=None,
                    modification_calls=None, tokens=0, cache_hit=None, response_cache_hits=0, cost_usd=None)


def test_the_runs_section_names_shipped_packs_by_repository_path_and_no_machine_path() -> None:
    shipped = shipped_packs()
    assert shipped == {SE_TRAIN: "ecdysis/configs/demo-packs/dbbench-qwen-se.pack.tar.gz"}
    rows = [_row("se", SE_TRAIN, "se-eval-1"), _row("human", None, "human-eval-1")]
    text = "\n".join(runs_paragraph(rows, {**shipped, "a-run-of-another-study": "ecdysis/x.pack.tar.gz"}))
    assert f"- `{SE_TRAIN}`: `ecdysis/configs/demo-packs/dbbench-qwen-se.pack.tar.gz`" in text
    assert "another-study" not in text
    assert "`ecdysis replay PACK` and `ecdysis verify PACK`" in text and "Every other run is regenerated" in text
    assert "/root" not in text and "/home" not in text and "STORE" in text
    assert "The runs are regenerated" in "\n".join(runs_paragraph(rows, {}))
