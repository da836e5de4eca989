"""The Snakemake workflow (workflow/): the jobs it plans, how it checks its config, lint, what a
failed job leaves behind, the SLURM profile, and the quick grid end to end into DuckDB.

Every test runs Snakemake as a user would, in a fresh working directory (`--directory`), so
nothing here reads or writes the repository's own results/ or .snakemake/.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from deep_folders import LEVEL, make_deep_chain, remove_deep_chain
from hang import HANG_S
from anatomy.results.groups import STUDY_GROUPS, TARGETS, target_of

REPO = Path(__file__).resolve().parents[1]
WORKFLOW = REPO / "workflow"

# The default grid: experiment -> group. The dashboard relies on these names.
DEFAULT_GRID = {
    "vanilla": "headline",
    "llama": "headline",
    **{f"vanilla_plus_{part}": "ablation" for part in ("rmsnorm", "prenorm", "rope", "gqa", "swiglu")},
    **{f"llama_minus_{part}": "ablation" for part in ("rmsnorm", "prenorm", "rope", "gqa", "swiglu")},
    "deep_post_nowarmup": "break",
    "deep_pre_nowarmup": "break",
    "rope_k_unrotated": "break",
    "rope_k_adjacent": "break",
    "mqa": "break",
    "llama_qk_norm": "break",
}
SEEDS = (42, 7)
TARGET_GROUPS = {"headline": "headline", "ablations": "ablation", "break_tests": "break"}

# The worked example of docs/workflow.md ("Adding an experiment"): keep the two in step.
NEW_EXPERIMENT = """
  llama_cosine:
    preset: llama
    group: extra
    description: Mini-LLaMA whose learning rate decays along a cosine after warmup.
    train: {schedule: cosine, min_lr: 3.0e-5}
"""


def snakemake_command(workdir: Path, *args: str, snakefile: Path = WORKFLOW / "Snakefile") -> list[str]:
    """Snakemake on `snakefile` in `workdir`, with this test's Python, which the rules call too."""
    return [sys.executable, "-m", "snakemake", "--snakefile", str(snakefile), "--directory", str(workdir), *args]


def snakemake_env(path_first: Path | None = None, pythonpath_first: Path | None = None) -> dict[str, str]:
    """The environment to run it in: `path_first` goes first on PATH, `pythonpath_first` first on
    PYTHONPATH (a stand-in package)."""
    env = dict(os.environ)
    env.pop("ANATOMY_LIFELINE", None)  # the workflow under test sets its own
    if path_first is not None:
        env["PATH"] = os.pathsep.join((str(path_first), env.get("PATH", "")))
    # `python -m anatomy` must work from the temporary working directory, installed or not.
    pythonpath = [str(REPO), env.get("PYTHONPATH")]
    if pythonpath_first is not None:
        pythonpath.insert(0, str(pythonpath_first))
    env["PYTHONPATH"] = os.pathsep.join(p for p in pythonpath if p)
    return env


def snakemake(
    workdir: Path,
    *args: str,
    snakefile: Path = WORKFLOW / "Snakefile",
    path_first: Path | None = None,
    pythonpath_first: Path | None = None,
    timeout: float = HANG_S,
) -> subprocess.CompletedProcess:
    """Run Snakemake on `snakefile` in `workdir` to the end."""
    return subprocess.run(
        snakemake_command(workdir, *args, snakefile=snakefile),
        capture_output=True,
        text=True,
        env=snakemake_env(path_first, pythonpath_first),
        timeout=timeout,
    )


def job_counts(output: str) -> dict[str, int]:
    """The 'Job stats' table of a Snakemake run or dry-run, without the total."""
    assert "Job stats:" in output, output[-3000:]
    counts = {}
    for line in output.split("Job stats:", 1)[1].splitlines()[3:]:
        fields = line.split()
        if len(fields) != 2 or not fields[1].isdigit():
            break
        counts[fields[0]] = int(fields[1])
    assert counts.pop("total") == sum(counts.values())
    return counts


def train_commands(output: str) -> dict[tuple[str, int], str]:
    """(experiment, seed) -> the `anatomy train` command a `snakemake -n -p` would run."""
    commands = {}
    for line in output.splitlines():
        match = re.search(r"python -m anatomy train .*--out results/runs/(\w+)/seed(\d+) ", line)
        if match:
            commands[(match.group(1), int(match.group(2)))] = line
    return commands


def write_posts(folder: Path, count: int = 3) -> Path:
    """A tiny blog: enough for Snakemake to plan against (the dry-run tests never train)."""
    folder.mkdir(parents=True)
    for i in range(count):
        (folder / f"post{i}.md").write_text(
            f"---\ntitle: post {i}\n---\n## 第{i}篇\n\n学而时习之，不亦说乎。有朋自远方来，不亦乐乎。\n",
            encoding="utf-8",
        )
    return folder


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A working directory whose default corpus (data/posts) is a tiny blog."""
    write_posts(tmp_path / "data" / "posts")
    return tmp_path


def expected_runs(experiments) -> set[tuple[str, int]]:
    return {(name, seed) for name in experiments for seed in SEEDS}


# ---------------------------------------------------------------------------------------------
# What the grid plans
# ---------------------------------------------------------------------------------------------


def test_default_grid_plans_every_run_once(workdir):
    result = snakemake(workdir, "-n", "-p")
    assert result.returncode == 0, result.stderr + result.stdout
    output = result.stdout + result.stderr
    runs = len(DEFAULT_GRID) * len(SEEDS)
    assert job_counts(output) == {
        "extract_corpus": 1,
        "tokenize_corpus": 1,
        "train_model": runs,
        "generate_samples": runs,
        "write_experiments_file": 1,
        "collect_results": 1,
        "write_report": 1,
        "all": 1,
        **EXAM_JOBS,
    }
    assert set(train_commands(output)) == expected_runs(DEFAULT_GRID)
    # every training job is benchmarked where the collecting step looks for it
    benchmarks = set(re.findall(r"benchmark: results/benchmarks/train_model/(\w+)/seed(\d+)\.tsv", output))
    assert {(name, int(seed)) for name, seed in benchmarks} == expected_runs(DEFAULT_GRID)


# every run's length exam; the cache of MHA, GQA and MQA for each seed; 2 wirings x 4 lr; one wall
# clock; QK-norm's 2 variants x 4 lr; MLA's 3 head layouts and 3 latent widths; MoE's 4 cells and
# the job that times them
EXAM_JOBS = {
    "exam_length": len(DEFAULT_GRID) * len(SEEDS),
    "exam_kv_cache": 3 * len(SEEDS),
    "exam_depth_cell": 8,
    "exam_wall_clock": 1,
    "exam_qk_norm_cell": 8,
    "exam_mla_cell": 6,
    "exam_moe_cell": 4,
    "exam_moe": 1,
}


@pytest.mark.slow  # a dry run of one more target: CI runs it, the inner loop leaves it out
def test_the_exams_target_plans_every_exam_with_the_configs_settings(workdir):
    output = snakemake(workdir, "-n", "-p", "exams").stdout
    counts = job_counts(output)
    assert {name: counts[name] for name in EXAM_JOBS} == EXAM_JOBS
    depth = re.findall(r"python -m anatomy exam depth .*--norm-pos (\w+) --lr (\S+) --steps 300 --seed 42", output)
    assert sorted(depth) == sorted(
        (wiring, lr) for wiring in ("post", "pre") for lr in ("0.0003", "0.001", "0.003", "0.01")
    )
    assert (
        "exam length results/runs/vanilla/seed7 --checkpoint best --data results/corpus --windows 128 256 512 1024"
        in output
    )
    kv = set(re.findall(r"exam kv_cache results/runs/(\w+)/seed(\d+) --contexts 128 512 2048", output))
    assert kv == {(name, seed) for name in ("llama_minus_gqa", "llama", "mqa") for seed in ("42", "7")}
    assert "--exams results/exams" in output  # collect reads the exams of no one run
    qk = re.findall(r"exam qk_norm .*--steps 300 --seed 42 .*--variant (\w+) --lr (\S+) ", output)
    assert sorted(qk) == sorted((v, lr) for v in ("plain", "qk_norm") for lr in ("0.001", "0.003", "0.01", "0.03"))
    mla = re.findall(r"exam mla .*rope_dim=16 .*--heads ?(\w*) --latents ?(\d*) ", output)
    assert sorted(mla) == sorted([("mha", ""), ("gqa", ""), ("mqa", ""), ("", "16"), ("", "32"), ("", "64")])
    assert "--experts 4 --rounds 5 --batch-size 32 --cells dense moe_top1 moe_top2 moe_all" in output


# what each named target's experiments are compared with (workflow/experiments.yaml's baselines)
TARGET_BASELINES = {"headline": [], "ablations": ["vanilla", "llama"], "break_tests": ["llama"]}


# one target in the inner loop; CI plans them all
@pytest.mark.parametrize(
    "target",
    [
        target if target == "ablations" else pytest.param(target, marks=pytest.mark.slow)
        for target in sorted(TARGET_GROUPS)
    ],
)
def test_named_target_plans_its_runs_and_their_baselines_and_collects_them(workdir, target):
    result = snakemake(workdir, "-n", "-p", target)
    assert result.returncode == 0, result.stderr + result.stdout
    output = result.stdout + result.stderr
    names = [name for name, group in DEFAULT_GRID.items() if group == TARGET_GROUPS[target]]
    names += TARGET_BASELINES[target]
    runs = len(names) * len(SEEDS)
    assert job_counts(output) == {
        "extract_corpus": 1,
        "tokenize_corpus": 1,
        "train_model": runs,
        "generate_samples": runs,
        "write_experiments_file": 1,
        "collect_results": 1,
        "write_report": 1,
        target: 1,
    }
    assert set(train_commands(output)) == expected_runs(names)
    assert "--db results/anatomy.duckdb" in output  # the one database, whichever target
    assert "--experiments results/experiments.json" in output  # and the baseline of each experiment


@pytest.mark.slow  # a dry run of one more target: CI runs it, the inner loop leaves it out
def test_several_named_targets_plan_their_runs_and_one_collection(workdir):
    result = snakemake(workdir, "-n", "-p", "headline", "break_tests")
    assert result.returncode == 0, result.stderr + result.stdout
    output = result.stdout + result.stderr
    names = [name for name, group in DEFAULT_GRID.items() if group in ("headline", "break")]
    counts = job_counts(output)
    assert counts["collect_results"] == 1 and counts["headline"] == counts["break_tests"] == 1
    assert counts["train_model"] == len(names) * len(SEEDS)
    assert set(train_commands(output)) == expected_runs(names)


@pytest.mark.slow  # seconds: CI runs it, the inner loop leaves it out
def test_a_group_that_is_no_study_and_not_the_grids_is_one_line(workdir):
    """A study is declared in workflow/studies.yaml before its runs name it as their group."""
    extra = workdir / "extra.yaml"
    extra.write_text(
        "experiments:\n  deep_llama:\n    preset: llama\n    group: depth\n    description: d\n", encoding="utf-8"
    )
    result = snakemake(workdir, "-n", "--configfile", str(extra))
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert (
        "invalid config at experiments.deep_llama.group: 'depth' is neither a group of the grid (headline, "
        "ablation, break, extra) nor a study of workflow/studies.yaml (scale, lr, size, precision, parts)" in output
    )
    assert "Traceback" not in output


def test_the_targets_are_the_groups_table_and_each_ends_with_the_report(workdir):
    """One table (anatomy/results/groups.py) names the targets and what each trains; the
    workflow makes a rule of each, and every target asks for the report."""
    result = snakemake(workdir, "--list-target-rules")
    assert result.returncode == 0, result.stderr
    listed = set(re.findall(r"^(\w+)", result.stdout, flags=re.MULTILINE)) - {"Using"}
    # the rules without wildcards: the targets, and the steps that make one file each
    steps = {"extract_corpus", "tokenize_corpus", "write_experiments_file", "exam_wall_clock", "exam_moe"}
    assert listed - steps - {"collect_results", "write_report"} == {"all", "exams", *TARGETS}
    assert target_of("ablation") == "ablations" and target_of("lr") == "lr" and TARGETS["lr_stage2"] == ("lr", 2)
    with pytest.raises(KeyError, match="no snakemake target trains the group 'extra'"):
        target_of("extra")
    plan = snakemake(workdir, "-n", "headline").stdout
    # the report, and the stamp that collecting finished (rules/collect.smk: not the database)
    assert re.search(
        r"^rule headline:\n    input: results/report, results/collected.done$", plan, flags=re.MULTILINE
    ), plan[-2000:]
    assert re.search(
        r"^rule write_report:\n    input: results/collected.done\n    output: results/report$", plan, flags=re.MULTILINE
    )


@pytest.mark.slow  # a dry run of one more target: CI runs it, the inner loop leaves it out
def test_a_study_beside_all_plans_the_grid_and_the_study(workdir):
    """`snakemake lr_stage5 all` trains the study's runs too, not only the grid's."""
    commands = train_commands(snakemake(workdir, "-n", "-p", "lr_stage5", "all").stdout)
    stage5 = train_commands(snakemake(workdir, "-n", "-p", "lr_stage5").stdout)
    assert len(stage5) == 10 and set(commands) == expected_runs(DEFAULT_GRID) | set(stage5)


def test_the_rules_use_named_functions_not_lambdas():
    """A rule's logic is a function with a name and a docstring in rules/common.smk, which a
    reader can look up; a lambda inside a rule says neither what it is for nor why."""
    for path in [WORKFLOW / "Snakefile", *sorted((WORKFLOW / "rules").glob("*.smk"))]:
        assert not re.search(r"\blambda\b", path.read_text(encoding="utf-8")), path


# ---------------------------------------------------------------------------------------------
# Studies beside the grid: the precision check and the scale study, on named corpora
# ---------------------------------------------------------------------------------------------

SCALE_SIZES = {"poems_128k": 128000, "poems_1m": 1024000, "poems_8m": 8192000}


def with_scale_corpus(workdir: Path) -> Path:
    """The shipped scale corpus's files, where workflow/corpora.yaml names them."""
    (workdir / "data").mkdir(exist_ok=True)
    (workdir / "data" / "poems").symlink_to(REPO / "data" / "poems")
    return workdir


