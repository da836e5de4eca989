"""The dashboard's state in its URL (dashboard/url_state.py), the Curves page's tag filters and
its two-run comparison, under Streamlit's AppTest on the fixture grid (tests/run_folders.py); and
values from a link or the database shown as text, never as Markdown (dashboard/tables.py)."""

from __future__ import annotations

import json

import duckdb
import pytest
from markdown_it import MarkdownIt
from streamlit.testing.v1 import AppTest

from anatomy.results.collect import collect
from dashboard.tables import markdown_literal, markdown_name
from dashboard_pages import APP, chart_specs, chart_tables, curve_labels, no_reference, open_page  # noqa: F401 (a fixture)
from run_folders import write_fixture_grid

LLAMA_42, VANILLA_42 = "llama · seed 42", "vanilla · seed 42"


def db_rows(db, sql: str) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql).fetchall()


def open_link(db, page: str, params: dict, monkeypatch) -> AppTest:
    """A fresh session opening `page` from a link with these query parameters."""
    return open_page(db, page, monkeypatch, params=params)


def labels_drawn(app: AppTest) -> set[str]:
    return curve_labels(app)


def mean_lines(spec: dict) -> dict:
    """The layer of the Curves chart that draws each experiment's mean."""
    (layer,) = [layer for layer in spec["layer"] if layer["encoding"]["y"]["field"] == "mean"]
    return layer


def captions(app: AppTest) -> list[str]:
    return [caption.value for caption in app.caption]


def left_out(app: AppTest) -> list[str]:
    """The lines that say what a link asked for and the page could not show."""
    return [line for line in captions(app) + [w.value for w in app.warning] if "Left out from the link" in line]


# ---------------------------------------------------------------------------------------------
# A link restores the view; a change writes the link


def test_a_link_restores_runs_splits_axis_smoothing_and_scale(fixture_grid_db, monkeypatch):
    params = {"run": LLAMA_42, "split": "val", "x": "wall-clock", "smoothing": "0.5", "log": "true"}
    app = open_link(fixture_grid_db, "curves", params, monkeypatch)
    assert app.multiselect(key="curves_runs").value == [LLAMA_42]
    assert app.segmented_control(key="curves_splits").value == ["val"]
    assert app.segmented_control(key="curves_x").value == "wall-clock"
    assert app.slider(key="curves_smoothing").value == 0.5
    assert app.toggle(key="curves_log").value is True
    # ... and the chart follows them
    spec, chart = chart_specs(app)[0], chart_tables(app)[0]
    assert labels_drawn(app) == {LLAMA_42} and set(chart["split"].dropna()) == {"val"}
    means = mean_lines(spec)
    assert means["encoding"]["y"]["scale"]["type"] == "log"
    # one run: the mean is the run itself, drawn at the wall-clock of each evaluation
    metrics = db_rows(fixture_grid_db, "SELECT step, elapsed_s FROM metrics WHERE run_id = 'llama/seed42'")
    drawn = chart.dropna(subset=["mean"]).set_index("step")["x"]
    assert drawn.to_dict() == pytest.approx({step: elapsed for step, elapsed in metrics if step in drawn.index})
    assert not left_out(app)


def test_without_a_link_the_page_opens_on_its_defaults_and_the_url_stays_clean(fixture_grid_db, monkeypatch):
    app = open_page(fixture_grid_db, "curves", monkeypatch)
    assert app.query_params == {}
    assert set(app.multiselect(key="curves_runs").value) == {
        "vanilla · seed 42",
        "vanilla · seed 7",
        "llama · seed 42",
        "llama · seed 7",
    }
    assert app.toggle(key="curves_log").value is False


