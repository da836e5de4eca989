"""The text: extract the corpus into one file, then tokenize it into train/val arrays; and the
named corpora (workflow/corpora.yaml), which come split already, each into its own folder."""


rule extract_corpus:
    input:
        extract_corpus_input,
    output:
        text="results/corpus/corpus.txt",
        stats="results/corpus/stats.json",
    log:
        "results/logs/extract_corpus.log",
    params:
        # The source itself, so pointing `corpus` elsewhere reruns even if file names match.
        # (A name that starts with '-' goes as ./-posts, which argparse does not take for an option.)
        source=as_argument(config["corpus"]),
    shell:
        "python -m anatomy corpus {params.source:q} --out results/corpus > {log} 2>&1"


rule tokenize_corpus:
    input:
        rules.extract_corpus.output.text,
    output:
        vocab="results/corpus/vocab.json",
        train="results/corpus/train.npy",
        val="results/corpus/val.npy",
        split="results/corpus/split.json",
    log:
        "results/logs/tokenize_corpus.log",
    shell:
        "python -m anatomy tokenize {input:q} --out results/corpus > {log} 2>&1"


rule tokenize_named_corpus:
    input:
        named_corpus_files,
    output:
        vocab="results/corpora/{corpus}/vocab.json",
        train="results/corpora/{corpus}/train.npy",
        val="results/corpora/{corpus}/val.npy",
        split="results/corpora/{corpus}/split.json",
    log:
        "results/logs/tokenize_named_corpus/{corpus}.log",
    params:
        arguments=named_corpus_arguments,
    shell:
        "python -m anatomy tokenize {params.arguments} --out results/corpora/{wildcards.corpus} > {log} 2>&1"