def data_of(command: str) -> str:
    return re.search(r"--data (\S+)", command).group(1)


def precision_of(command: str) -> str:
    """The precision a train command asks for (the last `train.precision=` wins)."""
    return re.findall(r"train\.precision=(\w+)", command)[-1]


@pytest.mark.slow  # a dry run of one more target: CI runs it, the inner loop leaves it out
def test_precision_check_trains_the_headline_pair_in_bf16_beside_the_grid(workdir):
    result = snakemake(workdir, "-n", "-p", "precision_check")
    assert result.returncode == 0, result.stderr + result.stdout
    commands = train_commands(result.stdout)
    # the headline pair in bf16, both seeds, and one 12-layer run (seed 42): the deep size class's cost
    assert set(commands) == expected_runs(["vanilla_bf16", "llama_bf16"]) | {("deep_pre_nowarmup_bf16", 42)}
    assert {precision_of(command) for command in commands.values()} == {"bf16"}
    # the grid's own runs are fp32 (config `precision`), and `all` never runs the studies
    grid = train_commands(snakemake(workdir, "-n", "-p").stdout)
    assert {precision_of(command) for command in grid.values()} == {"fp32"}


def test_scale_stage1_trains_both_models_on_each_named_corpus(workdir):
    result = snakemake(with_scale_corpus(workdir), "-n", "-p", "scale_stage1")
    assert result.returncode == 0, result.stderr + result.stdout
    counts = job_counts(result.stdout)
    assert (counts["tokenize_named_corpus"], counts["train_model"]) == (3, 12)
    assert "extract_corpus" not in counts  # the default corpus is not needed
    commands = train_commands(result.stdout)
    for size in ("128k", "1m", "8m"):
        for model in ("vanilla", "llama"):
            for seed in SEEDS:
                assert data_of(commands[(f"scale_{model}_{size}", seed)]) == f"results/corpora/poems_{size}"
    for name, chars in SCALE_SIZES.items():
        assert f"--name {name} --train-chars {chars} --out results/corpora/{name}" in result.stdout


@pytest.mark.slow  # a dry run of one more target: CI runs it, the inner loop leaves it out
def test_scale_stage2_brings_its_baselines_and_stage3_runs_one_seed(workdir):
    with_scale_corpus(workdir)
    stage2 = train_commands(snakemake(workdir, "-n", "-p", "scale_stage2").stdout)
    ablations = {name for name, _ in stage2 if "_plus_" in name or "_minus_" in name}
    assert len(ablations) == 10 and len(stage2) == (10 + 2) * len(SEEDS)
    assert {(name, seed) for name in ("scale_vanilla_8m", "scale_llama_8m") for seed in SEEDS} <= set(stage2)
    stage3 = train_commands(snakemake(workdir, "-n", "-p", "scale_stage3").stdout)
    assert set(stage3) == {("scale_8m_vanilla_lr1e3", 42), ("scale_8m_llama_lr1e3", 42)}
    assert all("train.lr=0.001" in command for command in stage3.values())


LR_STAGE1 = {f"lr_8m_{model}_{lr}" for model in ("vanilla", "llama") for lr in ("2e3", "4e3", "8e3")}


@pytest.mark.slow  # a dry run of one more target: CI runs it, the inner loop leaves it out
def test_lr_stages_train_seed_42_first_and_seed_7_for_the_band(workdir):
    with_scale_corpus(workdir)
    stage1 = train_commands(snakemake(workdir, "-n", "-p", "lr_stage1").stdout)
    assert set(stage1) == {(name, 42) for name in LR_STAGE1}
    assert "train.lr=0.008" in stage1[("lr_8m_llama_8e3", 42)]
    assert {precision_of(command) for command in stage1.values()} == {"bf16"}
    assert {data_of(command) for command in stage1.values()} == {"results/corpora/poems_8m"}
    # stage 2: seed 7 at the same lrs, and at 1e-3, whose seed 42 is the scale study's run
    stage2 = train_commands(snakemake(workdir, "-n", "-p", "lr_stage2").stdout)
    assert set(stage2) == {(name, 7) for name in LR_STAGE1 | {"lr_8m_vanilla_1e3", "lr_8m_llama_1e3"}}
    # stages 3 and 4 at each model's best lr; stage 5 on the default corpus, fp32, beside the grid
    stage3 = train_commands(snakemake(workdir, "-n", "-p", "lr_stage3").stdout)
    assert {name for name, _ in stage3} == {"lr_8m_vanilla_plus_rope_2e3", "lr_8m_llama_minus_rope_1e3"} | {
        "lr_8m_vanilla_2e3",
        "lr_8m_llama_1e3",
    }  # and the baselines' runs of the same seeds
    stage4 = train_commands(snakemake(workdir, "-n", "-p", "lr_stage4").stdout)
    assert all("train.schedule=cosine" in command for command in stage4.values()) and len(stage4) == 4
    stage5 = train_commands(snakemake(workdir, "-n", "-p", "lr_stage5").stdout)
    assert {data_of(command) for command in stage5.values()} == {"results/corpus"} and len(stage5) == 10
    assert {precision_of(command) for command in stage5.values()} == {"fp32"}
    # stage 6: a sqrt(2) grid around each best lr; stage 7: LLaMA's optimizer recipe; two seeds each
    stage6 = train_commands(snakemake(workdir, "-n", "-p", "lr_stage6").stdout)
    assert {name for name, _ in stage6} == {"lr_8m_vanilla_14e4", "lr_8m_llama_14e4", "lr_8m_vanilla_28e4"}
    assert len(stage6) == 6 and "train.lr=0.0014" in stage6[("lr_8m_llama_14e4", 7)]
    stage7 = train_commands(snakemake(workdir, "-n", "-p", "lr_stage7").stdout)
    recipe = ("train.beta2=0.95", "train.weight_decay=0.1", "train.decay_matrices_only=true", "train.grad_clip=1.0")
    assert len(stage7) == 15 and all(all(s in command for s in recipe) for command in stage7.values())
    stages = (stage1, stage2, stage3, stage4, stage5, stage6, stage7)
    everything = train_commands(snakemake(workdir, "-n", "-p", "lr").stdout)
    assert set(everything) == set().union(*stages)


