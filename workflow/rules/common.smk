"""Shared helpers: config validation, the experiment grid, and the functions rules call.

The rules only name files; everything that needs logic (which corpus files to watch, the
arguments of one training run, which runs a target needs) is a named function here.
"""

import atexit
import json
import os
import shlex
import sys
from pathlib import Path

from jsonschema.exceptions import ValidationError
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate


def validate_config():
    """Check the merged config against the schema, naming the entry and field that is wrong.

    Snakemake's own message prints the whole sub-schema; this one fits on a line, e.g.
    `invalid config at experiments.mqa.model: Additional properties are not allowed
    ('norm_typ' was unexpected); known keys: d_model, n_layer, ...`.
    """
    try:
        validate(config, "../schemas/config.schema.yaml")
    except WorkflowError as err:
        problem = err.__context__
        if not isinstance(problem, ValidationError):
            raise
        where = ".".join(str(part) for part in problem.absolute_path) or "the top level"
        message = problem.message
        if problem.validator == "additionalProperties":
            known = ", ".join(problem.schema.get("properties", {}))
            message += f"; known keys: {known}"
        raise WorkflowError(
            f"invalid config at {where}: {message}. (Settings: workflow/config.yaml; "
            "experiments: workflow/experiments.yaml; or a --configfile / --config you gave.)"
        ) from None


validate_config()

# The rules say `python -m anatomy ...`; this shell function, put before each of their commands,
# makes that `python` the interpreter running Snakemake, which has the package and its
# dependencies, so a venv's snakemake works without activating the venv. A function rather than
# a changed command: Snakemake reruns every job whose command text changed. (Braces doubled:
# Snakemake formats the prefix and would read them as placeholders. `set -euo pipefail` is
# Snakemake's own prefix for bash, which this one replaces.)
PYTHON = shlex.quote(sys.executable).replace("{", "{{").replace("}", "}}")
shell.prefix(f'set -euo pipefail; python() ( exec {PYTHON} "$@" ); ')

EXPERIMENTS = config["experiments"]
SEEDS = [int(seed) for seed in config["seeds"]]
CORPORA = config["corpora"]


def seeds_by_stage(experiment_name):
    """Stage (None for an experiment not run in stages) -> the seeds it trains in that stage.

    `stages: {1: [42], 2: [7]}` trains seed 42 in stage 1 and seed 7 in stage 2; otherwise every
    seed (the experiment's own `seeds`, else config `seeds`) belongs to its `stage`.
    """
    experiment = EXPERIMENTS[experiment_name]
    if "stages" in experiment:
        return {int(stage): [int(seed) for seed in seeds] for stage, seeds in experiment["stages"].items()}
    return {experiment.get("stage"): [int(seed) for seed in experiment.get("seeds", SEEDS)]}


def seeds_of(experiment_name):
    """Every seed the experiment trains, over all its stages."""
    stages = seeds_by_stage(experiment_name).values()
    return list(dict.fromkeys(seed for seeds in stages for seed in seeds))


def corpus_of(experiment_name):
    """The named corpus the experiment trains on, or None: config `corpus` (results/corpus)."""
    return EXPERIMENTS[experiment_name].get("corpus")


def data_dir_of(experiment_name):
    """The tokenized folder an experiment's runs read."""
    corpus = corpus_of(experiment_name)
    return "results/corpus" if corpus is None else f"results/corpora/{corpus}"


def precision_of(experiment_name):
    """The experiment's own precision, else the config-wide train override, else `precision`."""
    train = {**config["train_overrides"], **EXPERIMENTS[experiment_name].get("train", {})}
    return train.get("precision", config["precision"])


def declared_model(experiment):
    """The experiment's model as declared, without the overrides all experiments share; None where
    it holds only with them (n_head 3 declared beside an override's d_model 96)."""
    from anatomy.config import preset
    from anatomy.errors import AnatomyError

    try:
        return preset(experiment["preset"], **experiment.get("model", {}))
    except AnatomyError:
        return None