def test_changing_a_widget_writes_the_link_and_the_link_opens_the_same_view(fixture_grid_db, monkeypatch):
    app = open_page(fixture_grid_db, "curves", monkeypatch)
    app.toggle(key="curves_log").set_value(True).run()
    app.segmented_control(key="curves_x").set_value("wall-clock").run()
    app.slider(key="curves_smoothing").set_value(0.8).run()
    app.multiselect(key="curves_experiments").set_value(["mqa", "llama"]).run()
    app.multiselect(key="curves_runs").set_value(["mqa · seed 7", LLAMA_42]).run()
    assert not app.exception
    assert app.query_params == {
        "log": "true",
        "x": "wall-clock",
        "smoothing": "0.8",
        "experiment": ["mqa", "llama"],
        "run": ["mqa · seed 7", LLAMA_42],
    }
    # back to a default: the parameter leaves the link
    app.toggle(key="curves_log").set_value(False).run()
    assert "log" not in app.query_params
    # no run at all is a choice too, written as an empty parameter
    app.multiselect(key="curves_runs").set_value([]).run()
    assert app.query_params["run"] == ""

    app.multiselect(key="curves_runs").set_value(["mqa · seed 7", LLAMA_42]).run()
    reloaded = open_link(fixture_grid_db, "curves", app.query_params, monkeypatch)
    for kind, key in [
        ("multiselect", "curves_experiments"),
        ("multiselect", "curves_runs"),
        ("segmented_control", "curves_x"),
        ("slider", "curves_smoothing"),
        ("toggle", "curves_log"),
    ]:
        assert getattr(reloaded, kind)(key=key).value == getattr(app, kind)(key=key).value, key
    assert labels_drawn(reloaded) == {"mqa · seed 7", LLAMA_42}


@pytest.mark.parametrize(
    "page, key",
    [
        ("curves", "curves_runs"),
        pytest.param("overfitting", "turn_runs", marks=pytest.mark.slow),  # one page in the inner loop, all in CI
        pytest.param("samples", "samples_runs", marks=pytest.mark.slow),
    ],
)
def test_a_run_not_in_this_database_is_left_out_in_one_line(fixture_grid_db, page, key, monkeypatch):
    app = open_link(fixture_grid_db, page, {"run": [LLAMA_42, "ghost · seed 1"]}, monkeypatch)
    assert app.multiselect(key=key).value == [LLAMA_42]
    (line,) = left_out(app)
    assert "ghost · seed 1" in line and LLAMA_42 not in line
    # the link now holds what is shown; the next render says nothing more
    assert app.query_params["run"] == LLAMA_42
    app.run()
    assert not left_out(app)


def test_a_link_whose_runs_are_all_unknown_opens_on_the_default_runs(fixture_grid_db, monkeypatch):
    """Only `?run=` chooses no run; a link naming none this database has falls back to the default."""
    default = open_page(fixture_grid_db, "curves", monkeypatch).multiselect(key="curves_runs").value
    app = open_link(fixture_grid_db, "curves", {"run": ["ghost · seed 1", "nope"]}, monkeypatch)
    assert app.multiselect(key="curves_runs").value == default and len(default) == 4
    (line,) = left_out(app)
    assert "`ghost · seed 1`" in line and "`nope`" in line
    assert "run" not in app.query_params  # the default is what the link now says


def test_values_a_widget_cannot_take_are_left_out_not_raised(fixture_grid_db, monkeypatch):
    params = {"x": "minutes", "smoothing": "7", "log": "maybe", "split": ["val", "test"], "seed": ["42", "1234"]}
    app = open_link(fixture_grid_db, "curves", params, monkeypatch)
    assert app.segmented_control(key="curves_x").value == "step"
    assert app.slider(key="curves_smoothing").value == 0.0
    assert app.toggle(key="curves_log").value is False
    assert app.segmented_control(key="curves_splits").value == ["val"]
    assert app.multiselect(key="curves_seed").value == [42]
    said = "\n".join(left_out(app))
    for dropped in ("minutes", "7", "maybe", "test", "1234"):
        assert f"`{dropped}`" in said


def test_overfitting_and_samples_write_their_runs_into_the_link(fixture_grid_db, monkeypatch):
    for page, key in [("overfitting", "turn_runs"), ("samples", "samples_runs")]:
        app = open_page(fixture_grid_db, page, monkeypatch)
        app.multiselect(key=key).set_value(["mqa · seed 42"]).run()
        assert app.query_params["run"] == "mqa · seed 42"
        reloaded = open_link(fixture_grid_db, page, app.query_params, monkeypatch)
        assert reloaded.multiselect(key=key).value == ["mqa · seed 42"]


# ---------------------------------------------------------------------------------------------
# Choosing runs by tag


def run_labels(db, where: str) -> set[str]:
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(f"SELECT experiment, seed FROM runs WHERE {where}").fetchall()
    return {f"{experiment} · seed {seed}" for experiment, seed in rows}