@pytest.mark.parametrize(
    "stages, expected",
    [  # one case in the inner loop, all in CI
        ("{1: [42]}\n    seeds: [7]", "found seeds beside it"),
        pytest.param("{0: [42]}", "found stage 0", marks=pytest.mark.slow),
        pytest.param("{1: []}", "should be non-empty", marks=pytest.mark.slow),
    ],
)
def test_stages_of_an_experiment_are_checked(workdir, stages, expected):
    extra = workdir / "extra.yaml"
    entry = f"  my_test:\n    preset: llama\n    group: lr\n    description: d\n    stages: {stages}\n"
    extra.write_text("experiments:\n" + entry, encoding="utf-8")
    result = snakemake(workdir, "-n", "--configfile", str(extra))
    assert result.returncode != 0
    message = next(
        line for line in (result.stdout + result.stderr).splitlines() if line.startswith("invalid config at ")
    )
    assert "experiments.my_test" in message and expected in message, message


@pytest.mark.parametrize("other", [pytest.param("exams", marks=pytest.mark.slow), "./results/collected.done"])
def test_a_named_target_beside_one_that_needs_everything_plans_everything(workdir, other):
    result = snakemake(workdir, "-n", "-p", "headline", other)
    assert result.returncode == 0, result.stderr + result.stdout
    output = result.stdout + result.stderr
    assert job_counts(output)["collect_results"] == 1
    assert set(train_commands(output)) == expected_runs(DEFAULT_GRID)


def test_train_commands_carry_labels_seed_and_overrides(workdir):
    commands = train_commands(snakemake(workdir, "-n", "-p").stdout)
    command = commands[("llama_minus_gqa", 7)]
    for piece in (
        "--preset llama",
        "--tag experiment=llama_minus_gqa",
        "--tag group=ablation",
        "--tag part=gqa",
        "--tag direction=remove",
        "model.n_kv_head=4",
        "train.seed=7",
        "train.device=auto",
        "--out results/runs/llama_minus_gqa/seed7 ",
    ):
        assert piece in command, (piece, command)
    assert "--tag 'description=Mini-LLaMA with plain multi-head attention (4 KV heads).'" in command
    assert "model.qk_norm=true" in commands[("llama_qk_norm", 42)]  # booleans as the CLI reads them
    # the baseline is not a training argument (those are tracked: naming one would retrain finished
    # runs); collect reads it from results/experiments.json
    assert not any("baseline" in command for command in commands.values())


def test_quick_config_shrinks_every_run_but_keeps_what_defines_an_experiment(workdir):
    result = snakemake(workdir, "-n", "-p", "--configfile", str(WORKFLOW / "quick.yaml"))
    assert result.returncode == 0, result.stderr + result.stdout
    commands = train_commands(result.stdout)
    assert set(commands) == expected_runs(DEFAULT_GRID)  # the whole grid, only smaller
    for command in commands.values():
        assert "model.d_model=32" in command and "train.steps=30" in command
    assert "model.n_layer=1 " in commands[("vanilla", 42)]
    deep = commands[("deep_post_nowarmup", 42)]
    # the experiment's own settings win over the quick ones
    assert "model.n_layer=12 " in deep and "model.n_layer=1 " not in deep
    assert "train.warmup_steps=0 " in deep and "train.warmup_steps=5 " not in deep
    assert "--chars 40 " in result.stdout


def test_runtime_settings_on_the_command_line(workdir):
    """`--config seeds=[3]` (read as text by Snakemake), device, threads and GPUs reach the jobs."""
    result = snakemake(
        workdir,
        "headline",
        "-n",
        "-p",
        "--cores",
        "8",
        "--resources",
        "gpu=1",
        "--config",
        "seeds=[3]",
        "device=cpu",
        "train_threads=3",
        "gpus_per_run=1",
    )
    assert result.returncode == 0, result.stderr + result.stdout
    commands = train_commands(result.stdout)
    assert set(commands) == {("vanilla", 3), ("llama", 3)}
    assert all("train.device=cpu" in command and "train.threads=3 " in command for command in commands.values())
    trained = re.findall(r"^rule train_model:\n(?:    .*\n)*?    resources: (.*)$", result.stdout, flags=re.MULTILINE)
    assert len(trained) == 2 and all("gpu=1" in resources for resources in trained)


@pytest.mark.slow  # a dry run of one more target: CI runs it, the inner loop leaves it out
def test_adding_an_experiment_is_adding_an_entry(tmp_path):
    """docs/workflow.md's worked example: one entry in experiments.yaml, no rule touched."""
    project = tmp_path / "project"
    shutil.copytree(WORKFLOW, project / "workflow")
    write_posts(project / "data" / "posts")
    experiments = project / "workflow" / "experiments.yaml"
    experiments.write_text(experiments.read_text(encoding="utf-8") + NEW_EXPERIMENT, encoding="utf-8")

    result = snakemake(project, "-n", "-p", snakefile=project / "workflow" / "Snakefile")
    assert result.returncode == 0, result.stderr + result.stdout
    runs = (len(DEFAULT_GRID) + 1) * len(SEEDS)
    assert job_counts(result.stdout)["train_model"] == runs
    commands = train_commands(result.stdout)
    assert set(commands) == expected_runs([*DEFAULT_GRID, "llama_cosine"])
    assert "train.schedule=cosine train.min_lr=3e-05" in commands[("llama_cosine", 42)]
    for rules_file in (project / "workflow" / "rules").iterdir():
        assert rules_file.read_bytes() == (WORKFLOW / "rules" / rules_file.name).read_bytes()


# ---------------------------------------------------------------------------------------------
# Bad config: one clear line naming the entry and the field
# ---------------------------------------------------------------------------------------------

BAD_ENTRIES = {
    "typo in a model key": (
        "  my_test:\n    preset: llama\n    group: break\n    description: d\n    model: {norm_typ: rmsnorm}\n",
        ["experiments.my_test.model", "'norm_typ' was unexpected", "known keys: d_model"],
    ),
    "value not allowed": (
        "  my_test:\n    preset: llama\n    group: break\n    description: d\n    model: {norm_type: batchnorm}\n",
        ["experiments.my_test.model.norm_type", "'batchnorm' is not one of ['layernorm', 'rmsnorm']"],
    ),
    "unknown named corpus": (
        "  my_test:\n    preset: llama\n    group: extra\n    corpus: poems_2m\n    description: d\n",
        ["experiments.my_test.corpus", "'poems_2m' is not a named corpus", "poems_128k, poems_1m, poems_8m"],
    ),
    "seeds that are not a list of numbers": (
        "  my_test:\n    preset: llama\n    group: extra\n    seeds: [-1]\n    description: d\n",
        ["experiments.my_test.seeds.0", "-1 is less than the minimum of 0"],
    ),
    "unknown preset": (
        "  my_test:\n    preset: gpt2\n    group: break\n    description: d\n",
        ["experiments.my_test.preset", "'gpt2' is not one of ['vanilla', 'llama']"],
    ),
    "ablation without its direction": (
        "  my_test:\n    preset: llama\n    group: ablation\n    part: rope\n    baseline: llama\n    description: d\n",
        ["experiments.my_test", "'direction' is a required property"],
    ),
    "a runtime knob in an experiment": (
        "  my_test:\n    preset: llama\n    group: break\n    description: d\n    train: {seed: 1}\n",
        ["experiments.my_test.train", "'seed' was unexpected"],
    ),
    "YAML float without a dot": (
        "  my_test:\n    preset: llama\n    group: break\n    description: d\n    train: {lr: 3e-4}\n",
        ["experiments.my_test.train.lr", "'3e-4' is not of type 'number'"],
    ),
    # Valid field by field, but not together or not as a number: the package's own configs say so.
    "two fields that clash": (
        "  my_test:\n    preset: vanilla\n    group: break\n    description: d\n    model: {n_head: 3}\n",
        ["experiments.my_test", "d_model 128 is not divisible by n_head 3"],
    ),
    "KV heads that do not divide the heads": (
        "  my_test:\n    preset: llama\n    group: break\n    description: d\n    model: {n_kv_head: 3}\n",
        ["experiments.my_test", "n_head 4 is not divisible by n_kv_head 3"],
    ),
    "a learning rate that is not a number": (
        "  my_test:\n    preset: llama\n    group: break\n    description: d\n    train: {lr: .nan}\n",
        ["experiments.my_test", "lr = nan is not valid: expected a finite number"],
    ),
    "an ablation without its baseline": (
        "  my_test:\n    preset: llama\n    group: ablation\n    part: rope\n    direction: remove\n"
        "    description: d\n",
        ["experiments.my_test", "'baseline' is a required property"],
    ),
    "a baseline that is not an experiment of the grid": (
        "  my_test:\n    preset: llama\n    group: break\n    baseline: lama\n    description: d\n",
        ["experiments.my_test.baseline", "'lama' is not another experiment of the grid"],
    ),
    "an experiment that is its own baseline": (
        "  my_test:\n    preset: llama\n    group: break\n    baseline: my_test\n    description: d\n",
        ["experiments.my_test.baseline", "'my_test' is not another experiment of the grid"],
    ),
    # one training, one run: logging the attention logits changes no number, so this is the
    # grid's llama again, which a study reading runs by their settings would count twice
    "a training another experiment repeats": (
        "  my_test:\n    preset: llama\n    group: extra\n    description: d\n    train: {log_max_logits: true}\n",
        ["seed 42 repeats the training of experiments.", "my_test", "experiments.llama", "`baseline`"],
    ),
    "a name that cannot be a folder": (
        "  My-Test:\n    preset: llama\n    group: break\n    description: d\n",
        ["experiments", "'My-Test' does not match"],
    ),
}


