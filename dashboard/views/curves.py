"""Curves: the grid's runs, train and val, by step or wall-clock, smoothed, on a log scale if wanted.

Many runs are grouped as an experiment tracker groups them: one line per experiment (the mean over
its seeds) with the band from its lowest seed to its highest, each run on demand. A runs table
shows or hides each run beside its numbers; the learning rate and the gradient norm are drawn under
the loss. Only the grid's runs: each study has its own page (a study's runs are trained on other
text, and their losses do not compare). Every choice is kept in the URL (dashboard/url_state.py):
a reload or a shared link opens the same view.
"""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from anatomy.language import N_, _, ngettext, pgettext
from anatomy.report.roles import only_runs_of
from anatomy.report.wording import part_name
from dashboard import analysis, charts, loaders, tables, url_state
from dashboard.findings import show_part_glossary

results = loaders.require_results()
grid = only_runs_of(results, None)  # the studies have their own page
runs = grid.runs
colours = charts.colours_of(results)

st.title(_("Loss curves"))
st.caption(
    _(
        "The grid's runs: the studies, trained on other text, have their own page. Each experiment is one "
        "line, the mean over its seeds, with the band from its lowest seed to its highest."
    )
)
show_part_glossary()

experiments = list(dict.fromkeys(runs["experiment"]))
default = list(dict.fromkeys(grid.headline["experiment"])) or experiments[:2]
# the tags a run carries (config.json's tags, its seed and its corpus): filters that pick runs,
# each named in the reader's words
TAGS = {
    "group": N_("group"),
    "part": N_("part"),
    "direction": N_("direction"),
    "seed": N_("seed"),
    "corpus": N_("corpus"),
}
# the values of the tags, in the reader's words (a part keeps its name, glossed at the top)
GROUP_WORDS = {"headline": N_("headline"), "ablation": N_("ablation"), "break": N_("break test"), "extra": N_("extra")}


def tag_value_text(tag: str, value) -> str:
    """A tag's value as its filter shows it."""
    if tag == "group" and value in GROUP_WORDS:
        return _(GROUP_WORDS[value])
    if tag == "direction" and value in ("add", "remove"):
        return (
            pgettext("an ablation's direction", "added")
            if value == "add"
            else pgettext("an ablation's direction", "removed")
        )
    if tag == "part":
        return part_name(value)
    return str(value)


def tag_values(tag: str) -> list:
    """The values of one tag that some run has, as plain Python values (seed 42, not numpy's)."""
    return sorted(runs[tag].dropna().unique().tolist())


def matching_runs(chosen_experiments: list[str], filters: dict[str, list]) -> pd.DataFrame:
    """The runs of the chosen experiments (no choice: of every experiment) that carry each tag
    value filtered on (an empty filter lets every run through)."""
    matching = runs[runs["experiment"].isin(chosen_experiments)] if chosen_experiments else runs
    for tag, values in filters.items():
        if values:
            matching = matching[matching[tag].isin(values)]
    return matching


def chosen_filters() -> dict[str, list]:
    return {tag: st.session_state.get(f"curves_{tag}", []) for tag in TAGS}


def select_all_runs() -> None:
    """A new choice of experiments or tags starts with every run it matches selected."""
    chosen = matching_runs(st.session_state["curves_experiments"], chosen_filters())
    st.session_state["curves_runs"] = list(chosen["label"])


# the splits and x axes, as the controls name them (the URL keeps the values)
SPLITS = {"val": N_("val"), "train": N_("train")}
X_AXES = {"step": N_("step"), "wall-clock": N_("wall-clock")}

# ---- two runs side by side: the settings of their config.json that differ
NOT_SET = N_("(not set)")  # shown translated; told apart from a setting by identity


