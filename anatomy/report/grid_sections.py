"""The report's sections on the grid: the headline pair beside the chapter's figures, the
chapter's claims, the ablations, the break tests, the overfitting turn and the memorised share.
Each is a Markdown table with the words that read it; `anatomy report` (markdown.py) puts them in
order, and the Studies page shows the ablation table of the scale study's largest size.
"""

from __future__ import annotations

import pandas as pd

from anatomy.chapter import CHAPTER
from anatomy.language import _, ngettext, pgettext
from anatomy.report.claims import (
    ablation_family,
    ablation_of,
    ablation_untestable_reason,
    beyond_cell,
    claims,
    largest_ablation_change,
    untestable_reason,
)
from anatomy.report.roles import headline_of
from anatomy.report.uncertainty import (
    Difference,
    interval_text,
    judged_against_baselines,
    noise_of,
    noise_text,
    same_seeds,
)
from anatomy.report.wording import (
    SEED_JOIN,
    md_table,
    part_name,
    per_seed,
    seed_list,
    seeds_of,
)
from anatomy.results.reader import Results


def difference_cell(d: Difference) -> str:
    """A difference with its interval (uncertainty.interval_text); "–" when there is none to take."""
    return interval_text(d) if pd.notna(d.mean) else "–"


def headline_section(data: Results) -> str:
    rows = []
    for model, name in (("vanilla", _("vanilla (2017)")), ("llama", "mini-LLaMA")):
        runs = headline_of(data, model)
        if runs.empty:
            rows.append([name, _("not run yet"), "", "", "", "", ""])
            continue
        rows.append(
            [
                name,
                seeds_of(runs),
                f"{int(runs['params'].max()):,}" if runs["params"].notna().any() else "–",
                per_seed(runs, "best_val_loss"),
                per_seed(runs, "best_step"),
                per_seed(runs, "final_val_loss"),
                per_seed(runs, "final_train_loss"),
            ]
        )
    # the chapter's own figures beside ours (blank where it gave none)
    for name, published in ((_("chapter: vanilla"), CHAPTER.vanilla), (_("chapter: mini-LLaMA"), CHAPTER.llama)):
        rows.append(
            [
                name,
                seed_list(CHAPTER.seeds),
                f"{published.params:,}",
                SEED_JOIN.join(map(str, published.best_val)),
                str(published.best_step),
                *("" if value is None else str(value) for value in (published.final_val, published.final_train)),
            ]
        )
    return md_table(
        [_("model"), _("seeds"), _("params"), _("best val"), _("at step"), _("final val"), _("final train")], rows
    )


def ablation_section(data: Results) -> str:
    if data.ablations.empty:
        return _("No ablation runs yet: `snakemake --cores 1 ablations` trains them.")
    family = ablation_family(data)  # the table's comparisons, judged together
    rows = []
    for part in sorted(data.ablations["part"].unique()):
        cells = [part_name(part)]
        for direction in ("add", "remove"):
            experiment = ablation_of(data, part, direction)
            if experiment is None:
                cells += [_("not run yet"), ""]
                continue
            d = family[experiment]
            cells += [difference_cell(d), beyond_cell(d, ablation_untestable_reason(data, experiment))]
        rows.append(cells)
    table = md_table(
        [
            pgettext("part of the model", "part"),
            _("Δ best val, added to vanilla (95% interval)"),
            _("beyond noise?"),
            _("Δ best val, removed from llama (95% interval)"),
            _("beyond noise?"),
        ],
        rows,
    )
    judged = max((d.n for d in family.values() if d.beyond is not None), default=0)
    noise = noise_of(data.noise, data.runs[data.runs["group"] == "headline"])
    explained = ngettext(
        "Δ is the experiment's mean best val minus its baseline's, over the seeds both have: negative means "
        "lower loss. The noise is the per-run sd of best val between seeds, from every training of this "
        "setup with two seeds ({noise}); each Δ has a 95% interval from it, and the table's {n} comparison is "
        "judged on its own: a Δ is beyond noise when its interval excludes zero.",
        "Δ is the experiment's mean best val minus its baseline's, over the seeds both have: negative means "
        "lower loss. The noise is the per-run sd of best val between seeds, from every training of this "
        "setup with two seeds ({noise}); each Δ has a 95% interval from it, and the table's {n} comparisons are "
        "judged together (Holm's correction): a Δ is beyond noise when its corrected interval excludes zero.",
        judged,
    ).format(noise=noise_text(noise), n=judged)
    largest = largest_ablation_change(data, family)
    return f"{table}\n\n{explained}\n\n{largest}" if largest else f"{table}\n\n{explained}"