# in the inner loop, one case of the schema's and two of the package's checks; all of them in CI
FAST_BAD_ENTRIES = ("typo in a model key", "two fields that clash", "a training another experiment repeats")


@pytest.mark.parametrize(
    "case",
    [case if case in FAST_BAD_ENTRIES else pytest.param(case, marks=pytest.mark.slow) for case in sorted(BAD_ENTRIES)],
)
def test_invalid_experiment_is_a_clear_error(workdir, case):
    entry, expected = BAD_ENTRIES[case]
    extra = workdir / "extra.yaml"
    extra.write_text("experiments:\n" + entry, encoding="utf-8")
    result = snakemake(workdir, "-n", "--configfile", str(extra))
    assert result.returncode != 0
    output = result.stdout + result.stderr
    message = next(line for line in output.splitlines() if line.startswith("invalid config at "))
    for fragment in expected:
        assert fragment in message, (fragment, message)


@pytest.mark.slow  # two plans of the whole workflow: CI's, not the inner loop's
def test_an_override_that_makes_two_declarations_alike_is_not_a_repeat(workdir):
    """One training, one run is judged on the declarations as written: the whole grid in bf16
    (docs/precision.md) makes vanilla the precision study's vanilla_bf16, as the user asked."""
    result = snakemake(workdir, "-n", "--config", "precision=bf16")
    assert result.returncode == 0, result.stdout + result.stderr
    # nor is a declaration that holds only with the overrides refused for that (3 heads of width 96)
    extra = workdir / "extra.yaml"
    extra.write_text(
        "model_overrides: {d_model: 96}\nexperiments:\n  my_test:\n    preset: llama\n    group: extra\n"
        "    description: d\n    model: {n_head: 3, n_kv_head: 1}\n",
        encoding="utf-8",
    )
    result = snakemake(workdir, "-n", "--configfile", str(extra))
    assert result.returncode == 0, result.stdout + result.stderr


def test_documented_commands_name_their_target_before_config():
    """`--config` takes every word after it as a setting, so `snakemake --config k=v headline`
    stops with "Config entries have to be defined as name=value pairs": the target goes first."""
    texts = [REPO / "README.md", REPO / "README.zh-CN.md", *sorted((REPO / "docs").glob("*.md"))]
    texts += sorted((REPO / "dashboard").rglob("*.py")) + sorted((REPO / "anatomy").rglob("*.py"))
    wrong = [
        f"{path.relative_to(REPO)}: {match.group(0)}"
        for path in texts
        for match in re.finditer(
            r"snakemake [^`\n]*--config(?: [\w.]+=[^\s`]+)+ (?!-)[a-z_0-9]+(?![\w=])", path.read_text("utf-8")
        )
    ]
    assert not wrong, wrong


def test_unknown_settings_key_is_a_clear_error(workdir):
    result = snakemake(workdir, "-n", "--config", "corpsu=elsewhere")
    assert result.returncode != 0
    assert (
        "invalid config at the top level: Additional properties are not allowed ('corpsu' was unexpected)"
        in result.stdout + result.stderr
    )


NO_POSTS = {
    "a typo": ("no/such/blog", "corpus 'no/such/blog' (config key `corpus`) does not exist"),
    "a folder of images": ("photos", "corpus folder 'photos' (config key `corpus`) holds no Markdown posts"),
}


@pytest.mark.parametrize(  # one case in the inner loop, both in CI
    "case", [case if case == "a typo" else pytest.param(case, marks=pytest.mark.slow) for case in sorted(NO_POSTS)]
)
def test_a_corpus_without_posts_stops_the_plan_even_with_an_old_corpus_extracted(workdir, case):
    """The old corpus and its tokens in results/ must not be trained on in its place."""
    corpus, message = NO_POSTS[case]
    pretend_tokenized(workdir)
    (workdir / "photos" / "2024").mkdir(parents=True)
    (workdir / "photos" / "2024" / "cat.jpg").write_bytes(b"\xff\xd8\xff\xe0")
    result = snakemake(workdir, "-n", "headline", "--config", f"corpus={corpus}")
    assert result.returncode != 0
    assert message in result.stdout + result.stderr
    assert "train_model" not in result.stdout  # nothing planned


@pytest.mark.slow  # Snakemake runs jobs here, not a dry run: CI runs it, the inner loop leaves it out
def test_a_failed_extraction_leaves_no_tokens_of_the_old_corpus(workdir):
    """A post broken after an earlier run: extraction fails, says why on the console, and the old
    corpus's token arrays, which training would otherwise read, are gone with it."""
    pretend_tokenized(workdir)
    (workdir / "data" / "posts" / "broken.md").write_text("---\ntitle: [never closed\n---\n正文\n", encoding="utf-8")
    result = snakemake(workdir, "--cores", "1", "results/corpus/split.json")
    assert result.returncode != 0
    assert "broken.md: front matter is not valid YAML" in (workdir / "results/logs/extract_corpus.log").read_text()
    # and on the console, where the run is watched (the default profile's show-failed-logs)
    assert "broken.md: front matter is not valid YAML" in result.stdout + result.stderr
    assert list((workdir / "results" / "corpus").glob("*")) == []  # Snakemake may remove the folder too


FAILING_PYTHON = """#!/bin/sh
# The first `python` on PATH, as outside an activated venv: it lacks the package.
echo "the python on PATH was called" >&2
exit 1
"""


@pytest.mark.slow  # Snakemake runs jobs here, not a dry run: CI runs it, the inner loop leaves it out
def test_rules_call_the_python_that_runs_snakemake(workdir):
    """A venv's snakemake run without activating the venv: the rules still find the package."""
    fake_bin = workdir / "fake_bin"
    fake_bin.mkdir()
    (fake_bin / "python").write_text(FAILING_PYTHON)
    (fake_bin / "python").chmod(0o755)
    result = snakemake(workdir, "--cores", "1", "results/corpus/corpus.txt", path_first=fake_bin)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "学而时习之" in (workdir / "results" / "corpus" / "corpus.txt").read_text(encoding="utf-8")


@pytest.mark.slow  # a dry run of one more target: CI runs it, the inner loop leaves it out
def test_corpus_edits_rerun_extraction(workdir):
    """Adding a post, or editing one, makes the corpus (and so everything after it) stale."""
    posts = workdir / "data" / "posts"
    for path in ("results/corpus/corpus.txt", "results/corpus/stats.json"):
        (workdir / path).parent.mkdir(parents=True, exist_ok=True)
        (workdir / path).write_text("already extracted")
        os.utime(workdir / path, (time.time() - 60, time.time() - 60))  # newer than the posts
    for post in posts.iterdir():
        os.utime(post, (time.time() - 120, time.time() - 120))
    plan = snakemake(workdir, "-n", "results/corpus/corpus.txt")
    assert "Nothing to be done" in plan.stdout + plan.stderr
    (posts / "new.md").write_text("---\ntitle: new\n---\nnew text\n", encoding="utf-8")
    plan = snakemake(workdir, "-n", "results/corpus/corpus.txt")
    assert job_counts(plan.stdout) == {"extract_corpus": 1}
    assert "data/posts/new.md" in plan.stdout


# Stands in for `python -m anatomy`: the real command, but for what `{step}` makes of it.
DELEGATING_ANATOMY = """
import sys
from pathlib import Path
{step}
from anatomy.cli import main

raise SystemExit(main())
"""
# a training that finishes at once: the rest of the grid is the real package's
INSTANT_TRAINING = """
if sys.argv[1] == "train":
    out = Path(sys.argv[sys.argv.index("--out") + 1])
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text('{"status": "done", "diverged": false}')
    sys.exit(0)
"""


def delegating_anatomy(workdir: Path, step: str) -> Path:
    """A stand-in `anatomy` (stand_in_anatomy) that runs the real one, with `step` run first: every
    module but its `__main__` is the real package's."""
    fake = stand_in_anatomy(workdir, DELEGATING_ANATOMY.format(step=step))
    (fake / "anatomy" / "__init__.py").write_text(f"__path__.append({str(REPO / 'anatomy')!r})\n")
    return fake


@pytest.mark.slow  # Snakemake runs jobs here, not a dry run: CI runs it, the inner loop leaves it out
def test_a_corpus_change_trains_once_and_then_nothing_is_left_to_do(tmp_path):
    """Edited posts, a corpus the Listen page built: the next Snakemake extracts, tokenizes and
    trains again, and the one after it has nothing to do. The extraction's inputs were another set
    after it ran than before (the note that the source changed went away), so Snakemake trained
    every run a second time. A dry run for another source changes nothing either."""
    from anatomy.data.default_corpus import build_default_corpus

    shutil.copytree(REPO / "data" / "posts", tmp_path / "data" / "posts")
    (tmp_path / "mine").mkdir()
    shutil.copy(REPO / "data" / "posts" / "2-daxue.md", tmp_path / "mine")
    fake = delegating_anatomy(tmp_path, INSTANT_TRAINING)
    target = ("--cores", "1", "results/runs/vanilla/seed42/summary.json")
    anew = {"extract_corpus": 1, "tokenize_corpus": 1, "train_model": 1}

    def run(*args: str) -> str:
        result = snakemake(tmp_path, *target, *args, pythonpath_first=fake)
        assert result.returncode == 0, result.stderr[-3000:]
        return result.stdout + result.stderr

    def nothing_to_do() -> bool:
        return "Nothing to be done" in run("-n")

    assert job_counts(run()) == anew
    post = tmp_path / "data" / "posts" / "2-daxue.md"
    post.write_text(post.read_text(encoding="utf-8") + "\n大学之道。\n", encoding="utf-8")
    assert job_counts(run()) == anew
    assert nothing_to_do()

    assert job_counts(run("-n", "--config", "corpus=mine")) == anew  # planned, not run
    assert nothing_to_do()

    shutil.rmtree(tmp_path / "results" / "corpus")
    cwd = Path.cwd()
    os.chdir(tmp_path)  # the Listen page builds it where the workflow runs
    try:
        build_default_corpus()
    finally:
        os.chdir(cwd)
    assert job_counts(run()) == anew  # new token files
    assert nothing_to_do()