def test_picking_a_seed_selects_every_run_of_that_seed_in_the_chosen_experiments(fixture_grid_db, monkeypatch):
    app = open_page(fixture_grid_db, "curves", monkeypatch)
    app.multiselect(key="curves_seed").set_value([7]).run()
    assert set(app.multiselect(key="curves_runs").value) == {"vanilla · seed 7", "llama · seed 7"}
    assert labels_drawn(app) == {"vanilla · seed 7", "llama · seed 7"}
    assert app.query_params["seed"] == "7" and "run" not in app.query_params  # every run the choice matches

    # no experiment chosen: the tags choose among every run
    app.multiselect(key="curves_experiments").set_value([]).run()
    app.multiselect(key="curves_seed").set_value([]).run()
    app.multiselect(key="curves_group").set_value(["ablation"]).run()
    app.multiselect(key="curves_direction").set_value(["remove"]).run()
    expected = run_labels(fixture_grid_db, "\"group\" = 'ablation' AND direction = 'remove'")
    assert expected == {"llama_minus_swiglu · seed 42", "llama_minus_swiglu · seed 7", "llama_minus_rope · seed 42"}
    assert set(app.multiselect(key="curves_runs").value) == expected


def test_a_link_restores_the_tag_filters(fixture_grid_db, monkeypatch):
    app = open_link(fixture_grid_db, "curves", {"experiment": "", "group": "break", "seed": "42"}, monkeypatch)
    assert app.multiselect(key="curves_experiments").value == []
    assert app.multiselect(key="curves_group").value == ["break"]
    expected = run_labels(fixture_grid_db, "\"group\" = 'break' AND seed = 42")
    assert expected == {"deep_pre_nowarmup · seed 42", "deep_post_nowarmup · seed 42", "mqa · seed 42"}
    assert set(app.multiselect(key="curves_runs").value) == expected


# ---------------------------------------------------------------------------------------------
# Two runs: what differs in their config.json


def differences(app: AppTest):
    """The comparison table, as {setting: (first run's value, second's)}."""
    (table,) = [frame.value for frame in app.dataframe if "setting" in frame.value.columns]
    first, second = table.columns[1:]
    return (first, second), {row["setting"]: (row[first], row[second]) for _, row in table.iterrows()}


def test_two_runs_show_only_the_settings_that_differ(fixture_grid_db, monkeypatch):
    app = open_link(fixture_grid_db, "curves", {"run": [VANILLA_42, LLAMA_42]}, monkeypatch)
    columns, differ = differences(app)
    assert columns == (VANILLA_42, LLAMA_42)
    # the fixture's llama is vanilla plus the five LLaMA parts (tests/run_folders.py: LLAMA_PARTS)
    assert differ == {
        "preset": ("vanilla", "llama"),
        "model.norm_type": ("(not set)", "rmsnorm"),
        "model.norm_pos": ("(not set)", "pre"),
        "model.pos_type": ("(not set)", "rope"),
        "model.ffn_type": ("(not set)", "swiglu"),
        "model.n_kv_head": ("(not set)", "2"),
        "tags.experiment": ("vanilla", "llama"),
        "tags.description": ("vanilla (fixture)", "llama (fixture)"),
    }
    # the equal ones are counted: every key of the two config.json files, flattened, less those
    with duckdb.connect(str(fixture_grid_db), read_only=True) as con:
        (config,) = con.execute("SELECT config FROM runs WHERE run_id = 'vanilla/seed42'").fetchone()
    vanilla = json.loads(config)
    n_keys = sum(len(value) if isinstance(value, dict) else 1 for value in vanilla.values())
    n_equal = n_keys - len({"preset", "tags.experiment", "tags.description"})
    assert f"{n_equal} settings are the same in both, not shown." in captions(app)


def test_two_seeds_of_one_experiment_differ_in_their_seed_alone(fixture_grid_db, monkeypatch):
    app = open_page(fixture_grid_db, "curves", monkeypatch)
    app.multiselect(key="curves_experiments").set_value(["mqa"]).run()
    _, differ = differences(app)
    assert list(differ) == ["train.seed"] and set(differ["train.seed"]) == {"42", "7"}


def test_more_runs_compare_two_picked_in_the_expander(fixture_grid_db, monkeypatch):
    app = open_page(fixture_grid_db, "curves", monkeypatch)
    assert not [frame for frame in app.dataframe if "setting" in frame.value.columns]  # four runs: no table yet
    app.multiselect(key="curves_compare").set_value(["llama · seed 7", LLAMA_42]).run()
    _, differ = differences(app)
    assert differ == {"train.seed": ("7", "42")}


# ---------------------------------------------------------------------------------------------
# Values from a link, a file or the database are text, never markup