def flat_settings(config: dict, prefix: str = "") -> dict:
    """config.json's nested settings on one level: {"model": {"n_kv_head": 2}} -> {"model.n_kv_head": 2}."""
    flat = {}
    for key, value in config.items():
        if isinstance(value, dict) and value:
            flat.update(flat_settings(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def settings_of(label: str) -> dict:
    """One run's flattened config.json, from the runs table (results.runs leaves the config out)."""
    configs = loaders.query(results.path, "SELECT run_id, config FROM runs")  # one cached query for every run
    run_id = runs.loc[runs["label"] == label, "run_id"].iloc[0]
    config = configs.loc[configs["run_id"] == run_id, "config"]
    return flat_settings(json.loads(config.iloc[0])) if len(config) and pd.notna(config.iloc[0]) else {}


def as_written(value) -> str:
    """A setting as config.json writes it (true, null, 0.01), so the table reads like the file."""
    if value is NOT_SET:
        return _(NOT_SET)
    if isinstance(value, str):
        return value
    return json.dumps(value)


def settings_that_differ(first: dict, second: dict) -> tuple[list[tuple[str, str, str]], int]:
    """(setting, first's value, second's value) for each setting that differs, and how many are equal."""
    differ, equal = [], 0
    for key in sorted(first.keys() | second.keys()):
        a, b = first.get(key, NOT_SET), second.get(key, NOT_SET)
        if a == b:
            equal += 1
        else:
            differ.append((key, as_written(a), as_written(b)))
    return differ, equal


def show_differences(first: str, second: str) -> None:
    """The table of what differs between two runs' settings, and how much is the same."""
    differ, equal = settings_that_differ(settings_of(first), settings_of(second))
    st.markdown(_("**Settings that differ** (config.json)"))
    if differ:
        st.dataframe(
            pd.DataFrame(differ, columns=[_("setting"), first, second]),
            hide_index=True,
            width="stretch",
        )
    else:
        st.info(_("These two runs were trained with the same settings."))
    st.caption(
        ngettext(
            "{count} setting is the same in both, not shown.",
            "{count} settings are the same in both, not shown.",
            equal,
        ).format(count=equal)
    )


GRAD_NORM_SQL = """SELECT run_id, step, sqrt(sum(norm * norm)) AS grad_norm FROM grad_norms
WHERE isfinite(norm) GROUP BY run_id, step"""


def grad_norms() -> pd.DataFrame:
    """Each run's gradient norm over all its blocks, per logged step (none in a database made
    before the runs logged them)."""
    try:
        return loaders.query(results.path, GRAD_NORM_SQL)
    except loaders.DatabaseProblem:
        return pd.DataFrame(columns=["run_id", "step", "grad_norm"])


# the runs table: one row per run the filters let through, each shown or hidden by its checkbox
TABLE_KEY = "curves_table"


def show_or_hide() -> None:
    """The runs table's checkboxes, applied to the runs drawn (the multiselect above, which the
    link keeps). The table is then drawn afresh from that choice: a new key per edit."""
    edits = st.session_state[f"{TABLE_KEY}_{st.session_state.get('curves_table_round', 0)}"]["edited_rows"]
    st.session_state["curves_runs"] = tables.shown_after_edits(
        st.session_state.get("curves_runs", []), st.session_state["curves_table_labels"], edits
    )
    st.session_state["curves_table_round"] = st.session_state.get("curves_table_round", 0) + 1


def runs_table(candidates: pd.DataFrame, shown: list[str]) -> None:
    """Every run the filters let through, with its numbers and a checkbox that shows or hides it."""
    table = candidates.assign(show=candidates["label"].isin(shown), step_time_ms=candidates["step_time_s"] * 1000)
    columns = ["show", "label", "seed", "status", "best_val_loss", "best_step", "final_val_loss", "final_train_loss"]
    columns += ["step_time_ms", "last_step", "description"]
    st.session_state["curves_table_labels"] = list(table["label"])
    config = tables.run_columns()
    # TRANSLATORS: the header of a column of checkboxes: whether the run's curves are drawn
    config["show"] = st.column_config.CheckboxColumn(_("shown"), help=_("Draw this run's curves"))
    config["seed"] = st.column_config.NumberColumn(_("seed"), format="%d")
    st.data_editor(
        table[columns],
        hide_index=True,
        width="stretch",
        column_config=config,
        disabled=[column for column in columns if column != "show"],
        key=f"{TABLE_KEY}_{st.session_state.get('curves_table_round', 0)}",
        on_change=show_or_hide,
    )


chosen = url_state.widget(
    st.multiselect,
    _("Experiments"),
    experiments,
    key="curves_experiments",
    param="experiment",
    default=default,
    on_change=select_all_runs,
    placeholder=_("Every experiment"),
)
tag_columns = st.columns(len(TAGS))
filters = {}
for column, (tag, name) in zip(tag_columns, TAGS.items()):
    values = tag_values(tag)
    filters[tag] = url_state.widget(
        column.multiselect,
        _(name),
        values,
        key=f"curves_{tag}",
        param=tag,
        default=[],
        on_change=select_all_runs,
        placeholder=_("any"),
        disabled=not values,
        format_func=lambda value, tag=tag: tag_value_text(tag, value),
        help=_("Only runs whose {tag} is one of these; empty: any {tag}.").format(tag=_(name)),
    )
candidates = matching_runs(chosen, filters)
labels = url_state.widget(
    st.multiselect,
    _("Runs"),
    list(candidates["label"]),
    key="curves_runs",
    param="run",
    default=list(candidates["label"]),
    help=_(
        "Every run of the chosen experiments that has the chosen tags; remove any you do not want, here or in the runs table below."
    ),
)

cols = st.columns([2, 2, 3, 1.5])  # room for the toggle's label in Chinese too (y 轴取对数)
splits = url_state.widget(
    cols[0].segmented_control,
    _("Split"),
    ["val", "train"],
    key="curves_splits",
    param="split",
    default=["val", "train"],
    selection_mode="multi",
    format_func=lambda split: _(SPLITS[split]),
)
x_axis = url_state.widget(
    cols[1].segmented_control,
    _("x axis"),
    ["step", "wall-clock"],
    key="curves_x",
    param="x",
    default="step",
    required=True,
    format_func=lambda axis: _(X_AXES[axis]),
)
smoothing = url_state.widget(
    cols[2].slider,
    _("Smoothing (EMA weight of the past)"),
    key="curves_smoothing",
    param="smoothing",
    default=0.0,
    parse=url_state.number_between(0.0, 0.95),
    min_value=0.0,
    max_value=0.95,
    step=0.05,
)
log = url_state.widget(cols[3].toggle, _("log y"), key="curves_log", param="log", default=False, parse=url_state.flag)
cols = st.columns(2)
grouped = url_state.widget(
    cols[0].toggle,
    _("One line per experiment (mean over its seeds)"),
    key="curves_grouped",
    param="group_seeds",
    default=True,
    parse=url_state.flag,
    help=_("With the band from its lowest seed to its highest. Off: one line per run."),
)
each_run = url_state.widget(
    cols[1].toggle,
    _("Each run too, as a thin line"),
    key="curves_each",
    param="each",
    default=False,
    parse=url_state.flag,
    disabled=not grouped,
)

if not labels or not splits:
    st.info(_("Choose at least one run and one split."))
    runs_table(candidates, labels)
    st.stop()

chosen_runs = runs[runs["label"].isin(labels)]
metrics = grid.metrics[grid.metrics["label"].isin(labels)]
columns = tuple(f"{split}_loss" for split in splits)
long = analysis.long_curves(metrics, splits=columns, smoothing=smoothing)
if long.empty:
    st.info(_("These runs have no finite loss values to draw yet."))
    runs_table(candidates, labels)
    st.stop()

x = "elapsed_s" if x_axis == "wall-clock" else "step"
# one axis per corpus: the losses of two texts do not compare (a user's grid may hold two)
corpus_of = chosen_runs.set_index("label")["corpus"].fillna("").to_dict()
long = long.assign(corpus=long["label"].map(corpus_of))
corpora = list(dict.fromkeys(long["corpus"]))
for corpus in corpora:
    drawn = long[long["corpus"] == corpus]
    if len(corpora) > 1:
        st.subheader(_("Trained on {corpus}").format(corpus=corpus or _("the default text (data/posts)")))
    if grouped:
        chart = charts.grouped_curves(
            analysis.grouped_curves(drawn, x), drawn if each_run else None, x=x, log=log, colours=colours
        )
    else:
        chart = charts.zoomable(charts.loss_curves(drawn, x=x, log=log, colours=colours))
    charts.draw(chart)
st.caption(
    _(
        "Solid: val; dashed: train; the colour is the experiment's, on every page. Scroll to zoom, drag to pan, "
        "double-click to reset; click an experiment in the legend to highlight it (shift-click for several)."
    )
)

# ---- beside the loss: the learning rate and the gradient norm, the same runs
lr = analysis.per_experiment(metrics[["run_id", "step", "lr"]], chosen_runs, "lr")
norms = grad_norms()
norms = analysis.per_experiment(norms[norms["run_id"].isin(chosen_runs["run_id"])], chosen_runs, "grad_norm")
# each chart's caption under it: a caption of a chart not drawn would describe nothing
cols = st.columns(2)
with cols[0]:
    if lr.empty:
        st.caption(_("These runs logged no learning rate."))
    else:
        charts.draw(charts.metric_curves(lr, "lr", _("learning rate"), colours=colours))
        st.caption(
            _("The learning rate of each step (warmup, then the schedule), the mean over each experiment's seeds.")
        )
with cols[1]:
    if norms.empty:
        st.caption(_("These runs logged no gradient norms (runs of an older version do not)."))
    else:
        charts.draw(charts.metric_curves(norms, "grad_norm", _("gradient norm, all blocks"), log=True, colours=colours))
        st.caption(
            _(
                "The gradient norm of all blocks together, log scale; a spike is a step the optimiser was thrown "
                "off. The mean over each experiment's seeds."
            )
        )

not_done = chosen_runs[chosen_runs["status"] != "done"]
for _index, run in not_done.iterrows():  # not `_`: that name translates
    name = tables.markdown_name(run["label"])  # the experiment's name is the database's: as text
    if run["status"] == "running":
        still_running = (
            _("{run} is still running (no evaluation yet).").format(run=name)
            if pd.isna(run["last_step"])
            else _("{run} is still running (last evaluation at step {step}).").format(
                run=name, step=int(run["last_step"])
            )
        )
        st.info(still_running, icon=":material/hourglass_top:")
    elif pd.notna(run["diverged_step"]):  # a whole step, never "None" or "30.0"
        st.warning(
            _("{run} diverged at step {step}; its line stops there.").format(run=name, step=int(run["diverged_step"])),
            icon=":material/error:",
        )

st.subheader(_("Runs"))
runs_table(candidates, labels)
# two runs side by side: what differs between their settings
if len(labels) == 2:
    show_differences(*labels)
elif len(labels) > 2:
    with st.expander(_("Compare two runs' settings")):
        pair = st.multiselect(_("Two of the runs drawn"), labels, max_selections=2, key="curves_compare")
        if len(pair) == 2:
            show_differences(*pair)