@pytest.mark.slow  # a dry run of one more target: CI runs it, the inner loop leaves it out
def test_the_plan_takes_every_markdown_name_the_corpus_step_reads(workdir):
    """An MDX-only blog is a blog: the plan knows the corpus step's suffixes, not a list of its own."""
    write_post = "---\ntitle: mdx\n---\n学而时习之，不亦说乎。\n"
    (workdir / "mdx_blog").mkdir()
    (workdir / "mdx_blog" / "first.mdx").write_text(write_post, encoding="utf-8")
    (workdir / "mdx_blog" / "second.mkd").write_text(write_post, encoding="utf-8")
    plan = snakemake(workdir, "-n", "results/corpus/corpus.txt", "--config", "corpus=mdx_blog")
    assert plan.returncode == 0, plan.stderr[-3000:]
    assert job_counts(plan.stdout) == {"extract_corpus": 1}
    assert "mdx_blog/first.mdx" in plan.stdout and "mdx_blog/second.mkd" in plan.stdout


@pytest.mark.slow  # a dry run of one more target: CI runs it, the inner loop leaves it out
def test_a_deep_blog_with_a_named_pipe_is_planned_without_a_hang(workdir):
    """1,000 nested folders (rglob recursed once per level: a RecursionError at about 990), and a
    named pipe named like a post, which is no input: the corpus step skips it and says so."""
    posts = workdir / "data" / "posts"
    deep = posts
    try:
        for _ in range(1000):  # one level at a time: mkdir(parents=True) recurses too
            deep = deep / "d"
            deep.mkdir()
        (deep / "deep.md").write_text("---\ntitle: deep\n---\n有朋自远方来。\n", encoding="utf-8")
        os.mkfifo(posts / "pipe.md")
        plan = snakemake(workdir, "-n", "results/corpus/corpus.txt")
        assert plan.returncode == 0, plan.stderr[-3000:]
        assert job_counts(plan.stdout) == {"extract_corpus": 1}
        assert "d/d/deep.md" in plan.stdout and "pipe.md" not in plan.stdout
    finally:
        # deepest first: pytest's own clean-up (shutil.rmtree) recurses once per level
        while deep != posts:
            for entry in deep.iterdir():
                if not entry.is_dir():
                    entry.unlink()
            deep.rmdir()
            deep = deep.parent


def test_a_post_past_the_path_limit_is_left_to_the_corpus_step_to_name(workdir):
    """A post whose path is longer than the system allows (PATH_MAX), in a folder whose own path is
    not: it was listed as an input, and the plan ended in Snakemake's OSError traceback
    (ENAMETOOLONG). It is the corpus step's to name, as a folder nested deeper still is."""
    posts = workdir / "data" / "posts"
    # the deepest level whose folder the plan can read (paths from the working directory)
    level = (os.pathconf(posts, "PC_PATH_MAX") - 1 - len("data/posts")) // len("/" + LEVEL)
    long_name = "p" * 150 + ".md"
    try:
        make_deep_chain(posts, level + 1, {level: {long_name: "有朋自远方来。"}, level + 1: {"deep.md": "不亦乐乎。"}})
        plan = snakemake(workdir, "-n", "results/corpus/corpus.txt")
        assert plan.returncode == 0, plan.stderr[-3000:]
        assert job_counts(plan.stdout) == {"extract_corpus": 1}
        assert long_name not in plan.stdout and "deep.md" not in plan.stdout
    finally:
        remove_deep_chain(posts, level + 1)


# ---------------------------------------------------------------------------------------------
# Lint, the SLURM profile, and the check that the schema knows the package's fields
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow  # a dry run of one more target: CI runs it, the inner loop leaves it out
def test_lint_finds_nothing_but_the_missing_conda_envs(workdir):
    """`snakemake --lint` is clean, apart from one deliberate lint.

    Snakemake asks for a conda environment or container per rule. This project's software is
    one Python package in one virtual environment (README), and an environment file that could
    not be tested here would only pretend; that lint, and no other, is accepted.
    """
    result = snakemake(workdir, "--lint")
    output = result.stdout + result.stderr
    titles = Counter(re.findall(r"^    \* (.+?):?$", output, flags=re.MULTILINE))
    linted_rules = re.findall(r"^Lints for rule (\w+)", output, flags=re.MULTILINE)
    assert set(titles) == {"Specify a conda environment or container for each rule."}, output
    assert titles["Specify a conda environment or container for each rule."] == len(linted_rules)
    assert "Lints for snakefile" not in output


@pytest.mark.slow  # a dry run of one more target: CI runs it, the inner loop leaves it out
def test_slurm_profile_dry_run_asks_a_gpu_for_training_only(workdir):
    profile = WORKFLOW / "profiles" / "slurm"
    result = snakemake(workdir, "-n", "--profile", str(profile), "headline")
    assert result.returncode == 0, result.stderr + result.stdout
    jobs = re.findall(r"^rule (\w+):\n(?:    .*\n)*?    resources: (.*)$", result.stdout, flags=re.MULTILINE)
    trained = [resources for rule, resources in jobs if rule == "train_model"]
    assert len(trained) == 4
    for resources in trained:
        assert "gpu=1" in resources and "slurm_partition=gpu" in resources, resources
    for rule, resources in jobs:
        if rule != "train_model":
            assert "gpu=" not in resources, (rule, resources)

    # ...and the SLURM plugin turns that resource into a GPU request for sbatch. (The plugin is
    # also what lets Snakemake accept `executor: slurm` above, even for a dry-run.)
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    settings = yaml.safe_load((profile / "config.yaml").read_text(encoding="utf-8"))
    assert settings["executor"] == "slurm"

    class Job:
        resources = type("Resources", (dict,), {"__getattr__": dict.__getitem__})(
            settings["set-resources"]["train_model"]
        )

    assert set_gres_string(Job()).strip() == "--gpus=1"


@pytest.mark.slow  # a dry run of one more target: CI runs it, the inner loop leaves it out
def test_slurm_profile_sends_the_exams_to_the_cpu_partition_with_time_for_a_depth_cell(workdir):
    result = snakemake(workdir, "-n", "--profile", str(WORKFLOW / "profiles" / "slurm"), "exams")
    assert result.returncode == 0, result.stderr + result.stdout
    jobs = re.findall(r"^rule (\w+):\n(?:    .*\n)*?    resources: (.*)$", result.stdout, flags=re.MULTILINE)
    exams = [(rule, resources) for rule, resources in jobs if rule.startswith("exam_")]
    assert {rule for rule, _ in exams} == set(EXAM_JOBS) and len(exams) == sum(EXAM_JOBS.values())
    for rule, resources in exams:  # every job, not one per rule
        assert "slurm_partition=cpu" in resources and "gpu=1" not in resources, (rule, resources)
        runtime = {"exam_depth_cell": 60, "exam_qk_norm_cell": 60, "exam_mla_cell": 120, "exam_moe_cell": 240}.get(
            rule, 15
        )
        assert f"runtime={runtime}" in resources, (rule, resources)


def test_schema_knows_every_experiment_field_of_the_package():
    """A field added to ModelConfig or TrainConfig must be added to the schema, or it is unusable."""
    import dataclasses

    from anatomy.config import ModelConfig, TrainConfig

    schema = yaml.safe_load((WORKFLOW / "schemas" / "config.schema.yaml").read_text(encoding="utf-8"))
    model_fields = {field.name for field in dataclasses.fields(ModelConfig)} - {"vocab_size"}
    train_fields = {field.name for field in dataclasses.fields(TrainConfig)} - {"seed", "device", "threads", "compile"}
    assert set(schema["$defs"]["model"]["properties"]) == model_fields
    assert set(schema["$defs"]["train"]["properties"]) == train_fields


# ---------------------------------------------------------------------------------------------
# Failing jobs
# ---------------------------------------------------------------------------------------------

CRASHING_ANATOMY = """
# Stands in for `python -m anatomy train`: writes part of a run, then dies as a crash would.
import sys
from pathlib import Path

out = Path(sys.argv[sys.argv.index("--out") + 1])
out.mkdir(parents=True, exist_ok=True)
(out / "config.json").write_text('{"tags": {}}')
(out / "metrics.jsonl").write_text('{"step": 10, "val_loss": 4.0}')
(out / "last.pt").write_text("half a checkpoint")
print("killed at step 17", file=sys.stderr)
sys.exit(1)
"""


def stand_in_anatomy(workdir: Path, main: str) -> Path:
    """A folder holding a stand-in `anatomy` package whose `python -m anatomy` runs `main`; put it
    first on PYTHONPATH and the rules' commands find it before the real one."""
    fake = workdir / "fake"
    (fake / "anatomy").mkdir(parents=True)
    (fake / "anatomy" / "__init__.py").write_text("")
    (fake / "anatomy" / "__main__.py").write_text(main)
    return fake


def pretend_tokenized(workdir: Path) -> None:
    """Corpus files newer than the posts, so Snakemake plans only training."""
    for post in (workdir / "data" / "posts").iterdir():
        os.utime(post, (time.time() - 120, time.time() - 120))
    for name in ("corpus.txt", "stats.json", "vocab.json", "train.npy", "val.npy", "split.json"):
        path = workdir / "results" / "corpus" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("stand-in")
        os.utime(path, (time.time() - 60, time.time() - 60))


@pytest.mark.slow  # Snakemake runs jobs here, not a dry run: CI runs it, the inner loop leaves it out
def test_crashed_training_leaves_nothing_that_counts_as_done_and_can_resume(workdir):
    fake = stand_in_anatomy(workdir, CRASHING_ANATOMY)
    pretend_tokenized(workdir)
    target = "results/runs/vanilla/seed42/summary.json"

    result = snakemake(workdir, "--cores", "1", target, pythonpath_first=fake)
    assert result.returncode != 0
    assert "killed at step 17" in (workdir / "results/logs/train_model/vanilla/seed42.log").read_text()
    run = workdir / "results" / "runs" / "vanilla" / "seed42"
    assert not (run / "summary.json").exists()  # nothing that counts as done
    # The checkpoint is kept, so that the rerun resumes (or restarts if the settings changed).
    assert (run / "last.pt").exists()

    plan = snakemake(workdir, "-n", target)
    assert job_counts(plan.stdout) == {"train_model": 1}


