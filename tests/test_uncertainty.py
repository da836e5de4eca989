"""The one noise rule (anatomy/report/uncertainty.py and the setup_noise view), on hand-made
numbers whose answers are worked out by hand."""

from __future__ import annotations

import math

import duckdb
import pandas as pd
import pytest

from anatomy.report.uncertainty import UNKNOWN, Difference, Noise, difference, judge, judge_one, noise_of
from anatomy.results.collect import SCHEMA_PATH


def test_the_pooled_sd_of_a_setup_weights_each_experiment_by_its_spare_seeds():
    con = duckdb.connect()
    con.execute(SCHEMA_PATH.read_text(encoding="utf-8"))

    def run(experiment, seed, best, corpus="poems", precision="bf16", status="done", best_step=200):
        run_id = f"{experiment}/{corpus}/{precision}/seed{seed}"
        con.execute(
            """INSERT INTO runs (run_id, experiment, seed, corpus, vocab_size, train_tokens, val_tokens,
                "precision", config, status, diverged, best_val_loss, best_step)
            VALUES (?, ?, ?, ?, 100, 1000, 100, ?, '{}', ?, ?, ?, ?)""",
            [run_id, experiment, seed, corpus, precision, status, status == "diverged", best, best_step],
        )
        # two evaluations, the best at best_step: step 50 is the first
        for step in (50, 200):
            val = best if step == best_step else best + 0.5
            con.execute("INSERT INTO metrics (run_id, step, val_loss) VALUES (?, ?, ?)", [run_id, step, val])

    # a: values 1 and 3 (variance 2, 1 df); b: 2, 2, 2 (variance 0, 2 df); c has one seed
    run("a", 1, 1.0), run("a", 2, 3.0)
    for seed in (1, 2, 3):
        run("b", seed, 2.0)
    run("c", 1, 9.0)
    run("a", 3, 50.0, status="diverged")  # a diverged run says nothing about the seed's noise
    # nor do runs that never trained past their first evaluation (best val at the first step)
    run("stuck", 1, 6.2, best_step=50), run("stuck", 2, 6.1, best_step=50)
    # another precision is another setup
    run("a", 1, 1.0, precision="fp32"), run("a", 2, 1.5, precision="fp32")
    rows = con.execute('SELECT "precision", trainings, df, sd FROM setup_noise ORDER BY "precision"').fetchall()
    # pooled variance (1 x 2 + 2 x 0) / (1 + 2) = 2/3
    assert rows[0][:3] == ("bf16", 2, 3) and rows[0][3] == pytest.approx(math.sqrt(2 / 3))
    # one experiment of 1.0 and 1.5: variance 0.125
    assert rows[1][:3] == ("fp32", 1, 1) and rows[1][3] == pytest.approx(math.sqrt(0.125))


def test_two_experiments_that_declare_one_training_at_two_seeds_make_one_pair():
    """One study's seed 42 and another's seed 7 of the same settings differ in the seed alone: the
    pair counts (a degree of freedom), where grouping by experiment would have dropped it."""
    con = duckdb.connect()
    con.execute(SCHEMA_PATH.read_text(encoding="utf-8"))

    def run(experiment, seed, best, settings):
        run_id = f"{experiment}/seed{seed}"
        con.execute(
            """INSERT INTO runs (run_id, experiment, seed, corpus, vocab_size, train_tokens, val_tokens,
                "precision", config, settings, status, diverged, best_val_loss, best_step)
            VALUES (?, ?, ?, 'poems', 100, 1000, 100, 'fp32', '{}', ?, 'done', false, ?, 200)""",
            [run_id, experiment, seed, settings, best],
        )
        for step, val in ((50, best + 0.5), (200, best)):
            con.execute("INSERT INTO metrics (run_id, step, val_loss) VALUES (?, ?, ?)", [run_id, step, val])

    run("size_m_llama_5e4", 42, 1.0, settings="llama at 5e-4")
    run("parts_8m_llama_5e4", 7, 3.0, settings="llama at 5e-4")
    run("parts_8m_mla_5e4", 42, 9.0, settings="mla at 5e-4")  # another training: no pair
    rows = con.execute("SELECT trainings, df, sd FROM setup_noise").fetchall()
    assert rows == [(1, 1, pytest.approx(math.sqrt(2.0)))]  # values 1 and 3: variance 2


