"""One colour per run on every page (anatomy/report/colours.py), and the grid's pages show the grid.

Every page is opened under Streamlit's AppTest on one database: the real tiny grid (tests/conftest.py,
with its exams) and, beside it, runs of two studies. Each chart's colour scales are read from its
Vega-Lite spec: an experiment (and each of its runs) has one colour on every page, two experiments of
one chart never share one, and train and val are told apart by dash, never by colour.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from anatomy.report import colours as palette
from anatomy.results.collect import collect
from anatomy.results.reader import load
from dashboard_pages import (  # noqa: F401 (no_reference, grid_and_studies_db: fixtures)
    chart_specs,
    chart_tables,
    curve_labels,
    grid_and_studies_db,
    no_reference,
    open_page,
    texts,
)
from run_folders import LLAMA_PARTS, write_fixture_grid, write_run_folder

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # the dashboard is an app folder, not an installed package
    sys.path.insert(0, str(REPO_ROOT))


@pytest.fixture
def grid_and_studies(request) -> Path:
    """The tiny grid with two studies beside it (tests/dashboard_pages.py)."""
    return request.getfixturevalue("grid_and_studies_db")


def encodings(spec: dict) -> list[tuple[dict, dict]]:
    """(view, its encoding) of every view in a spec: the top level and every layer, nested too."""
    found = [(spec, spec["encoding"])] if "encoding" in spec else []
    for layer in spec.get("layer", []):
        found += encodings(layer)
    return found


def colours_in(spec: dict, experiment_of: dict[str, str]) -> dict[str, str]:
    """experiment -> colour, from every colour scale of one chart that names runs or experiments
    (a run's label stands for its experiment; the length chart's "llama (RoPE)" for llama)."""
    seen: dict[str, set[str]] = {}
    for _view, encoding in encodings(spec):
        colour = encoding.get("color", {})
        scale = colour.get("scale", {})
        if colour.get("field") not in ("experiment", "label", "line") or "range" not in scale:
            continue
        for name, value in zip(scale["domain"], scale["range"]):
            if colour["field"] == "label":
                name = experiment_of.get(name)  # a depth-map cell is no run: grey, and not counted
            elif colour["field"] == "line":
                name = name.rsplit(" (", 1)[0] if name.endswith(")") else None  # "other experiments": grey
            if name is not None:
                seen.setdefault(name, set()).add(value)
    assert all(len(values) == 1 for values in seen.values()), f"one chart gives a run two colours: {seen}"
    return {name: values.pop() for name, values in seen.items()}


def splits_by_dash(spec: dict) -> None:
    """No chart colours a split; where a chart draws splits, val is solid and train dashed."""
    for _view, encoding in encodings(spec):
        assert encoding.get("color", {}).get("field") != "split", "a split told apart by colour"
        dash = encoding.get("strokeDash", {})
        if dash.get("field") == "split":
            scale = dash["scale"]
            assert dict(zip(scale["domain"], scale["range"])) == {s: palette.SPLIT_DASH[s] for s in scale["domain"]}


# each page as a learner opens it, and a second view where the first shows only the headline runs
VIEWS = {
    "overview": None,
    "curves": lambda app: app.multiselect(key="curves_experiments").set_value([]).run(),
    "overfitting": lambda app: (
        app.multiselect(key="turn_runs").set_value(list(app.multiselect(key="turn_runs").options)[:6]).run()
    ),
    "ablations": None,
    "breaks": None,
    "exams": None,
    "studies": None,
    "samples": lambda app: (
        app.multiselect(key="samples_runs").set_value(list(app.multiselect(key="samples_runs").options)).run()
    ),
}


@pytest.mark.slow  # every page, rendered one after the other: CI runs it, the inner loop leaves it out
def test_a_run_has_one_colour_on_every_page(grid_and_studies, monkeypatch):
    runs = load(grid_and_studies).runs
    expected = palette.experiment_colours(runs)
    experiment_of = dict(zip(runs["label"], runs["experiment"]))
    seen: dict[str, dict[str, str]] = {}  # experiment -> {page: colour}
    for page, choose in VIEWS.items():
        app = open_page(grid_and_studies, page, monkeypatch)
        if choose:
            choose(app)
            assert not app.exception, [e.value for e in app.exception]
        specs = chart_specs(app)
        assert specs or page == "samples", f"{page} draws no chart"  # the tiny runs sampled at one step only
        for spec in specs:
            splits_by_dash(spec)
            chart = colours_in(spec, experiment_of)
            shared = len(set(chart.values())) < len(chart)
            assert not shared, f"{page}: two experiments of one chart share a colour: {chart}"
            for experiment, colour in chart.items():
                seen.setdefault(experiment, {})[page] = colour
        if page == "overfitting":  # one run per chart, in its experiment's colour, its splits by dash
            chosen = app.multiselect(key="turn_runs").value
            for label, spec in zip(chosen[0::2] + chosen[1::2], specs):  # two columns, read one after the other
                (lines,) = [layer for layer in spec["layer"] if layer["encoding"].get("strokeDash")]
                seen.setdefault(experiment_of[label], {})["overfitting"] = lines["mark"]["color"]
    assert len(seen) >= 10  # the grid's experiments and the studies'
    for experiment, pages in seen.items():
        assert set(pages.values()) == {expected[experiment]}, f"{experiment}: {pages}"
    # the roles: the 2017 model blue and the mini-LLaMA orange, wherever they are drawn
    assert seen["vanilla"]["overview"] == palette.VANILLA and seen["llama"]["curves"] == palette.LLAMA
    assert expected["vanilla_bf16"] == palette.VANILLA and expected["scale_llama_l"] == palette.LLAMA


def test_every_experiment_of_the_grid_has_a_colour_of_its_own():
    """The chapter's grid as workflow/experiments.yaml names it: 18 experiments, 18 colours, and
    each part's two ablations in the part's hue."""
    rows = [dict(experiment="vanilla", preset="vanilla", group="headline", n_layer=4)]
    rows += [dict(experiment="llama", preset="llama", group="headline", baseline="vanilla", n_layer=4)]
    for part in palette.PARTS:
        rows += [
            dict(experiment=f"vanilla_plus_{part}", preset="vanilla", part=part, direction="add", baseline="vanilla")
        ]
        rows += [
            dict(experiment=f"llama_minus_{part}", preset="llama", part=part, direction="remove", baseline="llama")
        ]
    breaks = dict(preset="llama", group="break", baseline="llama", n_layer=4, n_head=4)
    rows += [
        dict(experiment="deep_post_nowarmup", part="prenorm", **{**breaks, "n_layer": 12}, norm_pos="post"),
        dict(experiment="deep_pre_nowarmup", part="prenorm", **{**breaks, "n_layer": 12}, norm_pos="pre"),
        dict(experiment="rope_k_unrotated", part="rope", rope_break="k_unrotated", **breaks),
        dict(experiment="rope_k_adjacent", part="rope", rope_break="k_adjacent", **breaks),
        dict(experiment="mqa", part="gqa", n_kv_head=1, **breaks),
        dict(experiment="llama_qk_norm", part="qk_norm", qk_norm=True, **breaks),
    ]
    import pandas as pd

    colours = palette.experiment_colours(pd.DataFrame(rows))
    assert len(colours) == 18 and len(set(colours.values())) == 18
    assert (
        colours["vanilla_plus_rope"] == palette.PARTS["rope"][0]
        and colours["llama_minus_rope"] == palette.PARTS["rope"][1]
    )
    assert colours["rope_k_unrotated"] == palette.BREAKS["rope_k_unrotated"]
    assert not set(colours.values()) & {palette.DIVERGED_RED, palette.NEUTRAL, palette.NEUTRAL_LIGHT}
    # a name is no role: the same tags under another name keep the colour of the role
    renamed = palette.experiment_colours(pd.DataFrame([{**rows[1], "experiment": "my_model", "baseline": None}]))
    assert renamed == {"my_model": palette.LLAMA}


# ---------------------------------------------------------------------------------------------
# The grid's pages show the grid (each study has its own page)


def test_the_grid_pages_leave_the_studies_to_their_page(grid_and_studies, monkeypatch):
    runs = load(grid_and_studies).runs
    study_labels = set(runs.loc[runs["group"].isin(["scale", "precision"]), "label"])
    grid_labels = set(runs["label"]) - study_labels
    assert study_labels and grid_labels

    app = open_page(grid_and_studies, "curves", monkeypatch)
    app.multiselect(key="curves_experiments").set_value([]).run()  # every experiment the page offers
    offered = set(app.multiselect(key="curves_runs").options)
    assert offered == grid_labels and curve_labels(app) <= grid_labels  # a run that broke at once has no line
    assert len(app.multiselect(key="curves_corpus").options) <= 1  # the grid's one text: nothing to mix

    app = open_page(grid_and_studies, "overfitting", monkeypatch)
    assert not set(app.dataframe[0].value["label"]) & study_labels
    assert not set(app.multiselect(key="turn_runs").options) & study_labels

    app = open_page(grid_and_studies, "exams", monkeypatch)
    grid = len(grid_labels)
    assert f"of the grid's {grid} runs examined" in texts(app)

    app = open_page(grid_and_studies, "overview", monkeypatch)
    assert app.metric[0].value == str(grid)
    assert f"Besides the grid, {len(study_labels)} runs of the studies" in texts(app)


def test_two_texts_are_never_drawn_on_one_loss_axis(tmp_path, monkeypatch):
    """A grid of a learner's own may hold runs of two texts: their losses do not compare, so each
    text gets its own chart."""
    runs = tmp_path / "runs"
    write_fixture_grid(runs)
    poems = {"vocab_size": 80, "train_tokens": 25_600, "val_tokens": 500, "corpus": "poems"}
    write_run_folder(runs, "llama_on_poems", 42, group="extra", model=LLAMA_PARTS, data=poems)
    collect(runs, tmp_path / "anatomy.duckdb")
    app = open_page(tmp_path / "anatomy.duckdb", "curves", monkeypatch)
    app.multiselect(key="curves_experiments").set_value(["llama", "llama_on_poems"]).run()
    assert not app.exception
    loss_charts = [table for table in chart_tables(app) if "mean" in table]
    assert len(loss_charts) == 2
    assert [set(table["experiment"].dropna()) for table in loss_charts] in (
        [{"llama"}, {"llama_on_poems"}],
        [{"llama_on_poems"}, {"llama"}],
    )
    assert "Trained on poems" in texts(app)


def test_a_runs_name_in_a_chart_is_in_the_readers_language_and_keeps_its_colour():
    """A chart's legend and tooltips name runs in the reader's words ("llama · 种子 42", not
    "llama · seed 42"); the colour comes from the experiment, so it is the same in both languages."""
    import pandas as pd

    from anatomy.language import speaking
    from dashboard import charts

    spread = pd.DataFrame(
        {
            "label": ["llama · seed 42", "deep_post_nowarmup · seed 7", "depth/post_lr0.01"],
            "experiment": ["llama", "deep_post_nowarmup", None],
            "step": [100, 100, 100],
            "first_to_last": [1.5, 0.2, 1e-6],
            "first_layer_norm": [1.0, 0.1, 1e-6],
            "last_layer_norm": [0.7, 0.5, 1.0],
        }
    )
    drawn = {}
    for language in ("en", "zh_CN"):
        with speaking(language):
            chart = charts.grad_norm_spread_chart(spread, chosen="llama · seed 42").to_dict()
        layer = chart["layer"][1] if "layer" in chart else chart
        scale = layer["encoding"]["color"]["scale"]
        drawn[language] = dict(zip(scale["domain"], scale["range"]))
    assert set(drawn["en"]) == {"llama · seed 42", "deep_post_nowarmup · seed 7", "depth/post_lr0.01"}
    assert set(drawn["zh_CN"]) == {"llama · 种子 42", "deep_post_nowarmup · 种子 7", "depth/post_lr0.01"}
    assert list(drawn["en"].values()) == list(drawn["zh_CN"].values())
    with speaking("zh_CN"):
        assert list(charts.run_names(pd.Series(["mqa · seed 7", "mqa"]))) == ["mqa · 种子 7", "mqa"]
