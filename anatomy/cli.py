"""`python -m anatomy COMMAND ...`: every step of the experiment, runnable by hand.

Each command lives in its own module, which provides `add_arguments(parser)` and
`run(args) -> int`. Only the chosen module is imported, so `--help` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from anatomy.errors import AnatomyError

# command -> (module, one-line help)
COMMANDS = {
    "check": ("anatomy.check", "self-check: both presets, parameter table, RoPE shift test"),
    "corpus": ("anatomy.corpus", "extract a folder of Markdown posts (or a .txt) into one text"),
    "tokenize": ("anatomy.tokenizer", "build the character vocabulary and the train/val token arrays"),
    "train": ("anatomy.train", "train one model (one config, one seed) into a run folder"),
    "generate": ("anatomy.generate", "sample text from a run's checkpoint"),
    "memorised": ("anatomy.memorisation", "measure how much of each sample is copied verbatim from the training text"),
    "bench": ("anatomy.bench", "measure step time and generation speed"),
    "collect": ("anatomy.results", "collect run folders into the DuckDB database and results.json"),
    "report": ("anatomy.report", "write the results report (Markdown + PNG figures) from a results database"),
    "reference": ("anatomy.reference", "ship finished runs' small files as reference results (no checkpoints)"),
    "export": ("anatomy.export", "export a mini-LLaMA run as a Hugging Face LlamaForCausalLM with its tokenizer"),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m anatomy", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        command_parser = sub.add_parser(name, help=help_text, description=help_text)
        if name == command:
            importlib.import_module(module_name).add_arguments(command_parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = argv[0] if argv and argv[0] in COMMANDS else None
    args = build_parser(command).parse_args(argv)
    if args.command is None:
        build_parser().print_help()
        return 2
    module = importlib.import_module(COMMANDS[args.command][0])
    try:
        return int(module.run(args) or 0)
    except AnatomyError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader stopped reading (`... | head`): files are already written, nothing failed.
        # Point stdout at /dev/null so Python's own flush at exit does not fail a second time.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