def check_experiment_settings():
    """Resolve every experiment's settings as its training job will, and check them with the
    package's own configs. The schema checks each field alone; this catches fields that clash
    (n_head 3 with d_model 32) or values no schema rules out (lr .nan), at `snakemake -n` time
    rather than in a job that fails later. anatomy.config needs no torch, so this is quick.
    """
    from anatomy.config import TrainConfig, preset, training_key
    from anatomy.errors import AnatomyError

    try:
        from anatomy.results.groups import GRID_GROUPS, STUDY_GROUPS
    except AnatomyError as err:  # workflow/studies.yaml, wrong: one line naming the field
        raise WorkflowError(str(err)) from None
    GROUPS = {*GRID_GROUPS, *STUDY_GROUPS}
    trained_by = {}  # one training (anatomy.config.training_key) -> the experiment that declares it

    for name, experiment in EXPERIMENTS.items():
        if "stages" in experiment:
            clash = [key for key in ("stage", "seeds") if key in experiment]
            bad = [stage for stage in experiment["stages"] if not (isinstance(stage, int) and stage >= 1)]
            if clash or bad:
                raise WorkflowError(
                    f"invalid config at experiments.{name}.stages: expected stage numbers from 1, each with "
                    f"its seeds ({{1: [42], 2: [7]}}), and no `stage` or `seeds` beside it; found "
                    + (f"{', '.join(clash)} beside it" if clash else f"stage {bad[0]!r}")
                )
        if experiment["group"] not in GROUPS:
            raise WorkflowError(
                f"invalid config at experiments.{name}.group: {experiment['group']!r} is neither a group of the "
                f"grid ({', '.join(GRID_GROUPS)}) nor a study of workflow/studies.yaml ({', '.join(STUDY_GROUPS)})"
            )
        baseline = experiment.get("baseline")
        if baseline is not None and (baseline not in EXPERIMENTS or baseline == name):
            raise WorkflowError(
                f"invalid config at experiments.{name}.baseline: {baseline!r} is not another experiment of the "
                f"grid (experiments: {', '.join(EXPERIMENTS)})"
            )
        corpus = experiment.get("corpus")
        if corpus is not None and corpus not in CORPORA:
            raise WorkflowError(
                f"invalid config at experiments.{name}.corpus: {corpus!r} is not a named corpus "
                f"(workflow/corpora.yaml: {', '.join(CORPORA) or 'none'})"
            )
        model = {**config["model_overrides"], **experiment.get("model", {})}
        train = {**config["train_overrides"], **experiment.get("train", {})}
        try:
            preset(experiment["preset"], **model)
            # One training, one run: a study reads another's runs by their settings, so a repeat
            # would be counted twice (a third seed that is not one) and cost hours. Judged on the
            # declarations as written, without the overrides all experiments share: under
            # --config precision=bf16, vanilla is vanilla_bf16 again, as that user asked.
            as_declared = declared_model(experiment)
            for seed in seeds_of(name):
                TrainConfig.from_dict(
                    {**train, "seed": seed, "device": config["device"], "precision": precision_of(name)}
                )
                if as_declared is None:
                    continue
                declared_train = TrainConfig.from_dict({**experiment.get("train", {}), "seed": seed})
                key = training_key(as_declared, declared_train, data_dir_of(name))
                if (other := trained_by.setdefault(key, name)) != name:
                    raise WorkflowError(
                        f"invalid config at experiments.{name}: seed {seed} repeats the training of "
                        f"experiments.{other} (the same model, training settings, text and seed): drop the "
                        f"seed here, and name {other} as the `baseline` of the runs that need it"
                    )
        except AnatomyError as err:
            raise WorkflowError(
                f"invalid config at experiments.{name}: {err}. (Experiments: workflow/experiments.yaml; "
                "quick sizes: workflow/quick.yaml; or a --configfile / --config you gave.)"
            ) from None


check_experiment_settings()


