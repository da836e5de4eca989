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
from anatomy.exams import EXAMS, exam_module
from anatomy.files.atomic import NOT_WRITABLE, not_writable_advice


def not_writable(err: OSError) -> str:
    """What a command that met a folder it may not write (a read-only checkout, a shared course
    folder) says, and what to do: one line, not a traceback from whichever write met it first."""
    where = f"{err.filename}: " if err.filename else ""
    return f"{where}{err.strerror}; {not_writable_advice()}"


# command -> (module, one-line help)
COMMANDS = {
    "check": ("anatomy.check", "self-check: both presets, parameter table, RoPE shift test"),
    "corpus": ("anatomy.data.corpus", "extract a folder of Markdown posts (or a .txt) into one text"),
    "tokenize": ("anatomy.data.tokenize", "build the character vocabulary and the train/val token arrays"),
    "train": ("anatomy.training.train", "train one model (one config, one seed) into a run folder"),
    "generate": ("anatomy.generation.generate", "sample text from a run's checkpoint"),
    "memorised": (
        "anatomy.generation.memorisation",
        "measure how much of each sample is copied verbatim from the training text",
    ),
    "bench": ("anatomy.exams.bench", "measure step time and generation speed"),
    "costs": (
        "anatomy.results.costs",
        "time each run shape on lanes side by side: minutes per run, the grid, and what a night buys here",
    ),
    "batch-plan": (
        "anatomy.batch.planner",
        "the trainings a Snakemake target still needs, with their commands, for a machine without Snakemake",
    ),
    "batch-run": ("anatomy.batch.runner", "run a batch-plan's trainings here, side by side, and pack what they wrote"),
    "collect": ("anatomy.results.collect", "collect run folders into the DuckDB database and results.json"),
    "report": ("anatomy.report.markdown", "write the results report (Markdown + PNG figures) from a results database"),
    "reference": ("anatomy.results.reference", "ship finished runs' small files as reference results (no checkpoints)"),
    "export": (
        "anatomy.generation.export",
        "export a mini-LLaMA run as a Hugging Face LlamaForCausalLM with its tokenizer",
    ),
    "exam": (
        "anatomy.exams",
        "run one exam (length, kv_cache, depth, wall_clock, qk_norm, mla, moe): each part where it pays",
    ),
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


def chosen_command(argv: list[str]) -> tuple[str, str, argparse.ArgumentParser, list[str]]:
    """(command, module, parser, its arguments). `exam NAME` is a command per exam, each with its
    own module and arguments (argparse's subparsers cannot be parsed intermixed)."""
    command, rest = argv[0], argv[1:]
    if command == "exam" and rest and rest[0] in EXAMS:
        name, rest = rest[0], rest[1:]
        parser = argparse.ArgumentParser(prog=f"python -m anatomy exam {name}", description=EXAMS[name])
        exam_module(name).add_arguments(parser)
        return f"exam {name}", exam_module(name).__name__, parser, rest
    return command, COMMANDS[command][0], command_parser(command), rest


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in COMMANDS:
        build_parser().parse_args(argv)  # --help, or an unknown command: argparse says so and exits
        build_parser().print_help()
        return 2
    # Intermixed: `train n_layer=12 --out X seed=7` reads the key=value pairs wherever they stand
    # (plain parsing stops collecting positionals at the first option after them). After `--`
    # every word is a positional (`corpus --out X -- -posts`, a folder named -posts), which only
    # plain parsing keeps: the intermixed parser drops the `--` and reads -posts as an option.
    command, module_name, parser, rest = chosen_command(argv)
    parse = parser.parse_args if "--" in rest else parser.parse_intermixed_args
    args = parse(rest)  # `exam` without a known NAME: argparse lists them and exits
    args.command = command
    module = importlib.import_module(module_name)
    try:
        return int(module.run(args) or 0)
    except AnatomyError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as err:
        # Ctrl-C: one line, not a traceback. A command that can say where it stopped says it in
        # the interrupt (a run: the step, and the checkpoint it resumes from); every write is
        # atomic, so nothing half-written is left to say.
        print(err.args[0] if err.args else "stopped (Ctrl-C)", file=sys.stderr)
        return 130  # the shell's code for a command ended by SIGINT
    except BrokenPipeError:
        # The reader stopped reading (`... | head`): files are already written, nothing failed.
        # Point stdout at /dev/null so Python's own flush at exit does not fail a second time.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as err:
        if err.errno not in NOT_WRITABLE:
            raise
        print(f"error: {not_writable(err)}", file=sys.stderr)
        return 2
