"""How sure a difference is: the one rule behind every "beyond noise" of the report and the pages.

Two seeds of one training (the same settings, whichever experiments declared them) differ only in
the seed, so they measure the seed's noise, but one pair is one degree of freedom: too few to judge
anything by. The database pools them instead
(the setup_noise view of anatomy/results/schema.sql): every training with two or more seeds in
one setup (one corpus at one size, one precision) adds its seed-to-seed variance to one estimate
of the per-run standard deviation, sd, with as many degrees of freedom as the setup has spare seeds.

A difference of two experiments' mean best val then gets a 95% interval from Student's t:
mean_a - mean_b ± t(0.975, df) × sqrt(sd_a² / n_a + sd_b² / n_b).
A table makes several comparisons at once, and one in twenty would exclude zero by chance alone.
So a table's differences are judged together by Holm's step-down correction: a difference is
beyond noise when its interval, at Holm's level for its rank in the table, excludes zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pandas as pd
from scipy import stats

from anatomy.language import _, ngettext
from anatomy.results.reader import Results

CONFIDENCE = 0.95
# the columns that make a setup: runs that share them share one noise estimate
SETUP = ("corpus", "vocab_size", "train_tokens", "val_tokens", "precision")


@dataclass(frozen=True)
class Noise:
    """The per-run standard deviation of best val in one setup, and its degrees of freedom."""

    sd: float
    df: int

    @property
    def known(self) -> bool:
        return self.df > 0 and math.isfinite(self.sd)


UNKNOWN = Noise(math.nan, 0)


@dataclass(frozen=True)
class Difference:
    """mean(a) - mean(b), with its interval; `beyond` is set when its table is judged (judge)."""

    mean: float
    se: float  # standard error of the difference; nan when the noise is unknown
    df: float  # degrees of freedom of the t distribution (Welch-Satterthwaite across two setups)
    n: int  # how many comparisons its table made (1 until judged)
    level: float = CONFIDENCE  # the interval's confidence (Holm's, once judged)
    beyond: bool | None = None  # None: not testable (no noise estimate)

    @property
    def testable(self) -> bool:
        return math.isfinite(self.se) and self.df > 0

    @property
    def p(self) -> float:
        """The two-sided p-value of "no difference"."""
        if not self.testable:
            return math.nan
        if self.se == 0:
            return 0.0 if self.mean != 0 else 1.0
        return float(2 * stats.t.sf(abs(self.mean) / self.se, self.df))

    def interval(self, level: float | None = None) -> tuple[float, float]:
        if not self.testable:
            return math.nan, math.nan
        half = float(stats.t.ppf(0.5 + (level or self.level) / 2, self.df)) * self.se
        return self.mean - half, self.mean + half

    @property
    def sign(self) -> int | None:
        """-1 or +1 when beyond noise (a lower or higher), 0 when not, None when not testable."""
        if self.beyond is None:
            return None
        return (1 if self.mean > 0 else -1) if self.beyond else 0


def noise_of(noise_table: pd.DataFrame, runs: pd.DataFrame) -> Noise:
    """The pooled noise of the setup these runs share (the setup_noise view); UNKNOWN if they
    span several setups or theirs has no training with two seeds."""
    keys = runs[list(SETUP)].drop_duplicates()
    if len(keys) != 1:
        return UNKNOWN
    key = keys.iloc[0]
    match = noise_table
    for column in SETUP:
        match = match[(match[column] == key[column]) | (match[column].isna() & pd.isna(key[column]))]
    if match.empty:
        return UNKNOWN
    row = match.iloc[0]
    return Noise(float(row["sd"]), int(row["df"]))


def difference(a: pd.Series, b: pd.Series, noise_a: Noise, noise_b: Noise | None = None) -> Difference:
    """mean(a) - mean(b), each a set of runs' values (best val per seed) with its setup's noise."""
    a, b = a.dropna(), b.dropna()
    noise_b = noise_a if noise_b is None else noise_b
    mean = float(a.mean() - b.mean()) if len(a) and len(b) else math.nan
    if not (len(a) and len(b) and noise_a.known and noise_b.known):
        return Difference(mean, math.nan, 0, 1)
    parts = (noise_a.sd**2 / len(a), noise_b.sd**2 / len(b))
    se = math.sqrt(sum(parts))
    if noise_a == noise_b:
        df = float(noise_a.df)
    else:  # Welch-Satterthwaite: two setups, two estimates
        denominator = parts[0] ** 2 / noise_a.df + parts[1] ** 2 / noise_b.df
        df = sum(parts) ** 2 / denominator if denominator > 0 else float(min(noise_a.df, noise_b.df))
    return Difference(mean, se, df, 1)


def change(later: Difference, earlier: Difference) -> Difference:
    """How much one difference moved from another of independent runs (a part's cost at two model
    sizes): their means' difference, their standard errors added in quadrature, and the smaller
    degrees of freedom, which errs wide. Unjudged."""
    if not (later.testable and earlier.testable):
        return Difference(later.mean - earlier.mean, math.nan, 0, 1)
    return Difference(later.mean - earlier.mean, math.hypot(later.se, earlier.se), min(later.df, earlier.df), 1)


def judge(differences: dict) -> dict:
    """A table's differences, judged together (Holm): each gets the level of its rank and its
    verdict. The i-th smallest p of m testable ones is held at 1 - 0.05 / (m - i + 1), and once one
    fails, every larger p is held at that failed level, so none after it is beyond noise. A
    difference that is not testable is not counted and stays None."""
    testable = sorted((key for key, d in differences.items() if d.testable), key=lambda key: differences[key].p)
    m = len(testable)
    alpha = 1 - CONFIDENCE
    judged = dict(differences)
    failed_level = None
    for rank, key in enumerate(testable):
        level = failed_level if failed_level is not None else 1 - alpha / (m - rank)
        d = differences[key]
        beyond = failed_level is None and d.p < alpha / (m - rank)
        if not beyond and failed_level is None:
            failed_level = level
        judged[key] = replace(d, n=m, level=level, beyond=beyond)
    return judged


def judge_one(d: Difference) -> Difference:
    """A difference that is a table of its own (the headline gap)."""
    return judge({0: d})[0]


# ---------------------------------------------------------------------------------------------
# Runs of a Results, and the words for a difference


def usable(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs with a best val to compare: finished. A diverged run's best val is where it broke,
    and a running one's is not its last word."""
    return runs[(runs["status"] == "done") & runs["best_val_loss"].notna()]


