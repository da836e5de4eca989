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


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser: lists the commands (`python -m anatomy --help`)."""
    parser = argparse.ArgumentParser(prog="python -m anatomy", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text, description=help_text)
    return parser


def command_parser(command: str) -> argparse.ArgumentParser:
    """One command's own parser, with the arguments its module declares."""
    module_name, help_text = COMMANDS[command]
    parser = argparse.ArgumentParser(prog=f"python -m anatomy {command}", description=help_text)
    importlib.import_module(module_name).add_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in COMMANDS:
        build_parser().parse_args(argv)  # --help, or an unknown command: argparse says so and exits
        build_parser().print_help()
        return 2
    # Intermixed: `train n_layer=12 --out X seed=7` reads the key=value pairs wherever they stand
    # (plain parsing stops collecting positionals at the first option after them).
    args = command_parser(argv[0]).parse_intermixed_args(argv[1:])
    args.command = argv[0]
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
