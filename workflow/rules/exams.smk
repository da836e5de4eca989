"""The exams (anatomy/exams/): each part tested where it is made to pay. `snakemake exams`.

This file is also the worked example of adding an experiment as a rule, beside the YAML-entry
way of workflow/experiments.yaml: a rule names the file it makes, what it needs, and the one
command that makes it. Snakemake then runs it for every file a target asks for.

    length      every run's best weights on windows up to 8x the training length   (RoPE)
    kv_cache    cache bytes and generation time of MHA, GQA and MQA runs              (GQA)
    depth       a map of 12-layer runs without warmup: wiring x learning rate         (pre-norm)
    wall_clock  each part alone, forward + backward, hand-written against fused      (pitfall 4)
    qk_norm     a map of runs without warmup: with and without QK-norm x lr          (QK-norm)
    mla         cache bytes per character against best val, MHA/GQA/MQA/MLA          (MLA)
    moe         best val at equal active and equal total parameters, load, step time (experts)

What each exam is given (the outputs a target asks for, the cells of the maps) is worked out
in rules/common.smk, from the `exams:` settings of config.yaml.
"""


rule exam_length:
    input:
        summary=rules.train_model.output.summary,
        corpus=train_data,
    output:
        "results/runs/{experiment}/seed{seed}/exams/length.json",
    log:
        "results/logs/exam_length/{experiment}/seed{seed}.log",
    benchmark:
        "results/benchmarks/exam_length/{experiment}/seed{seed}.tsv"
    params:
        run_dir=exam_run_folder,
        data=train_data_dir,
        checkpoint=EXAMS["length"]["checkpoint"],
        windows=words(EXAMS["length"]["windows"]),
    shell:
        "python -m anatomy exam length {params.run_dir} --checkpoint {params.checkpoint}"
        " --data {params.data} --windows {params.windows} --out {output:q} > {log} 2>&1"


rule exam_kv_cache:
    input:
        summary=rules.train_model.output.summary,
    output:
        "results/runs/{experiment}/seed{seed}/exams/kv_cache.json",
    log:
        "results/logs/exam_kv_cache/{experiment}/seed{seed}.log",
    benchmark:
        "results/benchmarks/exam_kv_cache/{experiment}/seed{seed}.tsv"
    threads: config["train_threads"]
    params:
        run_dir=exam_run_folder,
        contexts=words(EXAMS["kv_cache"]["contexts"]),
        chars=EXAMS["kv_cache"]["chars"],
        rounds=EXAMS["kv_cache"]["rounds"],
    shell:
        "python -m anatomy exam kv_cache {params.run_dir} --contexts {params.contexts} --chars {params.chars}"
        " --rounds {params.rounds} --threads {threads} --out {output:q} > {log} 2>&1"


rule exam_depth_cell:
    """One cell of the map: an ordinary training run, in results/exams/depth/{cell}/."""
    input:
        rules.tokenize_corpus.output,
    output:
        "results/exams/depth/{cell}/summary.json",
    log:
        "results/logs/exam_depth/{cell}.log",
    benchmark:
        "results/benchmarks/exam_depth_cell/{cell}.tsv"
    threads: config["train_threads"]
    resources:
        gpu=config["gpus_per_run"],
    params:
        norm_pos=depth_norm_pos,
        lr=depth_lr,
        steps=EXAMS["depth"]["steps"],
        seed=EXAMS["depth"]["seed"],
        sizes=model_size_arguments(),
        device=config["device"],
        compile=config["compile"],
    shell:
        "python -m anatomy exam depth --out results/exams/depth --data results/corpus"
        " --norm-pos {params.norm_pos} --lr {params.lr} --steps {params.steps} --seed {params.seed}"
        " --threads {threads} {params.sizes} train.device={params.device} train.compile={params.compile}"
        " > {log} 2>&1"


rule exam_wall_clock:
    output:
        "results/exams/wall_clock.json",
    log:
        "results/logs/exam_wall_clock.log",
    benchmark:
        "results/benchmarks/exam_wall_clock/wall_clock.tsv"
    threads: config["train_threads"]
    params:
        rounds=EXAMS["wall_clock"]["rounds"],
        batch_size=EXAMS["wall_clock"]["batch_size"],
        sizes=model_size_arguments(WALL_CLOCK_SIZES),
        device=config["device"],
    shell:
        "python -m anatomy exam wall_clock --out {output:q} --rounds {params.rounds}"
        " --batch-size {params.batch_size} --threads {threads} --device {params.device} {params.sizes} > {log} 2>&1"