def break_section(data: Results) -> str:
    breaks = data.runs[data.runs["group"] == "break"]
    if breaks.empty:
        return "No break-test runs yet: `snakemake --cores 1 break_tests` trains them."
    family = judged_against_baselines(data, list(dict.fromkeys(breaks["experiment"])))
    rows = []
    for experiment, runs in breaks.groupby("experiment", sort=False):
        d = family[experiment]
        baseline = runs["baseline"].iloc[0]
        diverged = runs[runs["diverged"]].sort_values("seed", ascending=False)
        broke = (
            "no"
            if diverged.empty
            else ", ".join(
                f"seed {int(r.seed)} at step {int(r.diverged_step)}"
                if pd.notna(r.diverged_step)
                else f"seed {int(r.seed)}"
                for r in diverged.itertuples()
            )
        )
        base_runs = data.runs[data.runs["experiment"] == baseline]
        rows.append(
            [
                f"`{experiment}`",
                str(runs["description"].iloc[0] or ""),
                seeds_of(runs),
                broke,
                per_seed(runs, "best_val_loss"),
                per_seed(runs, "best_step"),
                f"`{baseline}`" if pd.notna(baseline) else "–",
                difference_cell(d),
                beyond_cell(d, untestable_reason(*same_seeds(runs, base_runs))),
            ]
        )
    table = md_table(
        [
            "experiment",
            "what it does",
            "seeds",
            "diverged",
            "best val",
            "at step",
            "baseline",
            "Δ best val vs baseline (95% interval)",
            "beyond noise?",
        ],
        rows,
    )
    judged = max((d.n for d in family.values() if d.beyond is not None), default=0)
    return (
        f"{table}\n\nΔ is the experiment's mean best val minus its baseline's, over the seeds both have (a diverged "
        "run left out: its best val is where it broke), with its 95% interval from the same pooled noise as the "
        f"ablations; the table's {judged} comparisons are judged together (Holm's correction)."
    )


def memorisation_section(data: Results) -> str:
    """Copied share of the headline models' samples, at the best checkpoint and the last."""
    headline = data.runs[data.runs["group"] == "headline"]
    rows = []
    for run in headline.sort_values(["n_parts", "seed"], ascending=[True, False]).itertuples():
        samples = data.memorisation[data.memorisation["run_id"] == run.run_id].set_index("checkpoint")
        if samples.empty:
            continue
        cells = [run.label]
        for checkpoint in ("best", "last"):
            if checkpoint not in samples.index:
                cells += ["–", "–"]
                continue
            sample = samples.loc[checkpoint]
            cells += [
                f"{int(sample['step'])}",
                f"{sample['copied_fraction']:.1%} ({sample['val_copied_fraction']:.1%}), "
                f"longest {int(sample['longest_copy'])}",
            ]
        rows.append(cells)
    if not rows:
        return "No measured samples yet: `python -m anatomy memorised RUN_DIR` measures a run's samples."
    min_chars = int(data.memorisation["copy_min_chars"].iloc[0])
    return (
        md_table(
            [
                "run",
                "best: step",
                "best: copied (val control), longest span",
                "last: step",
                "last: copied (val control), longest span",
            ],
            rows,
        )
        + f"\n\nCopied: the share of generated characters (the prefix excluded) inside a span of {min_chars} or "
        "more characters found verbatim in the training split; in brackets, the same against the validation "
        "split, which the model never saw (phrases the language itself repeats)."
    )


def overfitting_section(data: Results) -> str:
    rows = []
    for experiment, runs in data.runs.groupby("experiment", sort=True):
        finite = runs[runs["best_val_loss"].notna()]
        if finite.empty:
            continue
        rows.append(
            [
                f"`{experiment}`",
                seeds_of(finite),
                per_seed(finite, "best_step"),
                per_seed(finite, "best_val_loss"),
                per_seed(finite, "val_rise"),
                per_seed(finite, "final_train_loss"),
                per_seed(finite, "train_val_gap"),
            ]
        )
    return md_table(
        [
            "experiment",
            "seeds",
            "val bottoms out at step",
            "best val",
            "val rise after it",
            "final train",
            "final val - train",
        ],
        rows,
    )


def short_verdict(verdict: str) -> str:
    """A verdict's first words, before its reason: '**reproduced**' of '**reproduced**: cache 0.25 ...'."""
    return verdict.split(": ", 1)[0]


def claims_list(found: list) -> str:
    """The claims as a table a reader can scan (each claim and its verdict), then one entry per
    claim with the whole verdict, what was measured and the chapter's figure."""
    table = md_table([_("the chapter says"), _("verdict")], [[c.claim, short_verdict(c.verdict)] for c in found])
    entries = [
        "\n".join(
            [
                f"- *{c.claim}*: {c.verdict}",
                "  - " + _("measured here: {measured}").format(measured=c.measured),
                "  - " + _("in the chapter: {chapter}").format(chapter=c.chapter),
            ]
        )
        for c in found
    ]
    return table + "\n\n" + "\n".join(entries)


def claims_section(data: Results) -> str:
    return claims_list(claims(data))
