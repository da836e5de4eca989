"""The workflow's trainings on a machine without Snakemake: a rented GPU box, a lab machine.

`batch-plan` asks Snakemake (a dry run, here, where the workflow is installed) which trainings a
target still needs and records each run's exact commands in a plan file; `batch-run` runs that
plan there, several runs side by side, each run's training before its sampling, and packs the
finished runs' small files (never checkpoints) into one archive to bring back. The commands are
the workflow's own, so a run trained this way is the run Snakemake would have trained.
"""

PLAN_VERSION = 1