EVERY_STEP_ANATOMY = """
# Stands in for every `python -m anatomy` command a target runs: each writes its outputs at once.
import sys
from pathlib import Path

args = sys.argv[1:]


def after(flag):
    return Path(args[args.index(flag) + 1])


if args[0] == "train":
    after("--out").mkdir(parents=True, exist_ok=True)
    (after("--out") / "summary.json").write_text('{"status": "done", "diverged": false}')
elif args[0] == "generate":
    after("--out").write_text("[]")
elif args[0] == "collect":
    after("--db").write_text("a database")
    after("--json").write_text("{}")
elif args[0] == "report":
    after("--out").mkdir(parents=True, exist_ok=True)
    (after("--out") / "report.md").write_text("# Results\\n")
"""
# write_experiments_file calls anatomy.files.atomic.write_text
STAND_IN_WRITE_TEXT = "from pathlib import Path\n\n\ndef write_text(path, text):\n    Path(path).write_text(text)\n"


@pytest.mark.slow  # Snakemake runs jobs here, not a dry run: CI runs it, the inner loop leaves it out
def test_a_run_writes_its_plan_first_and_ends_with_the_report(workdir):
    """results/plan.json, which the Progress page counts the jobs left from, lists every job of
    the targets; the report comes after collecting. A Snakemake that starts next removes it."""
    fake = stand_in_anatomy(workdir, EVERY_STEP_ANATOMY)
    (fake / "anatomy" / "files").mkdir()
    (fake / "anatomy" / "files" / "__init__.py").write_text("")
    (fake / "anatomy" / "files" / "atomic.py").write_text(STAND_IN_WRITE_TEXT)
    pretend_tokenized(workdir)
    result = snakemake(workdir, "headline", "--cores", "2", "--config", "train_threads=1", pythonpath_first=fake)
    assert result.returncode == 0, result.stderr[-3000:]
    assert job_counts(result.stdout + result.stderr)["write_report"] == 1
    assert (workdir / "results" / "report" / "report.md").read_text() == "# Results\n"

    plan = json.loads((workdir / "results" / "plan.json").read_text())
    assert plan["targets"] == ["headline"] and plan["lanes"] == 2  # --cores 2, one thread a training
    runs = [f"{name}/seed{seed}" for name in ("vanilla", "llama") for seed in SEEDS]
    assert plan["jobs"] == [
        *(
            {"rule": rule, "output": f"results/runs/{run}/{file}", "run": run}
            for run in runs
            for rule, file in (("train_model", "summary.json"), ("generate_samples", "samples.json"))
        ),
        {"rule": "collect_results", "output": "results/collected.done", "run": None},
        {"rule": "write_report", "output": "results/report/report.md", "run": None},
    ]
    # every job of the plan is timed (Snakemake's benchmark files), for the page's ETA
    benchmarks = workdir / "results" / "benchmarks"
    timed = {path.relative_to(benchmarks).parts[0] for path in benchmarks.rglob("*.tsv")}
    assert timed == {"train_model", "generate_samples", "collect_results", "write_report"}

    # the next Snakemake here removes it: a plan there while one runs is that one's
    assert snakemake(workdir, "-n").returncode == 0
    assert not (workdir / "results" / "plan.json").exists()

    # a target the plan cannot list (a single run's file): a plan without jobs, which the page says
    target = "results/runs/mqa/seed42/summary.json"
    assert snakemake(workdir, target, "--cores", "1", pythonpath_first=fake).returncode == 0
    plan = json.loads((workdir / "results" / "plan.json").read_text())
    assert plan == {"targets": [target], "lanes": 1, "jobs": None}


def test_settings_the_package_rejects_stop_the_plan_before_any_job(workdir):
    """A schema-valid experiment the model refuses once the quick config shrinks it (d_model 32
    cannot be split into 3 heads): `snakemake -n` says so, instead of a job failing later."""
    extra = workdir / "extra.yaml"
    extra.write_text(
        "experiments:\n  bad_heads:\n    preset: llama\n    group: extra\n    description: d\n    model: {n_head: 3}\n",
        encoding="utf-8",
    )
    result = snakemake(workdir, "-n", "--configfile", str(WORKFLOW / "quick.yaml"), str(extra))
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "invalid config at experiments.bad_heads: ModelConfig: d_model 32 is not divisible by n_head 3" in output
    assert "Traceback" not in output and not (workdir / "results").exists()


def copied_workflow(tmp_path: Path) -> Path:
    """The workflow copied into a project with a tiny blog, so that its own files can be edited."""
    project = tmp_path / "project"
    shutil.copytree(WORKFLOW, project / "workflow")
    write_posts(project / "data" / "posts")
    return project


def refusal(result: subprocess.CompletedProcess) -> str:
    """The one line a refused config file stops the plan with."""
    assert result.returncode != 0
    output = result.stdout + result.stderr
    return next(line for line in output.splitlines() if line.startswith("invalid config file "))


def test_a_duplicate_key_in_the_workflows_own_file_stops_the_plan_naming_both_lines(tmp_path):
    """Issue 45: a second `lr:` in one experiment silently replaced the first."""
    project = copied_workflow(tmp_path)
    experiments = project / "workflow" / "experiments.yaml"
    text = experiments.read_text(encoding="utf-8") + NEW_EXPERIMENT.replace("train:", "train:\n    train:")
    experiments.write_text(text, encoding="utf-8")
    line = len(text.splitlines())
    result = snakemake(project, "-n", snakefile=project / "workflow" / "Snakefile")
    assert refusal(result) == (
        f"invalid config file {experiments}: the key 'train' appears twice in one mapping (lines {line - 1} and {line})"
    )
    assert not (project / "results").exists()


BAD_CONFIG_FILES = {
    "a duplicate key": (
        "seeds: [42]\nprecision: fp32\nseeds: [7]\n",
        "the key 'seeds' appears twice in one mapping (lines 1 and 3)",
    ),
    "an alias bomb": (
        'a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n'
        + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 10))
        + "seeds: *a9\n",
        "line 2: the YAML alias *a0 is not taken here (an alias can expand without end); write the value out",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIG_FILES))
def test_a_bad_configfile_stops_the_plan_in_one_line(workdir, case):
    """Issue 45: Snakemake kept the last of two keys, and a billion laughs ran until killed."""
    text, expected = BAD_CONFIG_FILES[case]
    extra = workdir / "extra.yaml"
    extra.write_text(text, encoding="utf-8")
    assert refusal(snakemake(workdir, "-n", "--configfile", str(extra))) == f"invalid config file {extra}: {expected}"


def test_an_experiments_file_of_50_mb_is_refused_before_it_is_parsed(tmp_path):
    project = copied_workflow(tmp_path)
    experiments = project / "workflow" / "experiments.yaml"
    with experiments.open("a", encoding="utf-8") as f:
        f.write("# padding\n" * (5 * 1024**2))
    result = snakemake(project, "-n", snakefile=project / "workflow" / "Snakefile")
    assert refusal(result) == (
        f"invalid config file {experiments}: 50.0 MiB is more than a workflow config file (YAML or JSON) should hold "
        "(1.0 MiB at most), so it is not read"
    )


# ---------------------------------------------------------------------------------------------
# An interrupted grid restarts with the same command
# ---------------------------------------------------------------------------------------------

FINISHING_ANATOMY = """
# Stands in for `python -m anatomy train`: a run that finishes at once.
import sys
from pathlib import Path

out = Path(sys.argv[sys.argv.index("--out") + 1])
out.mkdir(parents=True, exist_ok=True)
(out / "summary.json").write_text('{"status": "done", "diverged": false}')
"""


@pytest.mark.slow  # Snakemake runs jobs here, not a dry run: CI runs it, the inner loop leaves it out
def test_an_output_left_marked_incomplete_is_made_again_by_the_plain_command(workdir):
    """A Ctrl-C that lands after a job wrote its output but before Snakemake recorded the job as
    done leaves the output marked incomplete. The default profile makes the rerun redo that job
    instead of stopping with IncompleteFilesException."""
    import base64

    fake = stand_in_anatomy(workdir, FINISHING_ANATOMY)
    pretend_tokenized(workdir)
    target = "results/runs/vanilla/seed42/summary.json"
    assert snakemake(workdir, "--cores", "1", target, pythonpath_first=fake).returncode == 0
    marker = workdir / ".snakemake" / "incomplete" / base64.urlsafe_b64encode(target.encode()).decode()
    marker.write_text('{"external_jobid": null}')  # the mark the interrupted job left

    without_profile = snakemake(workdir, "--cores", "1", target, "--workflow-profile", "none", pythonpath_first=fake)
    assert without_profile.returncode != 0
    assert "IncompleteFilesException" in without_profile.stdout + without_profile.stderr
    plain = snakemake(workdir, "--cores", "1", target, pythonpath_first=fake)
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert job_counts(plain.stdout + plain.stderr) == {"train_model": 1}


def runs_in_database(path: Path) -> dict:
    """What a run computed, leaving out wall-clock times (they differ between any two runs)."""
    import duckdb

    with duckdb.connect(str(path), read_only=True) as db:
        return {
            "runs": db.sql(
                "SELECT run_id, status, diverged, steps_done, params, best_val_loss, best_step, "
                "final_train_loss, final_val_loss FROM runs ORDER BY run_id"
            ).fetchall(),
            "metrics": db.sql(
                "SELECT run_id, step, train_loss, val_loss, lr, tokens_seen FROM metrics ORDER BY run_id, step"
            ).fetchall(),
            "samples": db.sql("SELECT run_id, text FROM samples ORDER BY run_id").fetchall(),
        }