# A backtick closes the code span a value is written in; then an image the browser would fetch
# and a link to somewhere else. And a value with line breaks, which would start new Markdown blocks.
HOSTILE = "x` ![x](http://evil/x.png) [sign in](http://evil) `y"
HOSTILE_LINES = "x\n\n# sign in\n![x](http://evil/x.png)\r\n- [here](http://evil)"


def inline_tokens(markdown: str) -> list:
    """The inline pieces a CommonMark parser (as Streamlit's) makes of `markdown`, every block's."""
    return [child for token in MarkdownIt("commonmark").parse(markdown) if token.children for child in token.children]


def shows_as_text(markdown: str, value: str) -> None:
    """`value` stands in `markdown` as its own characters, in one code span: no link, image or
    HTML, nothing outside code that a renderer could turn into a link, one paragraph only."""
    blocks = [token.type for token in MarkdownIt("commonmark").parse(markdown) if token.nesting >= 0]
    assert blocks == ["paragraph_open", "inline"], blocks
    pieces = inline_tokens(markdown)
    assert not {"link_open", "image", "html_inline"} & {piece.type for piece in pieces}
    assert value.replace("\r\n", "⏎").replace("\n", "⏎") in [p.content for p in pieces if p.type == "code_inline"]
    assert not [p.content for p in pieces if p.type == "text" and ("http" in p.content or "evil" in p.content)]


@pytest.mark.parametrize("value", [HOSTILE, HOSTILE_LINES, "``", "` `", "plain", " padded "])
def test_a_value_is_written_into_markdown_as_its_own_text(value):
    shows_as_text(f"Left out: {markdown_literal(value)} and more.", value)


@pytest.mark.parametrize("value", [HOSTILE, HOSTILE_LINES, "http://evil", "www.evil.com", "a@evil.com"])
def test_a_name_that_markdown_would_read_is_written_as_text(value):
    shows_as_text(f"**{markdown_name(value)}** is still running.", value)


def test_a_plain_name_is_left_as_it_is_and_any_other_is_code():
    for plain in ["llama_minus_rope · seed 42", "mqa · seed 7", "lunyu.md", "vanilla-plus · seed 1", "学而 · seed 1"]:
        assert markdown_name(plain) == plain
    for odd in ["_x_", "www.evil.com", "a*b", "-a", "1. a", "a:b", "a@b.cd", "<b>", "x\ny", "a/b"]:
        assert markdown_name(odd) == markdown_literal(odd)


@pytest.mark.parametrize(
    "page, key", [("curves", "curves_runs"), pytest.param("samples", "samples_runs", marks=pytest.mark.slow)]
)
def test_a_hostile_run_in_a_link_is_named_as_text_never_as_markup(fixture_grid_db, page, key, monkeypatch):
    """A shared link's `?run=` is anyone's to write: in Chromium, a backtick in it once made the
    page fetch an image from the link's address and show a "sign in here" link."""
    app = open_link(fixture_grid_db, page, {"run": [LLAMA_42, HOSTILE, HOSTILE_LINES]}, monkeypatch)
    assert app.multiselect(key=key).value == [LLAMA_42]
    (line,) = left_out(app)
    for value in (HOSTILE, HOSTILE_LINES):
        assert value.replace("\r\n", "⏎").replace("\n", "⏎") in [
            piece.content for piece in inline_tokens(line) if piece.type == "code_inline"
        ]
    assert not {"link_open", "image", "html_inline"} & {piece.type for piece in inline_tokens(line)}
    assert [token.type for token in MarkdownIt("commonmark").parse(line)][0] == "paragraph_open"


