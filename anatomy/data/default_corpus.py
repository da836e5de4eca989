"""The workflow's default corpus (results/corpus), built on first use where it is missing.

A fresh clone ships runs trained on the default corpus (data/posts) but not its tokenized folder:
results/ is not committed, except the reference results. Building it takes about a second, so a
reader that needs the training text (the dashboard's Listen page, to mark copied spans) builds it
itself, by the workflow's own two steps (workflow/rules/corpus.smk: `anatomy corpus`, then
`anatomy tokenize`) into the folder the workflow uses. Every file is written atomically and
split.json last, as the workflow writes them: a reader never takes a half-built folder for a corpus.
"""

from __future__ import annotations

from pathlib import Path

from anatomy.files.atomic import writing_into
from anatomy.files.yaml_files import read_config_file
from anatomy.data.corpus import extract_corpus, remove_stale_tokens, write_corpus
from anatomy.errors import AnatomyError
from anatomy.data.tokenizer import SPLIT_FILE, read_json, tokenize_corpus

# As the workflow names them, relative to the repository root (where the workflow runs)
DEFAULT_CORPUS_DIR = Path("results/corpus")
WORKFLOW_CONFIG = Path("workflow/config.yaml")
DEFAULT_SOURCE = Path("data/posts")  # workflow/config.yaml's `corpus`, if that file is not here


def is_default_corpus(data_dir: str | Path) -> bool:
    """Whether a run's data folder is the workflow's default corpus (named corpora are not built here:
    they are megabytes of text, and their own rule in the workflow)."""
    return Path(data_dir).resolve() == DEFAULT_CORPUS_DIR.resolve()


def workflow_source() -> Path:
    """The text the workflow extracts the default corpus from: its config's `corpus`."""
    try:
        config = read_config_file(WORKFLOW_CONFIG)  # as strictly as the workflow reads it
    except (OSError, AnatomyError):
        return DEFAULT_SOURCE
    source = config.get("corpus") if isinstance(config, dict) else None
    return Path(source) if isinstance(source, str) else DEFAULT_SOURCE


def build_default_corpus(data_dir: str | Path = DEFAULT_CORPUS_DIR) -> dict:
    """Extract and tokenize the workflow's corpus into `data_dir`, unless it is there already;
    returns its split.json. One builder at a time: a second waits, then finds it built."""
    data_dir = Path(data_dir)
    if not is_default_corpus(data_dir):
        raise AnatomyError(f"{data_dir}: not the workflow's default corpus ({DEFAULT_CORPUS_DIR}), so not built here")
    split = data_dir / SPLIT_FILE
    if not split.is_file():
        text, stats = extract_corpus(workflow_source())  # first: a missing or broken source writes nothing
        with writing_into(data_dir):
            if not split.is_file():  # else another builder finished while this one waited
                remove_stale_tokens(data_dir)  # tokens of an older corpus.txt belong to no corpus
                write_corpus(data_dir, text, stats)
                tokenize_corpus(data_dir / "corpus.txt", data_dir)  # split.json last: the folder is complete
    return read_json(split)