def evaluations(workdir: Path) -> int:
    """Evaluation rows written so far, over every run of the grid."""
    return sum(len(path.read_text().splitlines()) for path in workdir.glob("results/runs/*/seed*/metrics.jsonl"))


def steps_left(workdir: Path, steps: int = 200) -> int:
    """The most steps any unfinished run still has to go, by its last evaluation."""
    left = []
    for path in workdir.glob("results/runs/*/seed*/metrics.jsonl"):
        lines = path.read_text().splitlines()
        if lines and not (path.parent / "summary.json").exists():
            try:
                left.append(steps - json.loads(lines[-1])["step"])
            except json.JSONDecodeError:  # the trainer is writing that line right now
                pass
    return max(left, default=0)


def files(workdir: Path, pattern: str) -> int:
    return len(list(workdir.glob(pattern)))


def wait_for(condition, process: subprocess.Popen, timeout: float = HANG_S) -> bool:
    """Poll until `condition()` holds; False if the process ended first (nothing left to interrupt)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        if process.poll() is not None:
            return False
        time.sleep(0.01)
    raise AssertionError("the grid neither reached the moment nor ended")


def restore_ctrl_c() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def process_group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.slow
def test_an_interrupted_grid_restarts_with_the_plain_command(tmp_path):
    """docs/workflow.md's promise, with real signals: the headline grid, interrupted five times
    (Ctrl-C to Snakemake and its jobs at four moments, and one SIGKILL of Snakemake alone),
    finishes with the same command and gives the database of an uninterrupted run."""
    settings = tmp_path / "longer.yaml"  # long enough to be interrupted mid-run
    settings.write_text("train_overrides: {steps: 200, eval_every: 10, batch_size: 8, warmup_steps: 5}\n")
    args = (
        "headline",
        "--cores",
        "2",
        "--configfile",
        str(WORKFLOW / "quick.yaml"),
        str(settings),
        "--config",
        "seeds=[42]",
    )
    reference, grid = tmp_path / "reference", tmp_path / "grid"
    for workdir in (reference, grid):
        shutil.copytree(REPO / "data" / "posts", workdir / "data" / "posts")
    result = snakemake(reference, *args)
    assert result.returncode == 0, result.stderr[-5000:]

    runs = "results/runs/*/seed42/"
    # Each moment is counted from the state at its restart, so it always lies ahead.
    moments = [
        ("SIGINT", lambda n: evaluations(grid) >= 3),  # mid-training
        # Snakemake alone, while a resumed trainer has many steps to go
        ("SIGKILL", lambda n: evaluations(grid) > n["evaluations"] and steps_left(grid) >= 50),
        ("SIGINT", lambda n: files(grid, runs + "summary.json") > n["summaries"]),  # just after a job's output
        ("SIGINT", lambda n: files(grid, runs + "samples.json") > n["samples"]),
        ("SIGINT", lambda n: files(grid, "results/anatomy.duckdb") + files(grid, "results/.anatomy.duckdb.*.tmp") > 0),
    ]
    command, env = snakemake_command(grid, *args), snakemake_env()
    interrupted, process = 0, None
    try:
        for signal_name, moment in moments:
            now = {
                "summaries": files(grid, runs + "summary.json"),
                "samples": files(grid, runs + "samples.json"),
                "evaluations": evaluations(grid),
            }
            # Its own process group, like a job in a terminal; and Ctrl-C must reach it even where this
            # test runs in the background (a shell's `&` makes its children ignore SIGINT).
            process = subprocess.Popen(
                command,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=restore_ctrl_c,
            )
            if not wait_for(lambda: moment(now), process):
                break  # the grid finished before this moment came
            if signal_name == "SIGINT":
                os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C sends: Snakemake and every job
            else:
                process.kill()  # Snakemake alone; its trainers must not run on as orphans
            process.wait(timeout=300)
            interrupted += 1
            deadline = time.monotonic() + 300
            while not process_group_gone(process.pid):
                assert time.monotonic() < deadline, "a job of the interrupted Snakemake is still running"
                time.sleep(0.05)
            if signal_name == "SIGKILL":
                logs = "".join(path.read_text() for path in grid.glob("results/logs/train_model/*/seed42.log"))
                assert "the workflow that started this run has stopped" in logs
    finally:  # whatever failed, leave nothing of the grid running
        if process is not None and not process_group_gone(process.pid):
            os.killpg(process.pid, signal.SIGKILL)

    assert interrupted >= 4  # the training moments at least: the grid cannot have finished before them
    result = snakemake(grid, *args)  # the plain command: no --unlock, no --rerun-incomplete
    assert result.returncode == 0, result.stderr[-5000:]
    assert runs_in_database(grid / "results" / "anatomy.duckdb") == runs_in_database(
        reference / "results" / "anatomy.duckdb"
    )


# collect, held once the new database is whole but not yet in place (its temporary files beside
# the old one), until it is killed; it says so in collect-is-writing
COLLECT_HELD_WHILE_WRITING = """
if sys.argv[1] == "collect":
    import time
    from contextlib import contextmanager
    from anatomy.results import collect

    written = collect.database_written

    @contextmanager
    def held_while_writing(collected, db_path):
        with written(collected, db_path) as new_db:
            Path("collect-is-writing").write_text("")
            time.sleep({hang})
            yield new_db

    collect.database_written = held_while_writing
"""


@pytest.mark.slow  # Snakemake runs jobs here, not a dry run: CI runs it, the inner loop leaves it out
def test_an_interrupted_collect_keeps_the_last_database_and_the_plain_command_collects_again(workdir):
    """SIGTERM to Snakemake and collect while collect writes: Snakemake removed the database and
    results.json as the outputs of a failed job (and before the job, to begin with), and the same
    command then said "Nothing to be done", the report being there: no database came back."""
    from run_folders import write_run_folder

    pretend_tokenized(workdir)
    runs = workdir / "results" / "runs"
    runs.mkdir(parents=True)
    for name in ("vanilla", "llama"):
        write_run_folder(runs, name, 42)
    args = ("headline", "--cores", "1", "--config", "seeds=[42]")
    first = snakemake(workdir, *args)
    assert first.returncode == 0, first.stderr[-3000:]
    database, summary = workdir / "results" / "anatomy.duckdb", workdir / "results" / "results.json"
    collected = database.read_bytes(), summary.read_bytes()

    # a run trained since: one more experiment of the headline group (at another lr: vanilla's
    # training again would be refused as a repeat)
    extra = workdir / "extra.yaml"
    extra.write_text(
        "experiments:\n  vanilla_again:\n    preset: vanilla\n    group: headline\n    description: again\n"
        "    train: {lr: 7.0e-4}\n",
        encoding="utf-8",
    )
    write_run_folder(runs, "vanilla_again", 42)
    held = delegating_anatomy(workdir, COLLECT_HELD_WHILE_WRITING.format(hang=HANG_S))
    process = subprocess.Popen(
        snakemake_command(workdir, *args, "--configfile", str(extra)),
        env=snakemake_env(pythonpath_first=held),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        assert wait_for(lambda: (workdir / "collect-is-writing").exists(), process), "collect never ran"
        os.killpg(process.pid, signal.SIGTERM)  # Snakemake and collect, as a stopped session would
        process.wait(timeout=HANG_S)
    finally:
        if not process_group_gone(process.pid):
            os.killpg(process.pid, signal.SIGKILL)
    assert (database.read_bytes(), summary.read_bytes()) == collected  # the last good pair, byte for byte

    again = snakemake(workdir, *args, "--configfile", str(extra))
    assert again.returncode == 0, again.stderr[-3000:]
    assert job_counts(again.stdout + again.stderr)["collect_results"] == 1
    assert {run_id for run_id, *_ in runs_in_database(database)["runs"]} == {
        "vanilla/seed42",
        "llama/seed42",
        "vanilla_again/seed42",
    }
    assert not list((workdir / "results").glob(".*.tmp*"))  # the killed collect's temporary files


@pytest.mark.slow  # Snakemake runs jobs here, not a dry run: CI runs it, the inner loop leaves it out
def test_ctrl_c_ends_in_one_line_saying_the_same_command_resumes(tmp_path):
    """Ctrl-C ended in Snakemake's 'WorkflowError: At least one job did not complete successfully',
    which reads as a failure: the last line now says it stopped and that the same command resumes."""
    shutil.copytree(REPO / "data" / "posts", tmp_path / "data" / "posts")
    args = ("headline", "--cores", "2", "--configfile", str(WORKFLOW / "quick.yaml"))
    console = tmp_path / "console.txt"  # a file, not a pipe: nothing waits on this test to read it
    with console.open("w") as output:
        process = subprocess.Popen(
            snakemake_command(tmp_path, *args),
            env=snakemake_env(),
            stdout=subprocess.DEVNULL,
            stderr=output,
            start_new_session=True,
            preexec_fn=restore_ctrl_c,
        )
    try:
        training = lambda: any(tmp_path.glob("results/runs/*/seed*/config.json"))  # noqa: E731
        assert wait_for(training, process), "the grid ended before a training started"
        os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C sends: Snakemake and every job
        process.wait(timeout=300)
    finally:
        if not process_group_gone(process.pid):
            os.killpg(process.pid, signal.SIGKILL)
    stderr = console.read_text()
    assert process.returncode != 0
    assert stderr.strip().splitlines()[-1] == (
        "Stopped by Ctrl-C, nothing is broken: run the same command again to resume (finished jobs are kept, "
        "an interrupted training continues from its last checkpoint)."
    ), stderr[-3000:]


def test_a_named_pipe_where_the_workflow_takes_its_lock_is_refused_like_a_bad_config(workdir):
    """Never opened to wait on (locks.py), the pipe ended the plan in the package's AnatomyError,
    with frames from inside the package: it is the workflow's refusal, worded as its others are."""
    (workdir / ".snakemake").mkdir()
    os.mkfifo(workdir / ".snakemake" / "anatomy.lock")
    result = snakemake(workdir, "-n", "headline")
    assert result.returncode != 0
    output = result.stdout + result.stderr
    message = ".snakemake/anatomy.lock: is not a regular file; expected a lock file there (or nothing): move it away"
    assert "WorkflowError in file" in output and f"\n{message}\n" in output, output[-3000:]
    assert "AnatomyError" not in output and "anatomy/files/locks.py" not in output and "Traceback" not in output