def claim_working_directory():
    """Let an interrupted grid restart with the same command, even after a SIGKILL.

    Snakemake locks its working directory with files in .snakemake/locks, which a killed
    Snakemake leaves behind (the next run then asks for --unlock). This workflow also holds a
    kernel lock, .snakemake/anatomy.lock, for as long as it runs; the kernel releases it however
    the process ends. Whoever gets that lock knows no other Snakemake of this workflow runs
    here, so Snakemake's lock files are leftovers, and removes them (and the plan an earlier run
    wrote, anatomy/files/plan.py). The same lock is the trainers' lifeline ($ANATOMY_LIFELINE):
    they stop when it is released, instead of running on as orphans. Only the main process does
    this, not the jobs a cluster runs elsewhere.
    """
    if not workflow.is_main_process:
        return
    from anatomy.errors import AnatomyError
    from anatomy.files.locks import LIFELINE_ENV, hold_for_life, lifeline_value
    from anatomy.files.plan import PLAN_FILE

    lock = Path(".snakemake") / "anatomy.lock"
    try:
        held = hold_for_life(lock)
    except AnatomyError as err:  # not a lock file there (a named pipe): the workflow's refusal, in its words
        raise WorkflowError(str(err)) from None
    if not held:
        return  # another Snakemake of this workflow runs here: its locks are real
    stale = sorted((Path(".snakemake") / "locks").glob("*.lock"))
    for path in stale:
        path.unlink()
    if stale:
        print(
            "Removed the locks of a Snakemake that was stopped by force (it is not running any more).", file=sys.stderr
        )
    # The plan of an earlier Snakemake here: the Progress page must not take it for this one's,
    # which write_plan writes once this one has planned its jobs.
    PLAN_FILE.unlink(missing_ok=True)
    os.environ[LIFELINE_ENV] = lifeline_value(lock)


claim_working_directory()

# The named targets (each trains one group, or one stage of it) and the studies beside the grid:
# anatomy/results/groups.py, which the report reads too. Only a study's own targets run it, never
# `all`; the grid's group `extra` runs only in `all`.
from anatomy.results.groups import TARGETS, is_study

GRID = [name for name, experiment in EXPERIMENTS.items() if not is_study(experiment["group"])]
# Targets that ask for every run of the grid and every exam (the default target is `all`), and so
# do the database alone (no report) and the report, asked for by their rule's name or their file.
WHOLE_GRID_TARGETS = ("all", "exams")
# What collecting writes, and the stamp that says it finished, the rule's one declared output
# (rules/collect.smk says why the database is not one)
DATABASE = "results/anatomy.duckdb"
RESULTS_JSON = "results/results.json"
COLLECTED_STAMP = "results/collected.done"
DATABASE_TARGETS = ("collect_results", COLLECTED_STAMP)
REPORT_TARGETS = ("write_report", "results/report")


wildcard_constraints:
    # Only the declared experiments, so a mistyped target is "no rule to make" rather than a run.
    experiment="|".join(sorted(EXPERIMENTS, key=len, reverse=True)),
    seed=r"\d+",
    corpus="|".join(sorted(CORPORA, key=len, reverse=True)) or "(?!)",


def runs_of_target(target):
    """The runs a named target trains, as experiment name -> seeds, in the order
    experiments.yaml lists them: its group's experiments at its stage's seeds, and the runs of
    their baselines at the same seeds (an ablation without its baseline's runs has no
    difference to show)."""
    group, stage = TARGETS[target]
    runs = {}
    for name, experiment in EXPERIMENTS.items():
        if experiment["group"] != group:
            continue
        for member_stage, seeds in seeds_by_stage(name).items():
            if stage in (None, member_stage):
                runs.setdefault(name, set()).update(seeds)
    for name, seeds in list(runs.items()):
        baseline = EXPERIMENTS[name].get("baseline")
        if baseline is not None:
            runs.setdefault(baseline, set()).update(seed for seed in seeds if seed in seeds_of(baseline))
    return {name: [seed for seed in seeds_of(name) if seed in runs[name]] for name in EXPERIMENTS if name in runs}


def run_id(experiment_name, seed):
    """A run's name: its folder under results/runs, as collect and the page name it."""
    return f"{experiment_name}/seed{seed}"


def plan_entry(rule, output, run=None):
    """One job of the plan: the rule that makes `output`, and the run (EXPERIMENT/seedSEED) it
    belongs to, if one. The Progress page reads these from results/plan.json (write_plan)."""
    return {"rule": rule, "output": output, "run": run}


def run_jobs(runs):
    """The jobs of each run whose outputs collecting reads: training, then sampling
    (runs: experiment name -> seeds)."""
    jobs = []
    for name, seeds in runs.items():
        for seed in seeds:
            run = run_id(name, seed)
            jobs.append(plan_entry("train_model", f"results/runs/{run}/summary.json", run))
            jobs.append(plan_entry("generate_samples", f"results/runs/{run}/samples.json", run))
    return jobs