rule exam_qk_norm_cell:
    """One cell of the QK-norm map: an ordinary training run, in results/exams/qk_norm/{cell}/."""
    input:
        rules.tokenize_corpus.output,
    output:
        "results/exams/qk_norm/{cell}/summary.json",
    log:
        "results/logs/exam_qk_norm/{cell}.log",
    benchmark:
        "results/benchmarks/exam_qk_norm_cell/{cell}.tsv"
    threads: config["train_threads"]
    resources:
        gpu=config["gpus_per_run"],
    params:
        variant=qk_norm_variant,
        lr=qk_norm_lr,
        steps=EXAMS["qk_norm"]["steps"],
        seed=EXAMS["qk_norm"]["seed"],
        sizes=model_size_arguments(),
        device=config["device"],
        compile=config["compile"],
    shell:
        "python -m anatomy exam qk_norm --out results/exams/qk_norm --data results/corpus"
        " --steps {params.steps} --seed {params.seed} --threads {threads} {params.sizes}"
        " train.device={params.device} train.compile={params.compile}"
        " --variant {params.variant} --lr {params.lr} > {log} 2>&1"


rule exam_mla_cell:
    """One cell of the MLA exam: a training run in results/exams/mla/{cell}/, then its cache
    and generation speed measured into its exams/mla.json."""
    input:
        rules.tokenize_corpus.output,
    output:
        "results/exams/mla/{cell}/exams/mla.json",
    log:
        "results/logs/exam_mla/{cell}.log",
    benchmark:
        "results/benchmarks/exam_mla_cell/{cell}.tsv"
    threads: config["train_threads"]
    resources:
        gpu=config["gpus_per_run"],
    params:
        cell=mla_cell_arguments,
        rope_dim=EXAMS["mla"]["rope_dim"],
        steps=EXAMS["mla"]["steps"],
        seed=EXAMS["mla"]["seed"],
        tokens=EXAMS["mla"]["tokens"],
        context=EXAMS["mla"]["context"],
        chars=EXAMS["mla"]["chars"],
        rounds=EXAMS["mla"]["rounds"],
        sizes=model_size_arguments(),
        device=config["device"],
        compile=config["compile"],
    shell:
        "python -m anatomy exam mla --out results/exams/mla --data results/corpus"
        " --steps {params.steps} --seed {params.seed} --threads {threads} {params.sizes} rope_dim={params.rope_dim}"
        " train.device={params.device} train.compile={params.compile} --tokens {params.tokens}"
        " --context {params.context} --chars {params.chars} --rounds {params.rounds} {params.cell} > {log} 2>&1"


rule exam_moe_cell:
    """One cell of the MoE exam: a training run in results/exams/moe/{cell}/. The cells are jobs
    of their own, so that they train side by side (or on a cluster); exam_moe then times them."""
    input:
        rules.tokenize_corpus.output,
    output:
        "results/exams/moe/{cell}/summary.json",
    log:
        "results/logs/exam_moe/{cell}.log",
    benchmark:
        "results/benchmarks/exam_moe_cell/{cell}.tsv"
    wildcard_constraints:
        cell="|".join(EXAMS["moe"]["cells"]),
    threads: config["train_threads"]
    resources:
        gpu=config["gpus_per_run"],
    params:
        experts=EXAMS["moe"]["experts"],
        steps=EXAMS["moe"]["steps"],
        seed=EXAMS["moe"]["seed"],
        sizes=model_size_arguments(),
        device=config["device"],
        compile=config["compile"],
    shell:
        "python -m anatomy exam moe --out results/exams/moe --data results/corpus"
        " --steps {params.steps} --seed {params.seed} --threads {threads} {params.sizes}"
        " train.device={params.device} train.compile={params.compile} --experts {params.experts}"
        " --train-only --cells {wildcards.cell} > {log} 2>&1"


rule exam_moe:
    """The MoE exam's table: its trained cells read (the same command, so a missing cell would
    train here), then their steps timed side by side in one process (results/exams/moe/moe.json)."""
    input:
        rules.tokenize_corpus.output,
        cells=expand("results/exams/moe/{cell}/summary.json", cell=EXAMS["moe"]["cells"]),
    output:
        "results/exams/moe/moe.json",
    log:
        "results/logs/exam_moe.log",
    benchmark:
        "results/benchmarks/exam_moe/moe.tsv"
    threads: config["train_threads"]
    resources:
        gpu=config["gpus_per_run"],
    params:
        cells=words(EXAMS["moe"]["cells"]),
        experts=EXAMS["moe"]["experts"],
        steps=EXAMS["moe"]["steps"],
        seed=EXAMS["moe"]["seed"],
        rounds=EXAMS["moe"]["rounds"],
        batch_size=EXAMS["moe"]["batch_size"],
        sizes=model_size_arguments(),
        device=config["device"],
        compile=config["compile"],
    shell:
        "python -m anatomy exam moe --out results/exams/moe --data results/corpus"
        " --steps {params.steps} --seed {params.seed} --threads {threads} {params.sizes}"
        " train.device={params.device} train.compile={params.compile} --experts {params.experts}"
        " --rounds {params.rounds} --batch-size {params.batch_size} --cells {params.cells} > {log} 2>&1"
