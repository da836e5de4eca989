"""Collect every finished run into the database, the only step that writes it; then the report.

One rule, whichever targets were asked for: `snakemake headline` collects the headline runs,
`snakemake headline ablations` both groups, and anything else (the default target, `exams`, the
database itself) the whole grid and every exam (planned_jobs). The database always holds
every run finished so far, not only the ones the target needed. Another target than last time
changes what collecting waits for, so it collects again: seconds, and nothing retrains.

An interrupted collect loses nothing. The database and results.json are not the rule's declared
outputs, which Snakemake removes before the job runs and when it fails, but a stamp Snakemake
makes once collect finished (results/collected.done). collect writes the pair atomically, so the
last good one stays until a new one is whole (a killed collect's temporary files go at the next);
the next Snakemake finds no stamp, and collects again.

Every target ends with the report of that database in results/report/. The shipped report
(docs/results/) and the READMEs' generated sections change only when someone writes them:
`python -m anatomy report --out docs/results --readme README.md README.zh-CN.md`.
"""


rule write_experiments_file:
    """Which experiment each is compared with, and which runs each declares, for collect (its
    params: a changed baseline or seed rewrites this file and collects again; it retrains nothing)."""
    output:
        "results/experiments.json",
    log:
        "results/logs/write_experiments_file.log",
    params:
        text=experiments_file_text(),
    shell:
        "python -c 'import sys; from anatomy.files.atomic import write_text; write_text(*sys.argv[1:])'"
        " {output:q} {params.text:q} > {log} 2>&1"


rule collect_results:
    input:
        collected_outputs,
        experiments=rules.write_experiments_file.output[0],
    output:
        # the stamp, not the database: see the top of this file
        done=touch(COLLECTED_STAMP),
    log:
        "results/logs/collect_results.log",
    benchmark:
        "results/benchmarks/collect_results/database.tsv"
    params:
        db=DATABASE,
        json=RESULTS_JSON,
    shell:
        "python -m anatomy collect --runs results/runs --db {params.db} --json {params.json}"
        " --benchmarks results/benchmarks --exams results/exams --experiments {input.experiments} > {log} 2>&1"


rule write_report:
    """The report of everything collected so far: results/report/report.md and its figures. It
    reads a database of any size (a study alone, half a grid): what is not trained yet, it says so."""
    input:
        rules.collect_results.output.done,
    output:
        # a folder: made afresh, so no figure of an earlier report is left beside this one
        directory("results/report"),
    log:
        "results/logs/write_report.log",
    benchmark:
        "results/benchmarks/write_report/report.tsv"
    params:
        db=DATABASE,
    shell:
        "python -m anatomy report --db {params.db:q} --out {output:q} > {log} 2>&1"