# ---------------------------------------------------------------------------------------------
# The quick grid, end to end
# ---------------------------------------------------------------------------------------------


def read_database(path: Path) -> dict:
    import duckdb

    with duckdb.connect(str(path), read_only=True) as db:
        return {
            "runs": db.sql('SELECT experiment, seed, "group", status, description FROM runs').fetchall(),
            "metrics": db.sql("SELECT run_id, count(*) FROM metrics GROUP BY run_id").fetchall(),
            "samples": db.sql("SELECT run_id, prefix, temperature, checkpoint, chars FROM samples").fetchall(),
            "benchmarks": db.sql("SELECT run_id FROM benchmarks WHERE rule = 'train_model'").fetchall(),
            "summary": db.sql("SELECT experiment FROM experiment_summary").fetchall(),
            "exams": {table: db.sql(f"SELECT count(*) FROM {table}").fetchall()[0][0] for table in EXAM_TABLES},
            "length_runs": db.sql("SELECT DISTINCT run_id FROM exam_length").fetchall(),
            "kv_runs": db.sql("SELECT DISTINCT run_id FROM exam_kv_cache").fetchall(),
            "depth_cells": db.sql("SELECT norm_pos, lr FROM exam_depth").fetchall(),
            "baselines": db.sql("SELECT DISTINCT experiment, baseline FROM runs").fetchall(),
            "compared": db.sql("SELECT experiment, baseline, n_seeds FROM baseline_summary").fetchall(),
        }


EXAM_TABLES = (
    "exam_length",
    "exam_kv_cache",
    "exam_kv_timing",
    "exam_kv_scale",
    "exam_depth",
    "grad_norms",
    "exam_wall_clock",
)


@pytest.mark.slow
def test_quick_grid_end_to_end(tmp_path):
    """The quick grid from the default posts to DuckDB, as a user runs it.

    `headline` first, over both seeds: its database holds exactly its runs. Then the whole grid
    for seed 42 only: every experiment runs end to end, at a bit over half the cost of both
    seeds (36 runs; CI has 2 cores), plus one run that diverges. Finally: nothing left to do,
    and a changed experiment reruns only its own runs.
    """
    shutil.copytree(REPO / "data" / "posts", tmp_path / "data" / "posts")
    quick = ("--configfile", str(WORKFLOW / "quick.yaml"))
    database = tmp_path / "results" / "anatomy.duckdb"

    result = snakemake(tmp_path, "headline", "--cores", "2", *quick)
    assert result.returncode == 0, result.stderr[-5000:]
    headline = read_database(database)
    assert {(name, seed) for name, seed, *_ in headline["runs"]} == expected_runs(["vanilla", "llama"])
    assert {name for (name,) in headline["summary"]} == {"vanilla", "llama"}
    # every target ends with the report of the database it collected into
    report = tmp_path / "results" / "report" / "report.md"
    assert report.is_file() and report.stat().st_mtime >= database.stat().st_mtime

    # Every experiment for seed 42, plus one whose learning rate makes it diverge: a diverged
    # run is a result, so the grid goes on and the database records it, against its own baseline.
    diverging = tmp_path / "diverging.yaml"
    diverging.write_text(
        "experiments:\n  blow_up:\n    preset: vanilla\n    group: extra\n    baseline: vanilla\n"
        "    description: lr far too high\n    train: {lr: 1.0e+4, warmup_steps: 0}\n",
        encoding="utf-8",
    )
    grid = ("--configfile", str(WORKFLOW / "quick.yaml"), str(diverging), "--config", "seeds=[42]")
    result = snakemake(tmp_path, "--cores", "2", *grid)
    assert result.returncode == 0, result.stderr[-5000:]
    assert job_counts(result.stdout + result.stderr)["train_model"] == len(DEFAULT_GRID) - 1  # headline done

    grid_groups = {**DEFAULT_GRID, "blow_up": "extra"}
    everything = {(name, 42) for name in grid_groups} | {("vanilla", 7), ("llama", 7)}
    found = read_database(database)
    assert {(name, seed) for name, seed, *_ in found["runs"]} == everything
    assert {(name, group) for name, _, group, *_ in found["runs"]} == set(grid_groups.items())
    statuses = {(name, seed): status for name, seed, _, status, _ in found["runs"]}
    assert statuses.pop(("blow_up", 42)) == "diverged"
    assert set(statuses.values()) <= {"done", "diverged"}  # finished, one way or the other
    assert all(description for *_, description in found["runs"])
    assert len(found["metrics"]) == len(everything) and all(rows >= 1 for _, rows in found["metrics"])
    assert len(found["samples"]) == 2 * len(everything)
    # sampled as the config says: final and best weights, temperature 0.8, prefix "## ", quick's 40 chars
    settings: dict[str, list] = {}
    for run_id, *row in found["samples"]:
        settings.setdefault(run_id, []).append(tuple(row))
    assert [row[:2] for row in settings.pop("blow_up/seed42")] == [("## ", 0.8)] * 2  # no weights to sample from
    assert {tuple(rows) for rows in settings.values()} == {(("## ", 0.8, "last", 40), ("## ", 0.8, "best", 40))}
    assert len(found["benchmarks"]) == len(everything) and all(run_id for (run_id,) in found["benchmarks"])
    assert {name for (name,) in found["summary"]} == set(grid_groups)
    summary = json.loads((tmp_path / "results" / "results.json").read_text(encoding="utf-8"))
    assert len(summary["run_summary"]) == len(everything)
    assert {row["experiment"] for row in summary["experiment_summary"]} == set(grid_groups)
    # the exams are part of `all`: every exam table is filled, for every run and every cell
    assert all(found["exams"].values()), found["exams"]
    # (for this grid's seeds: the seed-7 headline runs came from the `headline` target alone)
    assert {run_id for (run_id,) in found["length_runs"]} == {f"{name}/seed42" for name in grid_groups}
    assert {run_id for (run_id,) in found["kv_runs"]} == {"llama_minus_gqa/seed42", "mqa/seed42", "llama/seed42"}
    assert sorted(found["depth_cells"]) == [("post", 3.0e-4), ("post", 1.0e-2), ("pre", 3.0e-4), ("pre", 1.0e-2)]
    # each run has the baseline its entry names (blow_up's only in the test's config), and is paired with it
    declared = yaml.safe_load((WORKFLOW / "experiments.yaml").read_text(encoding="utf-8"))["experiments"]
    # the grid's experiments: the studies beside it (anatomy/results/groups.py) are not part of `all`
    grid_entries = {name: entry for name, entry in declared.items() if entry["group"] not in STUDY_GROUPS}
    baselines = {name: entry.get("baseline") for name, entry in grid_entries.items()} | {"blow_up": "vanilla"}
    assert dict(found["baselines"]) == baselines
    assert {(name, baseline) for name, baseline, _ in found["compared"]} == {
        (name, baseline) for name, baseline in baselines.items() if baseline
    }
    # blow_up diverged before its first evaluation: paired with vanilla, but no seed has a best val to compare
    assert ("blow_up", "vanilla", 0) in found["compared"]

    plan = snakemake(tmp_path, "-n", *grid)
    assert "Nothing to be done" in plan.stdout + plan.stderr
    plan = snakemake(tmp_path, "-n", "exams", *grid)
    assert "Nothing to be done" in plan.stdout + plan.stderr
    changed = tmp_path / "changed.yaml"
    changed.write_text("experiments:\n  mqa:\n    train: {lr: 1.0e-3}\n", encoding="utf-8")
    plan = snakemake(
        tmp_path,
        "-n",
        "-p",
        "--configfile",
        str(WORKFLOW / "quick.yaml"),
        str(diverging),
        str(changed),
        "--config",
        "seeds=[42]",
    )
    # its run, and the exams that read the run
    assert job_counts(plan.stdout) == {
        "train_model": 1,
        "generate_samples": 1,
        "exam_length": 1,
        "exam_kv_cache": 1,
        "collect_results": 1,
        "write_report": 1,
        "all": 1,
    }
    assert set(train_commands(plan.stdout)) == {("mqa", 42)}
    # a changed baseline changes what a run is compared with, not the run: it only collects again
    rebased = tmp_path / "rebased.yaml"
    rebased.write_text("experiments:\n  mqa:\n    baseline: vanilla\n", encoding="utf-8")
    plan = snakemake(
        tmp_path,
        "-n",
        "--configfile",
        str(WORKFLOW / "quick.yaml"),
        str(diverging),
        str(rebased),
        "--config",
        "seeds=[42]",
    )
    assert job_counts(plan.stdout) == {
        "write_experiments_file": 1,
        "collect_results": 1,
        "write_report": 1,
        "all": 1,
    }


def test_the_experiments_file_declares_each_experiments_runs_by_stage(workdir):
    """results/experiments.json carries every experiment's baseline, group and runs (seed and
    stage): what collect keeps as declared_runs, so that a study's section says what is still to
    train. Writing it trains nothing."""
    result = snakemake(workdir, "results/experiments.json", "--cores", "1")
    assert result.returncode == 0, result.stderr + result.stdout
    declared = json.loads((workdir / "results" / "experiments.json").read_text())["experiments"]
    assert declared["llama"] == {
        "baseline": "vanilla",
        "group": "headline",
        "runs": [{"seed": 42, "stage": None}, {"seed": 7, "stage": None}],
    }
    # `stages: {1: [42], 2: [7]}`: seed 42 in stage 1, seed 7 in stage 2
    assert declared["lr_8m_vanilla_2e3"]["runs"] == [{"seed": 42, "stage": 1}, {"seed": 7, "stage": 2}]
    assert not (workdir / "results" / "runs").exists()
