"""The precision study's section of the report: does training in bf16 change any finding?

Each bf16 run (group `precision`, workflow/experiments.yaml) is held against its fp32 twin: the
run with the same model, seed, corpus and lr, so the same batches: the grid's where there is one,
else another study's (the size study's at size S). Each
difference of best val gets its 95% interval from the pooled noise of both setups (bf16 and fp32
are two: anatomy/report/uncertainty.py), and the table's differences are judged together (Holm).
Then the headline claims are judged again on the bf16 runs alone, by the code that judges them on
the fp32 grid (anatomy/report/claims.py), and the two verdicts are set side by side.
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from anatomy.language import N_, _, pgettext
from anatomy.report.claims import beyond_cell, headline_claims, untestable_reason
from anatomy.results.reader import MODEL_FIELDS, Results
from anatomy.report.roles import only_runs_of
from anatomy.results.groups import is_study
from anatomy.report.wording import fmt, md_table
from anatomy.report.uncertainty import Difference, compare, interval_text, judge

STUDY = "precision"
COMPARED = {  # column -> how the table names it (shown with _())
    "best_val_loss": N_("best val"),
    "best_step": N_("at step"),
    "final_val_loss": N_("final val"),
    "final_train_loss": N_("final train"),
}
# what makes two runs twins, besides the precision: the model, the seed, the text and the lr
# (n_parts follows from the model: a key, so that it is one column of the merge)
TWIN_KEYS = sorted(MODEL_FIELDS - {"vocab_size"}) + [
    "n_parts",
    "seed",
    "vocab_size",
    "train_tokens",
    "val_tokens",
    "lr",
]


def fp32_twins(study: Results, everything: Results) -> pd.DataFrame:
    """One row per bf16 run that has an fp32 twin: both runs' numbers side by side (columns
    NAME_bf16 and NAME_fp32). The twin is the grid's run where there is one (the headline pair's),
    else another study's (the size study's fp32 runs at the same size and lr)."""
    mine = study.runs[study.runs["precision"] == "bf16"]
    runs = everything.runs
    twins = runs[(runs["precision"] == "fp32") & (runs["group"] != STUDY)]
    twins = twins.assign(from_a_study=twins["group"].map(is_study)).sort_values("from_a_study", kind="stable")
    pairs = mine.merge(twins, on=TWIN_KEYS, suffixes=("_bf16", "_fp32"))
    same_text = (
        pairs["corpus_digest_bf16"].isna()
        | pairs["corpus_digest_fp32"].isna()
        | (pairs["corpus_digest_bf16"] == pairs["corpus_digest_fp32"])
    )
    pairs = pairs[same_text].drop_duplicates(subset="run_id_bf16", keep="first")  # the grid's twin first
    return pairs.sort_values(["n_parts", "n_layer", "seed"], ascending=[True, True, False])


def model_name(pair: pd.Series, usual_layers: int) -> str:
    """The bf16 run's model: named by its parts, with its layers where it is deeper than the
    headline's, or with its size and lr where its twin is another study's (the size study's)."""
    n_parts = int(pair["n_parts"])
    name = {0: _("vanilla (2017)"), 5: "mini-LLaMA"}.get(n_parts, _("{n} of the five parts").format(n=n_parts))
    if pair["from_a_study"]:
        return _("{name}, {layers}×{width} at lr {lr} (the {study} study's twin)").format(
            name=name,
            layers=int(pair["n_layer"]),
            width=int(pair["d_model"]),
            lr=f"{pair['lr']:g}",
            study=pair["group_fp32"],
        )
    return (
        name
        if pair["n_layer"] == usual_layers
        else _("{name}, {layers} layers").format(name=name, layers=int(pair["n_layer"]))
    )


def twin_differences(data: Results, pairs: pd.DataFrame) -> dict[str, Difference]:
    """Each bf16 run's best val minus its fp32 twin's, by the bf16 run's id, with its interval from
    both setups' pooled noise, the table's differences judged together (Holm)."""
    runs = data.runs.set_index("run_id", drop=False)
    return judge(
        {
            pair["run_id_bf16"]: compare(data.noise, runs.loc[[pair["run_id_bf16"]]], runs.loc[[pair["run_id_fp32"]]])
            for _index, pair in pairs.iterrows()
        }
    )


def twin_runs(data: Results, pair: pd.Series) -> tuple[pd.DataFrame, pd.DataFrame]:
    runs = data.runs
    return runs[runs["run_id"] == pair["run_id_bf16"]], runs[runs["run_id"] == pair["run_id_fp32"]]


def comparison_table(data: Results, pairs: pd.DataFrame, differences: dict[str, Difference]) -> str:
    rows = []
    # the headline's depth; a deeper twin is named by its layers
    usual_layers = pairs.loc[~pairs["from_a_study"].astype(bool), "n_layer"].min()
    for _index, pair in pairs.iterrows():
        cells = [model_name(pair, usual_layers), str(int(pair["seed"]))]
        for column in COMPARED:
            fp32, bf16 = pair[f"{column}_fp32"], pair[f"{column}_bf16"]
            if column == "best_step":
                cells.append(f"{int(fp32)} → {int(bf16)}")
            else:
                # four decimals: the differences are far below the three a loss is quoted with
                cells.append(f"{fmt(fp32, 4)} → {fmt(bf16, 4)} ({fmt(bf16 - fp32, 4, sign=True)})")
        d = differences[pair["run_id_bf16"]]
        cells += [interval_text(d), beyond_cell(d, untestable_reason(*twin_runs(data, pair)))]
        rows.append(cells)
    header = [
        _("model"),
        _("seed"),
        *(_("{name}, fp32 → bf16").format(name=_(name)) for name in COMPARED.values()),
        _("best val, bf16 minus fp32 (95% interval)"),
        _("beyond noise?"),
    ]
    return md_table(header, rows)


def in_twins_roles(study: Results, pairs: pd.DataFrame) -> Results:
    """Each bf16 run in its fp32 twin's group (the headline pair as headline, a deep run as a break
    test), so that claims() finds the roles in the bf16 runs as it finds them in the grid."""
    groups = pairs.set_index("run_id_bf16")["group_fp32"]
    runs = study.runs.assign(group=study.runs["run_id"].map(groups))
    return dataclasses.replace(study, runs=runs)


def verdict_rows(study: Results, grid: Results, pairs: pd.DataFrame) -> tuple[list[list[str]], bool]:
    """Each headline claim's verdict in fp32 and in bf16, and whether every one is the same."""
    fp32 = list(headline_claims(grid).values())
    bf16 = list(headline_claims(in_twins_roles(study, pairs)).values())
    rows = [
        [
            a.claim,
            a.verdict,
            b.verdict,
            pgettext("same?", "yes") if a.verdict == b.verdict else pgettext("same?", "**no**"),
        ]
        for a, b in zip(fp32, bf16)
    ]
    return rows, all(a.verdict == b.verdict for a, b in zip(fp32, bf16))


@dataclasses.dataclass
class PrecisionFindings:
    answer: str  # the finding in two sentences
    comparison: str  # each bf16 run against its fp32 twin (a Markdown table)
    verdicts: str  # the headline claims' verdicts in fp32 and in bf16 (a Markdown table)


def precision_findings(data: Results) -> PrecisionFindings | None:
    """The study's findings (the report's section and the dashboard's page say them alike), or
    None while no bf16 run has an fp32 twin."""
    study, grid = only_runs_of(data, STUDY), only_runs_of(data, None)
    pairs = fp32_twins(study, data)
    if pairs.empty:
        return None
    differences = twin_differences(data, pairs)
    judged = [d for d in differences.values() if d.beyond is not None]
    largest = max(differences.values(), key=lambda d: abs(d.mean) if pd.notna(d.mean) else -1.0)
    rows, same = verdict_rows(study, grid, pairs)
    answer = (
        _(
            "{beyond} of {runs} bf16 runs have a best val beyond noise of their fp32 twin's (the table's {n} "
            "testable differences, each with its 95% interval, judged together); the largest difference is "
            "{largest}. Every headline verdict is the same in bf16."
        )
        if same
        else _(
            "{beyond} of {runs} bf16 runs have a best val beyond noise of their fp32 twin's (the table's {n} "
            "testable differences, each with its 95% interval, judged together); the largest difference is "
            "{largest}. **Some headline verdicts differ in bf16**."
        )
    ).format(beyond=sum(bool(d.beyond) for d in judged), runs=len(pairs), n=len(judged), largest=interval_text(largest))
    verdicts = md_table([_("the chapter says"), _("verdict, fp32 grid"), _("verdict, bf16 runs"), _("same?")], rows)
    return PrecisionFindings(answer, comparison_table(data, pairs, differences), verdicts)


def precision_section(data: Results) -> str | None:
    """The report's section: the comparison, the answer, the verdicts side by side."""
    findings = precision_findings(data)
    if findings is None:
        return None
    return "\n\n".join([findings.comparison, findings.answer, findings.verdicts])
