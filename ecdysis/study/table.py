"""``STUDY.md``: the paper's Table 1 in miniature (one row per configuration on the training model), the transfer
table (harness × eval model), how the intervals were made, and every run id to ``replay`` and ``verify``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ecdysis.study.config import StudyConfig
from ecdysis.study.funnel import training_funnel
from ecdysis.study.intervals import Interval
from ecdysis.study.manifest import StudyManifest
from ecdysis.study.plot import accuracy_svg
from ecdysis.study.results import StudyRow, rounds_of, study_rows


def write_study(study: StudyConfig, manifest: StudyManifest, store: Any, out: Path,
                shipped: dict[str, str] | None = None) -> list[StudyRow]:
    """Write ``out`` (markdown) and its plot beside it (``<stem>.svg``); returns the rows. ``shipped``: run id →
    repository path of the runs shipped as replay packs (`ecdysis.replay.pack.shipped_packs`)."""
    rows = study_rows(study, manifest, store)
    main = [r for r in rows if r.model == study.train_model]
    plot = out.with_suffix(".svg")
    out.parent.mkdir(parents=True, exist_ok=True)
    plot.write_text(accuracy_svg(main, title=f"{study.name} · {study.train_model}"), encoding="utf-8")
    text = study_markdown(study, manifest, rows, plot=plot.name, store=store, shipped=shipped)
    out.write_text(text, encoding="utf-8")
    return rows


def study_markdown(study: StudyConfig, manifest: StudyManifest, rows: Sequence[StudyRow], *, plot: str,
                   store: Any = None, shipped: dict[str, str] | None = None) -> str:
    """The whole file. It names no path of the machine that ran the study (its store is not shipped): the runs
    shipped as replay packs (``shipped``: run id → repository path; None: none) are named by their path in the
    repository, and the rest are regenerated with ``make study``."""
    k, benchmark = study.k, study.base.benchmark
    main = [r for r in rows if r.model == study.train_model]
    budget = study.budget_usd if study.budget_usd is not None else study.base.llm.max_usd
    heldout_tasks = max((r.n_tasks for r in main), default=0)
    lines = [f"# Study {study.name}", "",
             f"Study id `{manifest.study_id}` · benchmark `{benchmark.name}` · training model `{study.train_model}` · "
             f"seed {study.seed} · up to {study.max_rounds} rounds from `{study.train_from}` · held-out "
             f"{heldout_tasks} tasks of split `{study.heldout.split}` × {k} trials · budget "
             f"{'none' if budget is None else f'${budget:g}'} per run.", ""]
    unfinished = [r.configuration for r in main if r.eval_run is None]
    if unfinished:
        lines += [f"**Partial study:** no held-out run has finished yet for {', '.join(f'`{c}`' for c in unfinished)}"
                  " (rerun the study command to continue it).", ""]
    lines += ["## Held-out results", "",
             f"| configuration | accuracy | Pass@{k} | Pass^{k} | training time | modification calls | tokens | "
             "cache hit | cost |",
             "|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r.configuration} | {_interval(r.accuracy)} | {_interval(r.pass_at_k)} | {_interval(r.pass_hat_k)} | "
              f"{_duration(r.training_time_s)} | {_opt(r.modification_calls)} | {r.tokens:,} | "
              f"{'–' if r.cache_hit is None else f'{r.cache_hit:.1%}'} | "
              f"{'n/a' if r.cost_usd is None else f'${r.cost_usd:.4f}'} |" for r in main]
    lines += ["", f"![held-out accuracy per configuration]({plot})", ""]
    if len(study.eval_models) > 1:
        lines += _transfer(study, rows)
    if store is not None:
        lines += _training(main, store)
    lines += ["## How to read it", "",
              "- Each score is the mean over held-out tasks with a **95% percentile-bootstrap interval over tasks** "
              f"({study.bootstrap} resamples, seed {study.seed}): a task's accuracy is its mean reward over its "
              f"{k} trials, its Pass@{k} and Pass^{k} the unbiased estimators of τ²-bench. Infrastructure endings "
              "are excluded.",
              "- Training time is the wall time of the training rounds' phases (evaluation, diagnosis, coding, "
              "candidate evaluation); modification calls are the diagnosis and coding calls of training.",
              "- Tokens, cache hit and cost cover the configuration's training run and its held-out evaluation: cache "
              "hit is the provider's prompt caching (cached prompt tokens / prompt tokens); cost is n/a when no call "
              "was priced (local and scripted models). A call answered by our response cache (from this run or an "
              "earlier one) counts no tokens: a configuration whose harness equals one already evaluated can "
              "show none.",
              "- `direct` and `human` are the benchmark's seed harnesses, not trained; the other configurations "
              f"are trained from `{study.train_from}` on the same training tasks with the same model, seed and "
              "budget.", "",
              "## Runs", "", *runs_paragraph(rows, shipped or {}), "",
              "| configuration | model | training run | held-out run | harness |", "|---|---|---|---|---|"]
    lines += [f"| {r.configuration} | `{r.model}` | {_code(r.train_run)} | {_code(r.eval_run)} | "
              f"{_code(r.harness[:12] if r.harness else None)} |" for r in rows]
    return "\n".join(lines) + "\n"


def runs_paragraph(rows: Sequence[StudyRow], shipped: dict[str, str]) -> list[str]:
    """How to check the study's runs where they travel: the ones shipped as packs by their repository path, the rest
    by regenerating them; never a path of the machine that ran the study."""
    ids = {run for row in rows for run in (row.train_run, row.eval_run) if run}
    packed = {run: path for run, path in sorted(shipped.items()) if run in ids}
    lines = ["The runs were recorded in the study's own store (`ecdysis study --store`), which is not part of this "
             "repository. In a store that holds them, check any run with `ecdysis replay RUN --store STORE` (re-run "
             "from the response cache, compared step by step) and `ecdysis verify RUN --store STORE` (re-graded by "
             "the benchmark's official evaluator)."]
    if packed:
        lines += ["", "Shipped as replay packs (each carries its responses and the benchmark records it used, so "
                  "`ecdysis replay PACK` and `ecdysis verify PACK` need neither the store nor the benchmark data):", ""]
        lines += [f"- `{run}`: `{path}`" for run, path in packed.items()]
    lines += ["", f"{'Every other run is' if packed else 'The runs are'} regenerated by running the study again "
              "(`make study STUDY=<its config>`; a store that already holds finished runs skips them)."]
    return lines


def _training(rows: Sequence[StudyRow], store: Any) -> list[str]:
    """The funnel of each trained configuration's rounds, and a line per round."""
    trained = [r for r in rows if r.train_run is not None]
    if not trained:
        return []
    lines = ["## What training did", "",
             "Counts of rounds: with failures to diagnose; whose diagnosis produced a specification proposing a "
             "change; whose coder left a changed harness; whose candidate validated and was evaluated; whose "
             "candidate scored above its base on the training tasks; whose candidate was accepted.", "",
             "| configuration | rounds | specification | harness changed | validated | improved | accepted |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    details: list[str] = []
    for row in trained:
        assert row.train_run is not None
        funnel = training_funnel(store, row.train_run, rounds_of(store, row.train_run))
        lines.append(f"| {row.configuration} | {funnel.rounds} | {funnel.specified} | {funnel.changed} | "
                     f"{funnel.validated} | {funnel.improved} | {funnel.accepted} |")
        details += [f"- `{row.configuration}` {note}" for note in funnel.notes]
    return [*lines, "", *details, ""]


def _transfer(study: StudyConfig, rows: Sequence[StudyRow]) -> list[str]:
    """Harness (trained with the training model) × eval model: accuracy with its interval."""
    models = study.eval_models
    cell = {(r.configuration, r.model): r for r in rows}
    lines = ["## Transfer", "",
             f"Each configuration's harness (trained with `{study.train_model}`) evaluated on other task models: "
             "held-out accuracy with its 95% interval.", "",
             "| harness | " + " | ".join(f"`{m}`" for m in models) + " |", "|---" * (len(models) + 1) + "|"]
    lines += [f"| {c} | " + " | ".join(_interval(cell[c, m].accuracy) for m in models) + " |"
              for c in study.table_order]
    return [*lines, ""]


def _interval(value: Interval | None) -> str:
    return "–" if value is None else value.describe()


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _opt(value: int | None) -> str:
    return "–" if value is None else str(value)


def _code(value: str | None) -> str:
    return "–" if value is None else f"`{value}`"
