"""A twins study's section of the report (compare: twins in workflow/studies.yaml): each run of the
study held against its twin, the run of another group that differs from it only in the study's
axis. The precision study is one: each bf16 run against its fp32 twin, the run with the same
model, seed, corpus and lr, so the same batches: the grid's where there is one, else another
study's (the size study's at size S).

Each difference of best val gets its 95% interval from the pooled noise of both setups (bf16 and
fp32 are two: anatomy/report/uncertainty.py), and the table's differences are judged together
(Holm). Then the headline claims are judged again on the study's runs alone, in their twins'
roles, by the code that judges them on the grid (anatomy/report/claims.py), and the two verdicts
are set side by side.
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from anatomy.language import N_, _, pgettext
from anatomy.report.claims import beyond_cell, headline_claims, untestable_reason
from anatomy.report.roles import only_runs_of
from anatomy.report.uncertainty import Difference, compare, interval_text, judge
from anatomy.report.wording import fmt, md_table
from anatomy.results.groups import is_study
from anatomy.results.reader import MODEL_FIELDS, Results
from anatomy.results.studies import Study

COMPARED = {  # column -> how the table names it (shown with _())
    "best_val_loss": N_("best val"),
    "best_step": N_("at step"),
    "final_val_loss": N_("final val"),
    "final_train_loss": N_("final train"),
}
# what makes two runs twins, besides the study's axis: the model, the seed, the text and the lr
# (n_parts follows from the model: a key, so that it is one column of the merge)
TWIN_KEYS = sorted(MODEL_FIELDS - {"vocab_size"}) + [
    "n_parts",
    "seed",
    "vocab_size",
    "train_tokens",
    "val_tokens",
    "lr",
    "precision",
]


def twins(study: Study, everything: Results) -> pd.DataFrame:
    """One row per run of the study that has a twin: both runs' numbers side by side (columns
    NAME_mine and NAME_twin). The twin is the grid's run where there is one (the headline pair's),
    else another study's (the size study's fp32 runs at the same size and lr)."""
    runs = everything.runs
    mine = runs[runs["group"] == study.name]
    others = runs[runs["group"] != study.name]
    others = others.assign(from_a_study=others["group"].map(is_study)).sort_values("from_a_study", kind="stable")
    keys = [key for key in TWIN_KEYS if key not in study.axis]
    pairs = mine.merge(others, on=keys, suffixes=("_mine", "_twin"))
    differs = pd.Series(False, index=pairs.index)
    for column in study.axis:  # a twin differs in the axis, or it is the same run of another group
        differs |= pairs[f"{column}_mine"] != pairs[f"{column}_twin"]
    same_text = (
        pairs["corpus_digest_mine"].isna()
        | pairs["corpus_digest_twin"].isna()
        | (pairs["corpus_digest_mine"] == pairs["corpus_digest_twin"])
    )
    pairs = pairs[differs & same_text].drop_duplicates(subset="run_id_mine", keep="first")  # the grid's first
    return pairs.sort_values(["n_parts", "n_layer", "seed"], ascending=[True, True, False])


def axis_value(pairs: pd.DataFrame, side: str, study: Study) -> str:
    """The axis values of one side of the pairs, as the text names them: a word as it is ('bf16',
    'fp32'), a number with its setting's name ('warmup_steps 0')."""

    def named(row: pd.Series) -> str:
        return ", ".join(
            value if isinstance(value, str) else f"{column} {value:g}" for column, value in zip(study.axis, row)
        )

    values = pairs[[f"{column}_{side}" for column in study.axis]].apply(named, axis=1)
    return " / ".join(sorted(values.unique()))


def model_name(pair: pd.Series, usual_layers: int) -> str:
    """The study run's model: named by its parts, with its layers where it is deeper than the
    headline's, or with its size and lr where its twin is another study's (the size study's)."""
    n_parts = int(pair["n_parts"])
    name = {0: _("vanilla (2017)"), 5: "mini-LLaMA"}.get(n_parts, _("{n} of the five parts").format(n=n_parts))
    if pair["from_a_study"]:
        return _("{name}, {layers}×{width} at lr {lr} (the {study} study's twin)").format(
            name=name,
            layers=int(pair["n_layer"]),
            width=int(pair["d_model"]),
            lr=f"{pair['lr']:g}",
            study=pair["group_twin"],
        )
    return (
        name
        if pair["n_layer"] == usual_layers
        else _("{name}, {layers} layers").format(name=name, layers=int(pair["n_layer"]))
    )


def twin_differences(data: Results, pairs: pd.DataFrame) -> dict[str, Difference]:
    """Each study run's best val minus its twin's, by the study run's id, with its interval from
    both setups' pooled noise, the table's differences judged together (Holm)."""
    runs = data.runs.set_index("run_id", drop=False)
    return judge(
        {
            pair["run_id_mine"]: compare(data.noise, runs.loc[[pair["run_id_mine"]]], runs.loc[[pair["run_id_twin"]]])
            for _index, pair in pairs.iterrows()
        }
    )


