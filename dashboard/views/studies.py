"""Studies: questions asked beside the chapter's grid, each with runs of its own (anatomy/results/groups.py).

Every finding on this page is the report's own text, made by the same package code
(anatomy/report/scale_section.py, and study_section.py for every study workflow/studies.yaml
declares beside it, with lr_section.py's text for the lr study's setups), so the page and report.md never say it
two ways. The page adds what a report cannot: the curves of one training-set size at a time.
"""

from __future__ import annotations

import dataclasses

import pandas as pd
import streamlit as st

from anatomy.language import N_, _
from anatomy.report import lr_section, scale_section, study_section
from anatomy.errors import AnatomyError
from anatomy.results.groups import STUDY_GROUPS
from anatomy.results.studies import declared
from anatomy.results.reference import PROVENANCE_FILE, read_provenance
from anatomy.report.findings import FOUND, findings_block
from anatomy.report.grid_sections import ablation_section
from dashboard import analysis, charts, loaders
from dashboard.findings import show_part_glossary

TRAIN_SCALE = N_(
    "Train them with `snakemake scale_stage1 --cores 2 --config train_threads=1` "
    "(then `scale_stage2`: the part ablations at the largest size, and `scale_stage3`: both models at lr 1e-3), "
    "then collect again."
)
TRAIN_STUDY = N_(
    "Train them with `snakemake {target} --cores 2 --config train_threads=1` (workflow/studies.yaml declares the "
    "study, workflow/experiments.yaml its runs), then collect again."
)


def size_label(size: int, read: float) -> str:
    """'1,024,000 characters (read 8x)': the size and how often its runs read it, as the size table says."""
    if pd.notna(read):
        return _("{size} characters (read {times}x)").format(size=f"{size:,}", times=f"{read:.3g}")
    return _("{size} characters").format(size=f"{size:,}")


def question(group: str) -> str:
    """The question a study group asks, as its section's header, in the reader's language."""
    asked = STUDY_GROUPS[group]  # marked where it is defined (anatomy/results/groups.py)
    return _(asked)


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
if found := findings_block(everything, link_prefix=None, evidence={"lr", "scale"}):
    st.subheader(_(FOUND))
    st.markdown(found)

# ---- each study rendered from its declaration (workflow/studies.yaml): the lr, size, precision and
# parts studies, and any of your own
for study in declared().values():
    if study.name in study_section.OWN_SECTIONS:
        continue
    st.header(_(study.question), divider="gray")
    if not (everything.runs["group"] == study.name).any():
        hint = _(TRAIN_STUDY).format(target=study.stage_target(1))
        st.info(_("No runs of this study in this database yet. {how}").format(how=hint), icon=":material/science:")
        continue
    # the lr study's points are setups: one chart and one answer each (two texts' losses share no axis)
    if study_section.per_setup(study) and (setups := lr_section.setups(everything, group=study.name)):
        lr_points = lr_section.lr_points(everything, group=study.name)
        for setup in setups:
            charts.draw(charts.lr_chart(lr_points, setup=setup.label))
            st.caption(lr_section.figure_caption(setup))
            st.markdown(lr_section.setup_text(everything, setup))
        st.caption(_(lr_section.HOW_TO_READ))
        continue
    if not (by_point := study_section.study_points(everything, study)).empty:  # compare: models
        charts.draw(charts.best_val_by_params_chart(by_point))
        charts.draw(charts.best_lr_by_params_chart(by_point))
    if (text := study_section.study_section(everything, study)) is None:  # runs, but none compared yet
        hint = _(TRAIN_STUDY).format(target=study.stage_target(1))
        st.info(_("This study's runs have nothing to be compared with yet. {how}").format(how=hint))
        continue
    st.markdown(text)

# ---- scale: when does the mini-LLaMA win?
st.header(question("scale"), divider="gray")
study = scale_section.scale_data(everything)
found = scale_section.sizes(study)
if study.runs.empty:
    st.info(_("No scale runs in this database yet. {how}").format(how=_(TRAIN_SCALE)), icon=":material/science:")
else:
    if found:
        # the report's answer (where_it_wins, then the verdict on the chapter's hypothesis), as the README says it
        st.markdown(scale_section.scale_answer(everything))
        charts.draw(charts.best_val_by_size_chart(scale_section.best_val_by_size(study)))
        st.caption(
            _("Best val against training-set size: a line through the mean over seeds, the band from min to max.")
        )
        st.markdown(scale_section.size_table(study, found))
        if lr_text := scale_section.other_lr_text(everything):
            st.markdown(lr_text)
    else:  # runs, but no size with both models yet (a stage still training)
        st.info(
            _("No training-set size has both models yet. {how}").format(how=_(TRAIN_SCALE)), icon=":material/science:"
        )

    # the curves of one size at a time: on one log axis the sizes' losses would overlap
    st.subheader(_("Curves, one training-set size at a time"))
    sizes = sorted(int(size) for size in study.runs["train_tokens"].dropna().unique())
    if sizes:
        labels = {size: size_label(size, scale_section.times_read(study, size)) for size in sizes}
        size = st.selectbox(
            _("Training-set size"),
            sizes,
            index=len(sizes) - 1,  # the largest: the size the verdict is judged at
            format_func=labels.get,
            key="studies_size",
        )
        run_ids = study.runs.loc[study.runs["train_tokens"] == size, "run_id"]
        long = analysis.long_curves(study.metrics[study.metrics["run_id"].isin(run_ids)])
        if long.empty:
            st.info(_("These runs have no finite loss values to draw yet."))
        else:
            charts.draw(charts.zoomable(charts.loss_curves(long, colours=colours)))
            st.caption(
                _("Solid: val; dashed: train; one line per seed. Click an experiment in the legend to highlight it.")
            )
    else:
        st.info(_("These scale runs record no training-set size (`train_tokens`): collect them again."))

    # stage 2, judged as the report's ablation table judges it (its setup's noise, Holm over the ten)
    if (largest := scale_section.largest_as_headline(study)) is not None:
        st.markdown(scale_section.which_part_earns(study))
        with st.expander(_("Which part earned the gap at the largest size (stage 2)")):
            st.markdown(ablation_section(largest))
