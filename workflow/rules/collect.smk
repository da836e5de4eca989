"""Collect every finished run into the database: the only step that writes it.

`collect_results` needs the whole grid and every exam. Each named target has its own copy of the rule that
needs only that target's runs, so `snakemake headline` also leaves a database (holding every
run finished so far). A plain request for the database means the whole grid (ruleorder).
"""


rule write_experiment_baselines:
    """Which experiment each is compared with, for collect (its params: a changed baseline
    rewrites this file and collects again; it retrains nothing)."""
    output:
        "results/experiments.json",
    log:
        "results/logs/write_experiment_baselines.log",
    params:
        text=experiment_baselines(),
    shell:
        "python -c 'import sys; from anatomy.atomic import write_text; write_text(*sys.argv[1:])'"
        " {output:q} {params.text:q} > {log} 2>&1"


rule collect_results:
    input:
        run_outputs(EXPERIMENTS),
        exam_outputs(EXPERIMENTS),
        experiments=rules.write_experiment_baselines.output[0],
    output:
        db="results/anatomy.duckdb",
        json="results/results.json",
    log:
        "results/logs/collect_results.log",
    shell:
        "python -m anatomy collect --runs results/runs --db {output.db} --json {output.json}"
        " --benchmarks results/benchmarks --exams results/exams --experiments {input.experiments} > {log} 2>&1"


use rule collect_results as collect_headline with:
    input:
        run_outputs(experiments_of_target("headline")),
        experiments=rules.write_experiment_baselines.output[0],
    log:
        "results/logs/collect_headline.log",


use rule collect_results as collect_ablations with:
    input:
        run_outputs(experiments_of_target("ablations")),
        experiments=rules.write_experiment_baselines.output[0],
    log:
        "results/logs/collect_ablations.log",


use rule collect_results as collect_break_tests with:
    input:
        run_outputs(experiments_of_target("break_tests")),
        experiments=rules.write_experiment_baselines.output[0],
    log:
        "results/logs/collect_break_tests.log",


ruleorder: collect_results > collect_headline > collect_ablations > collect_break_tests