def asked_targets():
    """The targets on the command line, as Snakemake planned them (none: the default, `all`).

    The one place this workflow reads Snakemake's own settings (`workflow.dag_settings`, not a
    documented API): which runs collecting waits for depends on the targets asked for, and one
    collecting rule serves them all, so that `snakemake headline ablations` plans one
    collection rather than two rival ones. A file target may be written
    ./results/anatomy.duckdb: its path is normalised (a rule's name stays itself).
    """
    asked = workflow.dag_settings.targets if workflow.dag_settings else []
    return [os.path.relpath(target) for target in asked] or ["all"]


def planned_jobs(targets):
    """Every job whose output collecting waits for, for these targets, in plan order.

    Named group targets (`headline ablations`): their runs and their baselines' runs
    (runs_of_target). The whole grid (`all`, `exams`, or the database or report alone, which
    collect everything): every run of the grid (not the studies) and every exam, and the runs of
    any named target beside it.
    """
    named = [target for target in targets if target in TARGETS]
    jobs = []
    if not named or any(target in WHOLE_GRID_TARGETS + DATABASE_TARGETS + REPORT_TARGETS for target in targets):
        jobs += run_jobs({name: seeds_of(name) for name in GRID}) + exam_jobs(GRID)
    for target in named:
        jobs += run_jobs(runs_of_target(target))
    # a run shared by two targets (vanilla, llama) is planned once
    return list({planned["output"]: planned for planned in jobs}.values())


def collected_outputs(wildcards):
    """What the collecting step waits for: the outputs of the planned jobs. An input function:
    the targets are known once Snakemake plans, not while it reads the workflow."""
    return [planned["output"] for planned in planned_jobs(asked_targets())]


def final_jobs(targets):
    """What a run ends with, after the planned jobs: collecting, then the report (unless only the
    database was asked for)."""
    # the stamp, as Snakemake knows the job (the Progress page finds it running by that name)
    jobs = [plan_entry("collect_results", COLLECTED_STAMP)]
    if not all(target in DATABASE_TARGETS for target in targets):
        jobs.append(plan_entry("write_report", "results/report/report.md"))
    return jobs


def write_plan():
    """results/plan.json, when a run starts: every job its targets need (done or not, in plan
    order), and how many run side by side, for the Progress page's ETA
    (anatomy/results/progress.py). A target the plan cannot list (one run's file, say) makes a
    plan without jobs, which the page says it cannot follow."""
    from anatomy.files.plan import PLAN_FILE, write_plan_file

    from anatomy.errors import AnatomyError

    targets = asked_targets()
    known = (*TARGETS, *WHOLE_GRID_TARGETS, *DATABASE_TARGETS, *REPORT_TARGETS)
    jobs = planned_jobs(targets) + final_jobs(targets) if all(target in known for target in targets) else None
    try:
        write_plan_file(PLAN_FILE, targets, lanes(), jobs)
    except (AnatomyError, OSError) as err:  # the page then says it has no plan; the jobs run all the same
        print(f"No plan for the Progress page: {err}", file=sys.stderr)


