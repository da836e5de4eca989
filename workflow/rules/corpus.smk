"""The text: extract the corpus into one file, then tokenize it into train/val arrays; and the
named corpora (workflow/corpora.yaml), which come split already, each into its own folder."""


import sys
import time
from functools import cache

from anatomy.data.corpus_source import SOURCE_CHANGED_NOTE, as_argument, source_change
from anatomy.errors import AnatomyError
from anatomy.files.atomic import write_text

SOURCE_CHANGED = f"results/corpus/{SOURCE_CHANGED_NOTE}"


@cache
def corpus_source_note():
    """When results/corpus was made from another source than config `corpus` (its stats.json
    records what it was made from: anatomy/data/corpus_source.py), a note saying so, written now
    and given to the extraction as an input newer than its outputs, so that it runs; else nothing.
    File times cannot tell: a folder built by hand or by the Listen page is newer than the posts of
    any other source. Written while planning, dry runs too (Snakemake reruns an intermediate job
    for an input newer than its outputs, never for one that is missing), with the time in it (it
    skips an input whose content it has seen); `anatomy corpus` removes it."""
    why = source_change("results/corpus", config["corpus"])
    if why is None:
        return []
    print(f"{why} (config `corpus`): extracting it again", file=sys.stderr)
    try:
        write_text(SOURCE_CHANGED, f"{why} ({time.time_ns()})\n")
    except (OSError, AnatomyError) as err:
        raise WorkflowError(f"{why}, and {SOURCE_CHANGED} cannot be written to say so ({err})") from None
    return [SOURCE_CHANGED]


def extract_corpus_input(wildcards):
    """The source's files, and the note that results/corpus was made from another source."""
    return corpus_files(wildcards) + corpus_source_note()


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
