"""The studies, as workflow/studies.yaml declares them: the one place that says which groups of
experiments are studies, what each asks, what tells its points apart, and how it compares.

The workflow reads them for its targets (anatomy/results/groups.py), the report and the
dashboard for their sections (anatomy/report/study_section.py): the file is read where the code
is, like the rest of the analysis, so a shipped database needs no copy of it.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterator
from pathlib import Path

import yaml

from anatomy.config import ModelConfig, TrainConfig
from anatomy.errors import AnatomyError
from anatomy.files.yaml_files import read_config_file

STUDIES_FILE = Path(__file__).resolve().parents[2] / "workflow" / "studies.yaml"
# the mini-LLaMA minus vanilla; each part added to the mini-LLaMA minus the plain one; each run
# minus its twin of another precision
COMPARES = ("models", "parts", "twins")
RULES = ("own_lr", "shared_lr")  # each model at its own best lr; both at one lr
# what may tell a study's points apart: a run's settings, and its text's name and size
AXES = (
    ("corpus", "train_tokens")
    + tuple(field.name for field in dataclasses.fields(ModelConfig))
    + tuple(field.name for field in dataclasses.fields(TrainConfig))
)
NAME = re.compile(r"^[a-z][a-z0-9_]*$")
# what a study's table may show at each point beside the comparison, from the runs at the study's
# lr there (anatomy/report/study_measures.py computes each)
MEASURES = ("times_read", "minutes_per_run", "best_step", "times_read_at_best", "train_val_gap")
# a claim of the chapter a study tests on its points (anatomy/report/study_measures.py): read_once,
# "learning fast is pure gain when the data is read less than once"
HYPOTHESES = ("read_once",)
# where a study swaps its parts (a run tagged `part`): at every point (a trend is asked), or at the
# last only (the scale study's stage 2, at its largest text)
SWAP_POINTS = ("all", "last")
KNOWN = (
    "question",
    "compare",
    "axis",
    "rule",
    "shared_lr",
    "stages",
    "stage_targets",
    "measures",
    "hypothesis",
    "swap_points",
    "cannot_answer",
)


@dataclasses.dataclass(frozen=True)
class Study:
    name: str  # the experiments' group, and the target
    question: str  # English, as declared; shown with _() (the catalogue has the shipped ones)
    compare: str  # one of COMPARES
    axis: tuple[str, ...]  # the settings that tell one point from another
    rule: str | None = None  # one of RULES; None for twins
    shared_lr: float | None = None
    stages: int = 1
    stage_targets: dict[int, str] = dataclasses.field(default_factory=dict)
    measures: tuple[str, ...] = ()  # of MEASURES: the table's columns beside the comparison
    hypothesis: str | None = None  # one of HYPOTHESES
    swap_points: str = "all"  # one of SWAP_POINTS
    cannot_answer: str | None = None

    def stage_target(self, stage: int) -> str:
        return self.stage_targets.get(stage, f"{self.name}_stage{stage}")


def problem(where: str, field: str, message: str) -> AnatomyError:
    return AnatomyError(f"{where}: studies.{field}: {message}")


def parse_study(name: str, entry: object, where: str) -> Study:
    """One entry, checked field by field; a wrong one is one line naming it and what was expected."""
    if not NAME.match(str(name)):
        raise problem(where, str(name), "a study's name is lower_snake_case (it becomes a group and a target)")
    if not isinstance(entry, dict):
        raise problem(where, name, f"expected a mapping of {', '.join(KNOWN)}, got {entry!r}")
    if unknown := sorted(set(entry) - set(KNOWN)):
        raise problem(where, f"{name}.{unknown[0]}", f"not a study field; known fields: {', '.join(KNOWN)}")
    for required in ("question", "compare", "axis"):
        if required not in entry:
            raise problem(where, name, f"'{required}' is missing")
    question = entry["question"]
    if not isinstance(question, str) or not question.strip():
        raise problem(where, f"{name}.question", f"expected a sentence, got {question!r}")
    if entry["compare"] not in COMPARES:
        raise problem(where, f"{name}.compare", f"expected one of {', '.join(COMPARES)}, got {entry['compare']!r}")
    axis = entry["axis"]
    if not isinstance(axis, list) or not axis or any(column not in AXES for column in axis):
        wrong = next((column for column in axis if column not in AXES), axis) if isinstance(axis, list) else axis
        raise problem(where, f"{name}.axis", f"expected a list of run settings (such as n_layer, lr), got {wrong!r}")
    rule = entry.get("rule")
    if entry["compare"] != "twins" and rule not in RULES:
        raise problem(where, f"{name}.rule", f"expected one of {', '.join(RULES)}, got {rule!r}")
    if entry["compare"] == "twins" and rule is not None:
        raise problem(where, f"{name}.rule", "a study of twins compares each run with its twin: no lr rule")
    shared_lr = entry.get("shared_lr")
    if shared_lr is not None and (
        isinstance(shared_lr, bool) or not isinstance(shared_lr, (int, float)) or shared_lr <= 0
    ):
        raise problem(where, f"{name}.shared_lr", f"expected a positive number, got {shared_lr!r}")
    if rule == "shared_lr" and shared_lr is None:
        raise problem(where, f"{name}.shared_lr", "rule shared_lr needs the lr both models train at")
    stages = entry.get("stages", 1)
    if isinstance(stages, bool) or not isinstance(stages, int) or stages < 1:
        raise problem(where, f"{name}.stages", f"expected a whole number from 1, got {stages!r}")
    stage_targets = entry.get("stage_targets") or {}
    if not isinstance(stage_targets, dict) or any(
        not isinstance(stage, int) or not 1 <= stage <= stages or not NAME.match(str(target))
        for stage, target in stage_targets.items()
    ):
        raise problem(
            where, f"{name}.stage_targets", f"expected stage (1 to {stages}) -> target name, got {stage_targets!r}"
        )
    measures = entry.get("measures") or []
    if not isinstance(measures, list) or any(measure not in MEASURES for measure in measures):
        wrong = next((m for m in measures if m not in MEASURES), measures) if isinstance(measures, list) else measures
        raise problem(where, f"{name}.measures", f"expected a list of {', '.join(MEASURES)}, got {wrong!r}")
    if measures and entry["compare"] != "models":
        raise problem(where, f"{name}.measures", "only a study of the two models (compare: models) shows measures")
    hypothesis = entry.get("hypothesis")
    if hypothesis is not None and hypothesis not in HYPOTHESES:
        raise problem(where, f"{name}.hypothesis", f"expected one of {', '.join(HYPOTHESES)}, got {hypothesis!r}")
    if hypothesis is not None and rule != "shared_lr":
        raise problem(where, f"{name}.hypothesis", "a hypothesis is tested at the shared lr: it needs rule shared_lr")
    swap_points = entry.get("swap_points", "all")
    if swap_points not in SWAP_POINTS:
        raise problem(where, f"{name}.swap_points", f"expected one of {', '.join(SWAP_POINTS)}, got {swap_points!r}")
    for field in ("hypothesis", "swap_points"):
        if field in entry and entry["compare"] != "models":
            raise problem(where, f"{name}.{field}", "only a study of the two models (compare: models) has it")
    cannot_answer = entry.get("cannot_answer")
    if cannot_answer is not None and not isinstance(cannot_answer, str):
        raise problem(where, f"{name}.cannot_answer", f"expected a sentence, got {cannot_answer!r}")
    return Study(
        name=name,
        question=question.strip(),
        compare=entry["compare"],
        axis=tuple(axis),
        rule=rule,
        shared_lr=None if shared_lr is None else float(shared_lr),
        stages=stages,
        stage_targets=dict(stage_targets),
        measures=tuple(measures),
        hypothesis=hypothesis,
        swap_points=swap_points,
        cannot_answer=cannot_answer,
    )


def read_studies(path: Path = STUDIES_FILE) -> dict[str, Study]:
    """Every study the file declares, by name, in the file's order."""
    if not Path(path).is_file():
        raise AnatomyError(f"{path}: no such file (the studies' declarations; a checkout of this project has it)")
    document = read_config_file(path)
    if not isinstance(document, dict) or not isinstance(document.get("studies"), dict):
        raise AnatomyError(f"{path}: expected a 'studies' mapping of name -> study")
    return {str(name): parse_study(str(name), entry, str(path)) for name, entry in document["studies"].items()}


@functools.cache
def declared() -> dict[str, Study]:
    """The studies of this checkout (workflow/studies.yaml), read once."""
    return read_studies()


TRANSLATED = ("question", "cannot_answer")  # the fields a reader sees, in the reader's language


def extract_messages(fileobj, keywords, comment_tags, options) -> Iterator[tuple[int, str, str, list[str]]]:
    """Babel's extractor for workflow/studies.yaml (babel.cfg names it): each study's question and
    cannot_answer, with its line, so the catalogue translates them like the code's sentences."""
    root = yaml.compose(fileobj.read().decode("utf-8"))  # compose, not load: each value keeps its line
    studies = next((value for key, value in getattr(root, "value", []) if key.value == "studies"), None)
    for _name, entry in getattr(studies, "value", []):
        for key, value in getattr(entry, "value", []):
            if key.value in TRANSLATED and isinstance(value, yaml.ScalarNode):
                yield value.start_mark.line + 1, "_", value.value, [f"workflow/studies.yaml: {key.value}"]