def twin_runs(data: Results, pair: pd.Series) -> tuple[pd.DataFrame, pd.DataFrame]:
    runs = data.runs
    return runs[runs["run_id"] == pair["run_id_mine"]], runs[runs["run_id"] == pair["run_id_twin"]]


def comparison_table(data: Results, pairs: pd.DataFrame, differences: dict[str, Difference], values: dict) -> str:
    rows = []
    # the headline's depth; a deeper twin is named by its layers
    usual_layers = pairs.loc[~pairs["from_a_study"].astype(bool), "n_layer"].min()
    for _index, pair in pairs.iterrows():
        cells = [model_name(pair, usual_layers), str(int(pair["seed"]))]
        for column in COMPARED:
            twin, mine = pair[f"{column}_twin"], pair[f"{column}_mine"]
            if column == "best_step":
                cells.append(f"{int(twin)} → {int(mine)}")
            else:
                # four decimals: the differences are far below the three a loss is quoted with
                cells.append(f"{fmt(twin, 4)} → {fmt(mine, 4)} ({fmt(mine - twin, 4, sign=True)})")
        d = differences[pair["run_id_mine"]]
        cells += [interval_text(d), beyond_cell(d, untestable_reason(*twin_runs(data, pair)))]
        rows.append(cells)
    header = [
        _("model"),
        _("seed"),
        *(_("{name}, {twin} → {mine}").format(name=_(name), **values) for name in COMPARED.values()),
        _("best val, {mine} minus {twin} (95% interval)").format(**values),
        _("beyond noise?"),
    ]
    return md_table(header, rows)


def in_twins_roles(study: Results, pairs: pd.DataFrame) -> Results:
    """Each study run in its twin's group (the headline pair as headline, a deep run as a break
    test), so that claims() finds the roles in the study's runs as it finds them in the grid."""
    groups = pairs.set_index("run_id_mine")["group_twin"]
    runs = study.runs.assign(group=study.runs["run_id"].map(groups))
    return dataclasses.replace(study, runs=runs)


def verdict_rows(study: Results, grid: Results, pairs: pd.DataFrame) -> tuple[list[list[str]], bool]:
    """Each headline claim's verdict on the grid and on the study's runs, and whether every one is
    the same."""
    on_grid = list(headline_claims(grid).values())
    on_study = list(headline_claims(in_twins_roles(study, pairs)).values())
    rows = [
        [
            a.claim,
            a.verdict,
            b.verdict,
            pgettext("same?", "yes") if a.verdict == b.verdict else pgettext("same?", "**no**"),
        ]
        for a, b in zip(on_grid, on_study)
    ]
    return rows, all(a.verdict == b.verdict for a, b in zip(on_grid, on_study))


@dataclasses.dataclass
class TwinsFindings:
    answer: str  # the finding in two sentences
    comparison: str  # each run against its twin (a Markdown table)
    verdicts: str  # the headline claims' verdicts on the grid and on the study's runs (a Markdown table)


def twins_findings(data: Results, study: Study) -> TwinsFindings | None:
    """The study's findings (the report's section and the dashboard's page say them alike), or
    None while no run of the study has a twin."""
    mine, grid = only_runs_of(data, study.name), only_runs_of(data, None)
    pairs = twins(study, data)
    if pairs.empty:
        return None
    values = dict(mine=axis_value(pairs, "mine", study), twin=axis_value(pairs, "twin", study))
    differences = twin_differences(data, pairs)
    judged = [d for d in differences.values() if d.beyond is not None]
    largest = max(differences.values(), key=lambda d: abs(d.mean) if pd.notna(d.mean) else -1.0)
    rows, same = verdict_rows(mine, grid, pairs)
    answer = (
        _(
            "{beyond} of {runs} {mine} runs have a best val beyond noise of their {twin} twin's (the table's {n} "
            "testable differences, each with its 95% interval, judged together); the largest difference is "
            "{largest}. Every headline verdict is the same in {mine}."
        )
        if same
        else _(
            "{beyond} of {runs} {mine} runs have a best val beyond noise of their {twin} twin's (the table's {n} "
            "testable differences, each with its 95% interval, judged together); the largest difference is "
            "{largest}. **Some headline verdicts differ in {mine}**."
        )
    ).format(
        beyond=sum(bool(d.beyond) for d in judged),
        runs=len(pairs),
        n=len(judged),
        largest=interval_text(largest),
        **values,
    )
    header = [
        _("the chapter says"),
        _("verdict, {twin} grid").format(**values),
        _("verdict, {mine} runs").format(**values),
        _("same?"),
    ]
    return TwinsFindings(answer, comparison_table(data, pairs, differences, values), md_table(header, rows))


def twins_section(data: Results, study: Study) -> str | None:
    """The report's section: the comparison, the answer, the verdicts side by side."""
    findings = twins_findings(data, study)
    if findings is None:
        return None
    return "\n\n".join([findings.comparison, findings.answer, findings.verdicts])
