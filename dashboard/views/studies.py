"""Studies: questions asked beside the chapter's grid, each with runs of its own (anatomy/results/groups.py).

Every finding on this page is the report's own text, made by the same package code
(anatomy/report/study_section.py for every study workflow/studies.yaml declares, with
lr_section.py's text for the lr study's setups), so the page and report.md never say it two ways.
The page adds what a report cannot: the curves of one point of a study at a time.
"""

from __future__ import annotations

import dataclasses

import pandas as pd
import streamlit as st

from anatomy.language import N_, _
from anatomy.report import lr_section, study_measures, study_section
from anatomy.report.still_to_train import still_to_train
from anatomy.errors import AnatomyError
from anatomy.results.groups import target_command
from anatomy.results.studies import declared
from anatomy.results.reference import PROVENANCE_FILE, read_provenance
from anatomy.report.findings import FOUND, findings_block
from dashboard import analysis, charts, loaders
from dashboard.findings import show_part_glossary

TRAIN_STUDY = N_(
    "Train them with `{command}` (workflow/studies.yaml declares the study, workflow/experiments.yaml its runs), "
    "then collect again."
)


def point_runs(everything, study, point: lr_section.Setup) -> pd.DataFrame:
    """The study's own runs at one of its points (another study's runs on the same text stay out)."""
    runs = point.runs if point.runs is not None else everything.runs.iloc[0:0]
    return runs[runs["group"] == study.name]


def point_choice_label(everything, study, point: lr_section.Setup) -> str:
    """'8,192,000 characters of poems_8m (bf16) (read 1x)': the point as the study's table names it,
    and how often its runs read their text where the study measures that."""
    label = study_section.point_label(study, point)
    runs = point_runs(everything, study, point)
    if "times_read" in study.measures and not runs.empty:
        read = study_measures.times_read_by_last(runs, everything.metrics)
        if pd.notna(read):
            return _("{point} (read {times}x)").format(point=label, times=f"{read:.3g}")
    return label


def show_point_curves(everything, study) -> None:
    """The loss curves of one point of a models study at a time: on one axis the points' losses
    would overlap."""
    found = study_section.points(everything, study) if study.compare == "models" else []
    found = [point for point in found if not point_runs(everything, study, point).empty]
    if not found:
        return
    st.subheader(_("Curves, one point at a time"))
    labels = [point_choice_label(everything, study, point) for point in found]
    chosen = st.selectbox(
        _("Point of the study"),
        range(len(found)),
        index=len(found) - 1,  # the last: the largest size, where the answer is usually judged
        format_func=labels.__getitem__,
        key=f"studies_point_{study.name}",
    )
    run_ids = point_runs(everything, study, found[chosen])["run_id"]
    long = analysis.long_curves(everything.metrics[everything.metrics["run_id"].isin(run_ids)])
    if long.empty:
        st.info(_("These runs have no finite loss values to draw yet."))
        return
    charts.draw(charts.zoomable(charts.loss_curves(long, colours=colours)))
    st.caption(_("Solid: val; dashed: train; one line per seed. Click an experiment in the legend to highlight it."))


def show_parts_curves(everything, study) -> None:
    """Best val against lr at each point of a parts study: the plain mini-LLaMA and each part,
    each ringed at its best lr (QK-norm's worth is in the lr it survives, not at a small one)."""
    points = study_section.parts_lr_points(everything, study)
    part_colours = study_section.parts_colours(everything, study)
    for label in points["setup"].unique():
        charts.draw(charts.lr_chart(points, setup=label, colours=part_colours))
        st.caption(_("{point}: each curve's best val over the lrs tried, its best lr ringed.").format(point=label))


def show_answer(everything, study) -> None:
    """A study's charts and answer, as its declaration compares (a study with runs)."""
    # the lr study's points are setups: one chart and one answer each (two texts' losses share no axis)
    if study_section.per_setup(study) and (setups := lr_section.setups(everything, group=study.name)):
        lr_points = lr_section.lr_points(everything, group=study.name)
        for setup in setups:
            charts.draw(charts.lr_chart(lr_points, setup=setup.label))
            st.caption(lr_section.figure_caption(setup))
            st.markdown(lr_section.setup_text(everything, setup))
        st.caption(_(lr_section.HOW_TO_READ))
        show_point_curves(everything, study)
        return
    if not (by_point := study_section.study_points(everything, study)).empty:  # compare: models
        charts.draw(charts.best_val_by_params_chart(by_point))
        charts.draw(charts.best_lr_by_params_chart(by_point))
    if study.compare == "parts":  # each point's curves over lr: where each part's best lr lies
        show_parts_curves(everything, study)
    if not (by_size := study_section.best_val_by_text_size(everything, study)).empty:  # one lr, sizes of text
        charts.draw(charts.best_val_by_size_chart(by_size))
        st.caption(study_section.figure_caption(everything, study))
    if (text := study_section.study_section(everything, study)) is None:  # runs, but none compared yet
        hint = _(TRAIN_STUDY).format(command=target_command(study.stage_target(1)))
        st.info(_("This study's runs have nothing to be compared with yet. {how}").format(how=hint))
        return
    st.markdown(text)
    show_point_curves(everything, study)


def with_job_times(results):
    """The results with the record of their runs' training jobs (grid.json beside the run folders,
    as `anatomy report` reads it), for the size table's minutes per run; as they are without one."""
    if results.provenance:
        return results
    try:
        record = read_provenance(loaders.runs_root(results.path).parent / PROVENANCE_FILE)
    except AnatomyError:
        return results
    return dataclasses.replace(results, provenance=record)


everything = with_job_times(loaders.require_results(runs_needed=False))  # a database of no runs says so below
colours = charts.colours_of(everything)

st.title(_("Studies"))
st.caption(
    _(
        "Questions asked beside the chapter's grid, each with runs of its own: the grid's pages and tables never "
        "take them. The sentences below are the report's own."
    )
)
show_part_glossary()
# each study's findings first, as the README and report number them (anatomy.report.findings)
if found := findings_block(everything, link_prefix=None, evidence={study.name for study in declared().values()}):
    st.subheader(_(FOUND))
    st.markdown(found)

# ---- each study rendered from its declaration (workflow/studies.yaml): the scale, lr, size,
# precision and parts studies, and any of your own
for study in declared().values():
    st.header(_(study.question), divider="gray")
    if not (everything.runs["group"] == study.name).any():
        hint = _(TRAIN_STUDY).format(command=target_command(study.stage_target(1)))
        st.info(_("No runs of this study in this database yet. {how}").format(how=hint), icon=":material/science:")
        continue
    show_answer(everything, study)
    if missing := still_to_train(everything, study):  # after the answer, as the report says it
        st.markdown(missing)
