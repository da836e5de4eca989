"""One run per experiment and seed: train it, then sample text from its final weights."""


rule train_model:
    input:
        train_data,
    output:
        # summary.json is written last, so its presence means the run finished. It is the only
        # declared output on purpose: when a job is interrupted (Ctrl-C, a killed node, a failed
        # job), Snakemake removes declared outputs, and the run's checkpoint must survive so that
        # the rerun resumes from it. A changed experiment does not resume: --restart-on-change
        # makes `anatomy train` discard a run made with other settings.
        summary="results/runs/{experiment}/seed{seed}/summary.json",
    log:
        "results/logs/train_model/{experiment}/seed{seed}.log",
    benchmark:
        "results/benchmarks/train_model/{experiment}/seed{seed}.tsv"
    threads: config["train_threads"]
    resources:
        gpu=config["gpus_per_run"],
    params:
        run_dir=run_folder,
        data=train_data_dir,
        # Params are tracked: changing an experiment's settings reruns exactly its runs.
        arguments=train_arguments,
        device=config["device"],
        compile=config["compile"],
        precision=train_precision,
    shell:
        "python -m anatomy train --data {params.data} --out {params.run_dir} --restart-on-change"
        " {params.arguments}"
        " train.seed={wildcards.seed} train.threads={threads} train.device={params.device}"
        " train.compile={params.compile} train.precision={params.precision}"
        " > {log} 2>&1"


rule generate_samples:
    input:
        rules.train_model.output.summary,
    output:
        "results/runs/{experiment}/seed{seed}/samples.json",
    log:
        "results/logs/generate_samples/{experiment}/seed{seed}.log",
    benchmark:
        "results/benchmarks/generate_samples/{experiment}/seed{seed}.tsv"
    # before the next training: a run is whole (its samples on the page) as soon as it can be,
    # and the Progress page's ETA, which schedules a sampling right after its training, holds
    priority: 1
    params:
        run_dir=run_folder,
        checkpoints=sample_checkpoints,
        temperature=config["samples"]["temperature"],
        prefix=config["samples"]["prefix"],
        chars=config["samples"]["chars"],
    shell:
        "python -m anatomy generate {params.run_dir} --checkpoint {params.checkpoints}"
        " --temperature {params.temperature} --prefix {params.prefix:q} --chars {params.chars}"
        " --out {output:q} > {log} 2>&1"