def lanes():
    """Jobs that run side by side: --cores over the threads of a training (Snakemake scales a
    job's threads down to --cores). None where the cores are not this machine's (a cluster)."""
    try:
        cores = workflow.cores
    except WorkflowError:  # no --cores: jobs go to a cluster
        return None
    if not isinstance(cores, int) or cores >= 10**6:
        return None
    return max(1, cores // min(config["train_threads"], cores))


onstart:
    write_plan()


# Snakemake's own words when it stops on a Ctrl-C (in its log, and the only sign of it there)
USER_STOPPED = "Terminating processes on user request"


def say_if_stopped(logs):
    """After a Ctrl-C, Snakemake ends in 'WorkflowError: At least one job did not complete
    successfully', each job's KeyboardInterrupt above it: it reads as a failure. It is none, and
    the same command picks up where it stopped (claim_working_directory, the trainers' resume):
    say so in one line, the last one, after Snakemake's own (at exit). `logs`: Snakemake's log
    file, or a list of them (Snakemake 9)."""
    said = ""
    for path in [logs] if isinstance(logs, (str, Path)) else list(logs or []):
        try:
            said += Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
    if USER_STOPPED in said:
        atexit.register(print, STOPPED_LINE, file=sys.stderr)


STOPPED_LINE = (
    "Stopped by Ctrl-C, nothing is broken: run the same command again to resume (finished jobs are kept, "
    "an interrupted training continues from its last checkpoint)."
)


onerror:
    say_if_stopped(log)


def corpus_folder_files(source):
    """Every regular file under the folder `source`, or link to one, but hidden ones (.git,
    .DS_Store: not posts) and those in hidden folders or in folders linked in: the files
    anatomy/data/posts.py looks at when it walks a blog.

    The folders still to look in are kept in a list, not recursed into (rglob recursed once per
    level: about 990 nested folders ended in a RecursionError). A named pipe or a link to a device
    named like a post is no input: Snakemake must not wait on it, and the corpus step skips it and
    says so. A folder or file below `source` that cannot be looked at is the corpus step's to name:
    a file whose path is longer than the system allows (some 2,050 nested folders) too, which
    Snakemake cannot look at either (its plan ended in a traceback).
    """
    files, to_visit = [], [source]
    while to_visit:
        folder = to_visit.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError as err:
            if folder == source:
                raise WorkflowError(
                    f"corpus folder {str(source)!r} (config key `corpus`) cannot be read: {err.strerror}"
                ) from None
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    to_visit.append(Path(entry.path))
                elif entry.is_file():
                    os.stat(entry.path)  # raises for a path too long to look at
                    files.append(Path(entry.path))
            except OSError:
                continue
    return files


def find_corpus_files():
    """Every file of the corpus, so that editing, adding or removing a post reruns extraction.

    Called when the workflow is read, so a missing corpus, or one without posts, stops every
    target before any job, even when results/corpus/ holds an older corpus the plan would
    otherwise reuse. Which files are posts is the corpus step's to say (MARKDOWN_SUFFIXES): an
    MDX-only blog is a blog here too.
    """
    from anatomy.data.posts import MARKDOWN_SUFFIXES, is_utf8_name, shown, suffix_list

    source = Path(config["corpus"])
    if source.is_file():
        return [str(source)]
    if not source.is_dir():
        raise WorkflowError(
            f"corpus {str(source)!r} (config key `corpus`) does not exist: expected a folder "
            "of Markdown posts or one .txt file, relative to the working directory"
        )
    files = corpus_folder_files(source)
    if not any(path.name.lower().endswith(MARKDOWN_SUFFIXES) for path in files):
        raise WorkflowError(
            f"corpus folder {str(source)!r} (config key `corpus`) holds no Markdown posts "
            f"({suffix_list()}) among its {len(files)} files"
        )
    # A name that is not UTF-8 (GBK bytes from a zip made on Windows), even an image's, stops the
    # plan here: Snakemake cannot write it into its lock files, and `anatomy corpus` refuses the
    # folder anyway (naming every such file), so leaving it out would only move the error into
    # a job's log.
    bad_names = [path for path in files if not is_utf8_name(str(path))]
    if bad_names:
        more = f" (and {len(bad_names) - 1} more)" if len(bad_names) > 1 else ""
        raise WorkflowError(
            f"corpus file '{shown(bad_names[0])}'{more} (config key `corpus`): the name is not UTF-8 "
            "(its bytes shown as \\xNN); rename it"
        )
    return sorted(str(path) for path in files)


CORPUS_FILES = find_corpus_files()


def corpus_files(wildcards):
    """The extraction's input: the files found when the workflow was read."""
    return CORPUS_FILES


def train_data(wildcards):
    """The tokenized files a run reads: its named corpus's, or config `corpus`'s."""
    folder = data_dir_of(wildcards.experiment)
    return [f"{folder}/{name}" for name in ("vocab.json", "train.npy", "val.npy", "split.json")]


def train_data_dir(wildcards):
    return data_dir_of(wildcards.experiment)


def named_corpus_arguments(wildcards):
    """`anatomy tokenize` arguments of a named corpus: its files, its size and its name."""
    corpus = CORPORA[wildcards.corpus]
    arguments = [corpus["train"], "--val", corpus["val"], "--name", wildcards.corpus]
    if "train_chars" in corpus:
        arguments += ["--train-chars", str(corpus["train_chars"])]
    return " ".join(shlex.quote(argument) for argument in arguments)


def named_corpus_files(wildcards):
    corpus = CORPORA[wildcards.corpus]
    return [corpus["train"], corpus["val"]]


def run_folder(wildcards, output):
    """The run folder a job works in: the folder of its first output."""
    return str(Path(output[0]).parent)


def command_value(value):
    """A config value as `anatomy train` reads it on the command line (true, 0.0003, rmsnorm)."""
    return value if isinstance(value, str) else json.dumps(value)


def train_arguments(wildcards):
    """The `anatomy train` arguments of one experiment: preset, labels as tags, overrides.

    The experiment's own settings win over the config-wide overrides, so its defining change
    (n_layer 12, warmup 0) survives the quick configuration's shrinking.
    Seed, threads and device are added by the rule: they are not part of the experiment.
    """
    experiment = EXPERIMENTS[wildcards.experiment]
    arguments = ["--preset", experiment["preset"], "--tag", f"experiment={wildcards.experiment}"]
    # The labels travel with the run (config.json, then the database). Being arguments, they are
    # tracked too: even a reworded description reruns the experiment, so its record stays true.
    # The baseline is not one of them: it says what the run is compared with, not what it is, so
    # it reaches the database through results/experiments.json (experiments_file_text) instead.
    for label in ("group", "part", "direction", "description"):
        if label in experiment:
            arguments += ["--tag", f"{label}={experiment[label]}"]
    for section in ("model", "train"):
        overrides = {**config[f"{section}_overrides"], **experiment.get(section, {})}
        arguments += [f"{section}.{key}={command_value(value)}" for key, value in overrides.items()]
    return " ".join(shlex.quote(argument) for argument in arguments)


def experiments_file_text():
    """results/experiments.json, which collect reads: each experiment's baseline, group and runs
    (seed and stage), so that a study's section can say which of its runs are still to train. A
    file of its own rather than a training argument: those are tracked, so naming or changing a
    baseline there would retrain finished runs; this way it only collects again."""
    declared = {
        name: {
            "baseline": experiment.get("baseline"),
            "group": experiment["group"],
            "runs": [{"seed": seed, "stage": stage} for stage, seeds in seeds_by_stage(name).items() for seed in seeds],
        }
        for name, experiment in EXPERIMENTS.items()
    }
    # sorted: a --configfile that touches an entry reorders the merged config, not the file
    return json.dumps({"experiments": declared}, indent=2, sort_keys=True) + "\n"


def train_precision(wildcards):
    """The rule's `train.precision`: a param, so changing it retrains exactly the runs it changes."""
    return precision_of(wildcards.experiment)


def sample_checkpoints(wildcards):
    """config samples.checkpoint, one name or a list, as `anatomy generate --checkpoint` reads it."""
    checkpoints = config["samples"]["checkpoint"]
    return " ".join([checkpoints] if isinstance(checkpoints, str) else checkpoints)


# ---------------------------------------------------------------------------------------------
# The exams (rules/exams.smk)

EXAMS = config["exams"]


def words(values):
    """A list from the config as command-line words: [128, 256] -> "128 256"."""
    return " ".join(command_value(value) for value in values)


def exam_jobs(experiment_names):
    """Every exam the workflow runs for these experiments' runs, and the exams of no one run."""
    runs = [(name, run_id(name, seed)) for name in experiment_names for seed in seeds_of(name)]
    jobs = [plan_entry("exam_length", f"results/runs/{run}/exams/length.json", run) for _, run in runs]
    jobs += [
        plan_entry("exam_kv_cache", f"results/runs/{run}/exams/kv_cache.json", run)
        for name, run in runs
        if name in EXAMS["kv_cache"]["experiments"]
    ]
    jobs += [plan_entry("exam_depth_cell", f"results/exams/depth/{cell}/summary.json") for cell in sorted(DEPTH_CELLS)]
    jobs.append(plan_entry("exam_wall_clock", "results/exams/wall_clock.json"))
    jobs += [
        plan_entry("exam_qk_norm_cell", f"results/exams/qk_norm/{cell}/summary.json") for cell in sorted(QK_NORM_CELLS)
    ]
    jobs += [plan_entry("exam_mla_cell", f"results/exams/mla/{cell}/exams/mla.json") for cell in MLA_CELLS]
    jobs += [plan_entry("exam_moe_cell", f"results/exams/moe/{cell}/summary.json") for cell in EXAMS["moe"]["cells"]]
    jobs.append(plan_entry("exam_moe", "results/exams/moe/moe.json"))
    return jobs


def depth_cells():
    """The depth map's cells: folder name -> (norm_pos, lr). The exam module names the folders."""
    from anatomy.exams.depth import cell_name

    return {
        cell_name(norm_pos, lr): (norm_pos, lr)
        for norm_pos in EXAMS["depth"]["norm_pos"]
        for lr in EXAMS["depth"]["lr"]
    }


DEPTH_CELLS = depth_cells()


def depth_norm_pos(wildcards):
    """The wiring of a depth-map cell (post or pre), from its folder name."""
    return DEPTH_CELLS[wildcards.cell][0]


def depth_lr(wildcards):
    """The learning rate of a depth-map cell, as `anatomy exam depth --lr` reads it."""
    return command_value(DEPTH_CELLS[wildcards.cell][1])


def qk_norm_cells():
    """The QK-norm map's cells: folder name -> (variant, lr), named by the exam module."""
    from anatomy.exams.qk_norm import cell_name

    return {
        cell_name(variant, lr): (variant, lr)
        for variant in EXAMS["qk_norm"]["variant"]
        for lr in EXAMS["qk_norm"]["lr"]
    }


QK_NORM_CELLS = qk_norm_cells()
# The MLA exam's cells, one job each: the head layouts, then MLA at each latent width
MLA_CELLS = [*EXAMS["mla"]["heads"], *(f"mla_latent{width}" for width in EXAMS["mla"]["latents"])]


def qk_norm_variant(wildcards):
    return QK_NORM_CELLS[wildcards.cell][0]


def qk_norm_lr(wildcards):
    return command_value(QK_NORM_CELLS[wildcards.cell][1])


def mla_cell_arguments(wildcards):
    """`--heads X --latents` or `--heads --latents N`: the one cell of this job."""
    cell = wildcards.cell
    if cell.startswith("mla_latent"):
        return f"--heads --latents {cell[len('mla_latent'):]}"
    return f"--heads {cell} --latents"


def exam_run_folder(wildcards, input):
    """The run folder an exam reads: the folder of the run's summary.json."""
    return str(Path(input.summary).parent)


# The sizes the wall-clock exam takes (SIZE_KEYS in anatomy/exams/wall_clock.py, which imports
# torch, too slow to import while the workflow is read): it times the five parts, not MLA, so the
# quick config's rope_dim is none of its business.
WALL_CLOCK_SIZES = ("d_model", "n_layer", "ctx_len", "vocab_size")


def model_size_arguments(keys=None):
    """The config-wide model overrides (the quick config shrinks the width), as key=value words;
    only those named in `keys`, if given."""
    overrides = config["model_overrides"].items()
    return " ".join(f"{key}={command_value(value)}" for key, value in overrides if keys is None or key in keys)


# Seconds of work each: run them where Snakemake runs, not as cluster jobs.
localrules:
    extract_corpus,
    tokenize_corpus,
    tokenize_named_corpus,
    write_experiments_file,
    generate_samples,
    collect_results,
    write_report,


# --- the corpus's source (used by rules/corpus.smk) ---
import sys

from anatomy.data.corpus_source import SOURCE_CHANGED_NOTE, as_argument, note_source_change
from anatomy.errors import AnatomyError

SOURCE_CHANGED = f"results/corpus/{SOURCE_CHANGED_NOTE}"


def corpus_source_note():
    """results/corpus/source-changed.txt, as an input of the extraction whenever it is there.

    When results/corpus was made from another source than config `corpus` (its stats.json records
    what it was made from), it is written now, newer than the corpus, so that the extraction runs;
    file times cannot tell, since a folder built by hand or by the Listen page is newer than the
    posts of any other source. Otherwise it is dated the epoch. Once an extraction took it, it
    stays, so that the extraction's set of inputs is the same after it ran as before
    (anatomy/data/corpus_source.py, note_source_change). Written when the workflow is read, dry
    runs too (Snakemake reruns an intermediate job for an input newer than its outputs, never for
    one that is missing), and not later: Snakemake would not see a file made while it plans. Only
    the main process writes it."""
    if workflow.is_main_process:
        try:
            why = note_source_change("results/corpus", config["corpus"])
        except (OSError, AnatomyError) as err:
            raise WorkflowError(f"{SOURCE_CHANGED} cannot be written ({err})") from None
        if why is not None:
            print(f"{why} (config `corpus`): extracting it again", file=sys.stderr)
    return [SOURCE_CHANGED] if os.path.lexists(SOURCE_CHANGED) else []


CORPUS_SOURCE_NOTE = corpus_source_note()


def extract_corpus_input(wildcards):
    """The source's files, and the note whether results/corpus was made from another source."""
    return corpus_files(wildcards) + CORPUS_SOURCE_NOTE
