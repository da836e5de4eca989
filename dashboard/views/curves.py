"""Curves: any runs, train and val, by step or wall-clock, smoothed, on a log scale if wanted.

Every choice on this page is kept in its URL (dashboard/url_state.py): a reload or a shared link
opens the same runs, splits, axis, smoothing and scale.
"""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from anatomy.language import N_, _, ngettext
from dashboard import analysis, charts, loaders, tables, url_state

results = loaders.require_results()
runs = results.runs

st.title(_("Loss curves"))

experiments = list(dict.fromkeys(runs["experiment"]))
default = list(dict.fromkeys(results.headline["experiment"])) or experiments[:2]
# the tags a run carries (config.json's tags, its seed and its corpus): filters that pick runs
TAGS = ["group", "part", "direction", "seed", "corpus"]


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
for column, tag in zip(tag_columns, TAGS):
    values = tag_values(tag)
    filters[tag] = url_state.widget(
        column.multiselect,
        tag,
        values,
        key=f"curves_{tag}",
        param=tag,
        default=[],
        on_change=select_all_runs,
        placeholder=_("any"),
        disabled=not values,
        help=_("Only runs whose {tag} is one of these; empty: any {tag}.").format(tag=tag),
    )
candidates = list(matching_runs(chosen, filters)["label"])
labels = url_state.widget(
    st.multiselect,
    _("Runs"),
    candidates,
    key="curves_runs",
    param="run",
    default=candidates,
    help=_("Every run of the chosen experiments that has the chosen tags; remove any you do not want."),
)

cols = st.columns([2, 2, 3, 1])
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

if not labels or not splits:
    st.info(_("Choose at least one run and one split."))
    st.stop()

metrics = results.metrics[results.metrics["label"].isin(labels)]
columns = tuple(f"{split}_loss" for split in splits)
long = analysis.long_curves(metrics, splits=columns, smoothing=smoothing)
if long.empty:
    st.info(_("These runs have no finite loss values to draw yet."))
    st.stop()


x = "elapsed_s" if x_axis == "wall-clock" else "step"
# exactly two runs: what differs between them goes next to their curves
chart_place, beside = st.columns([3, 2]) if len(labels) == 2 else (st.container(), None)
with chart_place:
    charts.draw(charts.loss_curves(long, x=x, log=log))
    st.caption(
        _(
            "Solid: val; dashed: train. Hover a point for the run's details; click a run in the legend to highlight "
            "it (shift-click for several)."
        )
    )
if beside is not None:
    with beside:
        show_differences(*labels)
elif len(labels) > 2:
    with st.expander(_("Compare two runs' settings")):
        pair = st.multiselect(_("Two of the runs drawn"), labels, max_selections=2, key="curves_compare")
        if len(pair) == 2:
            show_differences(*pair)

chosen_runs = runs[runs["label"].isin(labels)]
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
    else:
        st.warning(
            _("{run} diverged at step {step}; its line stops there.").format(run=name, step=run["diverged_step"]),
            icon=":material/error:",
        )

with st.expander(_("Run details")):
    tables.run_table(
        chosen_runs,
        [
            "label",
            "description",
            "group",
            "part",
            "direction",
            "params",
            "status",
            "best_val_loss",
            "best_step",
            "elapsed_s",
        ],
    )