def test_names_from_the_database_are_shown_as_text(tmp_path, monkeypatch):
    """An experiment's name (a tag), a sample's prefix, its note and the post it copied from
    come from files anyone can write: the Samples and Curves pages show them as text."""
    runs = tmp_path / "runs"
    write_fixture_grid(runs)
    run = runs / "llama" / "seed42"
    config = json.loads((run / "config.json").read_text())
    config["tags"]["experiment"] = HOSTILE
    (run / "config.json").write_text(json.dumps(config))
    text = "## 子曰：学而时习之不亦说乎"
    memorisation = {
        "min_chars": 12,
        "copied_fraction": 0.5,
        "val_copied_fraction": 0.0,
        "longest_copy": 9,
        "longest_copy_text": None,
        "longest_copy_source": {"post": HOSTILE, "line": 3},
        "copied_spans": [[3, 9, HOSTILE, 3]],
    }
    sample = {"checkpoint": "last", "temperature": 0.8, "seed": 0, "chars": 14, "text": text}
    (run / "samples.json").write_text(
        json.dumps([{**sample, "prefix": HOSTILE, "note": HOSTILE, "memorisation": memorisation}])
    )
    running = runs / "vanilla" / "seed42"
    (running / "summary.json").unlink()  # still running: the Curves page says so, with its name
    config = json.loads((running / "config.json").read_text())
    config["tags"]["experiment"] = HOSTILE_LINES
    (running / "config.json").write_text(json.dumps(config))
    db = tmp_path / "anatomy.duckdb"
    collect(runs, db)
    hostile, hostile_lines = f"{HOSTILE} · seed 42", f"{HOSTILE_LINES} · seed 42"

    app = open_page(db, "samples", monkeypatch)
    app.multiselect(key="samples_runs").set_value([hostile]).run()
    assert not app.exception
    (name,) = [m.value for m in app.markdown if m.value.startswith("**") and "seed 42" in m.value]
    shows_as_text(name, hostile)
    (caption,) = [c.value for c in app.caption if "prefix" in c.value]
    assert repr(HOSTILE) in [p.content for p in inline_tokens(caption) if p.type == "code_inline"]
    shows_as_text(app.warning[-1].value, HOSTILE)  # the note (the first warning: a grid still training)
    (copied,) = [m.value for m in app.markdown if "longest" in m.value]
    assert HOSTILE in [p.content for p in inline_tokens(copied) if p.type == "code_inline"]
    assert not {"link_open", "image"} & {p.type for p in inline_tokens(copied)}

    app = open_page(db, "curves", monkeypatch)
    app.multiselect(key="curves_experiments").set_value([HOSTILE_LINES]).run()
    (running_line,) = [i.value for i in app.info if "still running" in i.value]
    shows_as_text(running_line, hostile_lines)


def test_a_link_value_of_any_length_is_named_short(fixture_grid_db, monkeypatch):
    """A link is anyone's to write: a 60,000-character value, or hundreds of them, is named in a few
    characters, as text, never echoed whole (Streamlit itself reads no more than 1,000 parameters)."""
    long_value = "x" * 60_000
    many = [f"ghost {i}" for i in range(500)]
    app = open_link(fixture_grid_db, "curves", {"run": [LLAMA_42, long_value, *many]}, monkeypatch)
    (line,) = left_out(app)
    assert len(line) < 400 and "x" * 100 not in line
    assert "x" * 59 + "…" in [piece.content for piece in inline_tokens(line) if piece.type == "code_inline"]
    assert "`ghost 1`" in line and "ghost 499" not in line and "and 498 more" in line  # 501 dropped, 3 named
    assert not {"link_open", "image", "html_inline"} & {piece.type for piece in inline_tokens(line)}


def test_the_dashboard_gathers_no_usage_statistics():
    """Offline means offline: Streamlit is told not to report to its servers (the browser test
    checks that no page fetches anything from elsewhere, a web font or an icon)."""
    import tomllib

    settings = tomllib.loads((APP.parent.parent / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    assert settings["browser"]["gatherUsageStats"] is False


def test_the_runs_table_shows_and_hides_runs():
    """The Curves page's runs table: a click on a run's checkbox draws it or takes it away; a run
    shown keeps its place, a run newly shown goes last."""
    from dashboard.tables import shown_after_edits

    listed = ["a · seed 1", "a · seed 2", "b · seed 1"]
    assert shown_after_edits(["a · seed 1", "b · seed 1"], listed, {0: {"show": False}}) == ["b · seed 1"]
    assert shown_after_edits(["b · seed 1"], listed, {"1": {"show": True}}) == ["b · seed 1", "a · seed 2"]
    assert shown_after_edits(["a · seed 1"], listed, {0: {"show": True}, 2: {}}) == ["a · seed 1"]


def test_the_runs_table_lists_every_run_with_its_checkbox(fixture_grid_db, monkeypatch):
    app = open_page(fixture_grid_db, "curves", monkeypatch)
    chosen = app.multiselect(key="curves_runs").value
    (table,) = [frame for frame in app.dataframe if "show" in frame.value]
    assert set(table.value.loc[table.value["show"], "label"]) == set(chosen)
    assert list(table.value.columns[:2]) == ["show", "label"] and "best_val_loss" in table.value