def same_seeds(a: pd.DataFrame, b: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both sets of runs cut to the usable seeds both have: the same seed reads the same batches."""
    a, b = usable(a), usable(b)
    seeds = set(a["seed"]) & set(b["seed"])
    return a[a["seed"].isin(seeds)], b[b["seed"].isin(seeds)]


def compare(noise_table: pd.DataFrame, a: pd.DataFrame, b: pd.DataFrame, column: str = "best_val_loss") -> Difference:
    """Runs a against runs b (rows of Results.runs), over the seeds both finished: their means'
    difference, each side with the pooled noise of its own setup. Unjudged."""
    a, b = same_seeds(a, b)
    return difference(a[column], b[column], noise_of(noise_table, a), noise_of(noise_table, b))


def signed(value: float) -> str:
    return "–" if not math.isfinite(value) else f"{value:+.3f}"


def interval_text(d: Difference) -> str:
    """ "-0.088 [-0.120, -0.056]": the mean and its 95% interval (Holm-corrected once its table is
    judged). One compact form everywhere: what the brackets mean is said once, under each table
    and at the top of the report (anatomy.report.findings.INTERVALS)."""
    if not d.testable:
        return _("{mean} (no noise estimate)").format(mean=signed(d.mean))
    return compact(d.mean, *d.interval())


def compact(mean: float, low: float, high: float) -> str:
    """The one form of a difference and its interval, in every table, sentence and tooltip."""
    return f"{signed(mean)} [{signed(low)}, {signed(high)}]"


def noise_text(noise: Noise) -> str:
    """The setup's noise in words: "sd 0.011 per run, 18 degrees of freedom"."""
    if not noise.known:
        return _("no noise estimate (no training with two seeds in this setup)")
    return ngettext(
        "sd {sd} per run, pooled over {df} degree of freedom",
        "sd {sd} per run, pooled over {df} degrees of freedom",
        noise.df,
    ).format(sd=f"{noise.sd:.3f}", df=noise.df)


def against_baseline(data: Results, experiment: str) -> Difference:
    """An experiment's mean best val minus its baseline's, over the seeds both finished, unjudged.
    Its baseline is the one runs.baseline names, on the same text (baseline_pairs' rule: a study
    may share experiment names with the grid)."""
    runs = data.runs
    mine = runs[runs["experiment"] == experiment]
    baseline = mine["baseline"].dropna()
    if mine.empty or baseline.empty:
        return Difference(math.nan, math.nan, 0, 1)
    base = runs[runs["experiment"] == baseline.iloc[0]].merge(mine[list(SETUP)].drop_duplicates(), on=list(SETUP))
    return compare(data.noise, mine, base)


def judged_against_baselines(data: Results, experiments) -> dict[str, Difference]:
    """Each experiment against its baseline, judged together as one table (Holm over them)."""
    return judge({name: against_baseline(data, name) for name in experiments})