def test_noise_of_finds_the_setup_of_the_runs_and_only_one():
    table = pd.DataFrame(
        [
            {
                "corpus": "poems",
                "vocab_size": 100,
                "train_tokens": 1000,
                "val_tokens": 100,
                "precision": "bf16",
                "trainings": 2,
                "df": 3,
                "sd": 0.5,
            },
        ]
    )
    runs = pd.DataFrame(
        [{"corpus": "poems", "vocab_size": 100, "train_tokens": 1000, "val_tokens": 100, "precision": "bf16"}] * 2
    )
    assert noise_of(table, runs) == Noise(0.5, 3)
    other = runs.assign(precision=["bf16", "fp32"])
    assert noise_of(table, other) == UNKNOWN  # two setups: no one noise
    assert noise_of(table, runs.assign(train_tokens=5)) == UNKNOWN  # a setup with no two-seed experiment


def test_a_difference_of_means_with_its_95_percent_interval():
    # means 5 and 2, sd 1 with 2 df, two runs each: se = sqrt(1/2 + 1/2) = 1, t(0.975, 2) = 4.303
    d = judge_one(difference(pd.Series([4.0, 6.0]), pd.Series([1.0, 3.0]), Noise(1.0, 2)))
    assert (d.mean, d.se, d.df) == (3.0, 1.0, 2.0)
    low, high = d.interval()
    assert (low, high) == (pytest.approx(3 - 4.302653), pytest.approx(3 + 4.302653))
    assert d.beyond is False and d.sign == 0  # the interval holds zero
    # the same gap with 30 df: t(0.975, 30) = 2.042, so the interval excludes zero
    d = judge_one(difference(pd.Series([4.0, 6.0]), pd.Series([1.0, 3.0]), Noise(1.0, 30)))
    assert d.interval()[0] == pytest.approx(3 - 2.042272) and d.beyond is True and d.sign == 1
    # no noise estimate: not testable, never "beyond"
    d = judge_one(difference(pd.Series([4.0]), pd.Series([1.0]), UNKNOWN))
    assert d.beyond is None and d.sign is None and math.isnan(d.interval()[0])


def test_two_setups_combine_by_welch_satterthwaite():
    # var parts 1/1 and 4/1: se = sqrt(5); df = 25 / (1/2 + 16/8) = 10
    d = difference(pd.Series([3.0]), pd.Series([1.0]), Noise(1.0, 2), Noise(2.0, 8))
    assert d.se == pytest.approx(math.sqrt(5)) and d.df == pytest.approx(10.0)


def made(p: float) -> Difference:
    """A difference whose two-sided p-value is p (df large, se 1)."""
    from scipy import stats

    return Difference(float(stats.t.isf(p / 2, 10_000)), 1.0, 10_000, 1)


def test_holm_judges_a_table_together_and_stops_at_the_first_failure():
    # sorted p: 0.01 <= 0.05/3 (beyond); 0.03 > 0.05/2: stops here, so 0.04 is not beyond either,
    # although 0.04 <= 0.05/1 alone
    table = judge({"x": made(0.04), "y": made(0.01), "z": made(0.03), "untested": Difference(1.0, math.nan, 0, 1)})
    assert {key: d.beyond for key, d in table.items()} == {"x": False, "y": True, "z": False, "untested": None}
    assert {d.n for key, d in table.items() if key != "untested"} == {3}
    assert table["y"].level == pytest.approx(1 - 0.05 / 3)
    assert table["x"].level == table["z"].level == pytest.approx(1 - 0.05 / 2)  # held at the failed level
    # each verdict agrees with its interval: beyond noise exactly when the interval excludes zero
    for d in table.values():
        if d.testable:
            low, high = d.interval()
            assert d.beyond == (low > 0 or high < 0)
    # every p below its step: all beyond
    assert all(d.beyond for d in judge({1: made(0.001), 2: made(0.02), 3: made(0.04)}).values())
