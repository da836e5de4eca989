"""Collect every finished run into the database: the only step that writes it.

One rule, whichever targets were asked for: `snakemake headline` collects the headline runs,
`snakemake headline ablations` both groups, and anything else (the default target, `exams`, the
database itself) the whole grid and every exam (collected_outputs). The database always holds
every run finished so far, not only the ones the target needed. Another target than last time
changes what collecting waits for, so it collects again: seconds, and nothing retrains.
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
        "python -c 'import sys; from anatomy.files.atomic import write_text; write_text(*sys.argv[1:])'"
        " {output:q} {params.text:q} > {log} 2>&1"


rule collect_results:
    input:
        collected_outputs,
        experiments=rules.write_experiment_baselines.output[0],
    output:
        db="results/anatomy.duckdb",
        json="results/results.json",
    log:
        "results/logs/collect_results.log",
    shell:
        "python -m anatomy collect --runs results/runs --db {output.db} --json {output.json}"
        " --benchmarks results/benchmarks --exams results/exams --experiments {input.experiments} > {log} 2>&1"
