"""Sample text from a trained run: `python -m anatomy generate results/runs/llama/seed42`.

With the KV cache each new character costs one token's worth of work; without it the whole
context is recomputed every step. Both follow the same context rule, so for the same seed they
write the same text: the cache changes the speed, never the result.

The context rule: the model was trained on ctx_len characters, so it sees at most that many.
When the text outgrows the window, the window jumps forward by half its length (the cache is
rebuilt from the kept half), instead of sliding by one character, which would force a full
recomputation at every step.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Iterator

import torch

from anatomy.files.atomic import write_json
from anatomy.config import SEED_MAX, ModelConfig
from anatomy.errors import AnatomyError
from anatomy.generation.memorisation import Memorisation, annotate, data_dir_of
from anatomy.model import MiniLM
from anatomy.files.run_folder import read_run_config, read_summary
from anatomy.precision import autocast
from anatomy.files.run_folder import (
    CHECKPOINTS,
    RunFolder,
    check_checkpoint_belongs,
    load_checkpoint,
    naming_a_full_disk,
    run_precision,
)
from anatomy.data.tokenizer import CharTokenizer
from anatomy.files.weights import load_weights

DEFAULT_PREFIX = "## "
DEFAULT_TEMPERATURE = 0.8  # what the workflow samples at, and what `anatomy export` records
# Long generations show their progress on stderr: from this many characters (seconds of work on a
# CPU) on, and with a warning when, measured on the first MEASURE_CHARS, it will take over SLOW_S
PROGRESS_FROM = 10_000
MEASURE_CHARS = 1_000
SLOW_S = 60


def load_model(run_dir: str | Path, checkpoint: str = "last") -> tuple[MiniLM, CharTokenizer]:
    """The model and vocabulary saved in a run's checkpoint (the checkpoint alone is enough).

    A shipped reference run has no checkpoint, only its float16 weights (`best.safetensors`,
    `last.safetensors`, see anatomy/files/weights.py): those are read instead, upcast to float32.
    """
    run = RunFolder(run_dir)
    path = run.model_file(checkpoint) or run.checkpoint(checkpoint)  # neither: the missing checkpoint's error
    if path == run.weights_file(checkpoint):
        state, model_config, vocab = load_weights(path)
        saved_config = {"model": model_config}  # a weights file keeps the model's config alone
    else:
        saved = load_checkpoint(path)
        saved_config = saved["config"]
        state, model_config, vocab = saved["model"], saved_config["model"], saved["vocab"]
    if run.config.is_file():  # a checkpoint copied in from another run is named, not sampled
        check_checkpoint_belongs(path, saved_config, read_run_config(run.config), run.config)
    model = MiniLM(ModelConfig.from_dict(model_config, source=f"{path} config"))
    model.load_state_dict(state)
    return model.eval(), CharTokenizer(vocab, source=f"vocabulary of {path}")


def window_start(length: int, ctx_len: int) -> int:
    """First position the model sees when predicting the token after `length` tokens."""
    if length <= ctx_len:
        return 0
    half = max(1, ctx_len // 2)
    return math.ceil((length - ctx_len) / half) * half


def sample_next(logits: torch.Tensor, temperature: float, generator: torch.Generator) -> int:
    """Draw one token id from softmax(logits / temperature) by inverse-CDF sampling: one uniform
    number looked up in the cumulative probabilities. Same distribution as torch.multinomial, at a
    fraction of its fixed cost per call, which matters when a cached step itself is cheap."""
    cumulative = torch.softmax(logits / temperature, dim=-1).cumsum(dim=-1)
    u = torch.rand(1, generator=generator, device=logits.device) * cumulative[-1]
    # right=True skips tokens of probability 0 (a flat step); min() guards against rounding at the top
    return min(int(torch.searchsorted(cumulative, u, right=True)), cumulative.numel() - 1)


def pick_next(logits: torch.Tensor, temperature: float, generator: torch.Generator) -> int:
    """Temperature 0 is greedy decoding: always the most likely token (on a tie, the lowest id, as
    argmax everywhere does); any other temperature samples."""
    if temperature == 0:
        return int(torch.argmax(logits))
    return sample_next(logits, temperature, generator)


def check_temperature(temperature: float) -> None:
    # nan and inf pass `< 0` and would sample garbage (softmax of nan, or uniform noise)
    if not math.isfinite(temperature) or temperature < 0:
        raise AnatomyError(
            f"temperature = {temperature} is not valid: expected 0 (greedy) or a positive, finite number"
        )


def stream(
    model: MiniLM,
    tokenizer: CharTokenizer,
    chars: int = 500,
    temperature: float = DEFAULT_TEMPERATURE,
    prefix: str = DEFAULT_PREFIX,
    seed: int = 0,
    use_cache: bool = True,
    precision: str = "fp32",
) -> Iterator[tuple[str, int]]:
    """Each new character as it is picked, with the KV cache's size in bytes at that moment
    (0 without the cache). `sample` is this stream joined; the dashboard's Listen page shows it
    as it comes. `precision`: the run's own (anatomy/precision.py)."""
    check_temperature(temperature)
    if not prefix:
        raise AnatomyError("the prefix is empty: give at least one character to start from")
    ids = tokenizer.encode(prefix)  # names any character outside the vocabulary
    ctx_len = model.cfg.ctx_len
    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(seed)
    cache, cache_start = None, None
    for _ in range(chars):
        # inference_mode: like no_grad, and skips autograd's version counters too
        with torch.inference_mode(), autocast(precision, device):
            start = window_start(len(ids), ctx_len)
            if not use_cache:
                logits, _ = model(torch.tensor([ids[start:]], device=device))
            elif cache is None or start != cache_start:  # (re)fill the cache from the window
                logits, cache = model.forward_cached(torch.tensor([ids[start:]], device=device))
                cache_start = start
            else:  # only the newest character goes through the model
                logits, cache = model.forward_cached(torch.tensor([ids[-1:]], device=device), cache)
            ids.append(pick_next(logits[0, -1], temperature, generator))
        yield tokenizer.decode(ids[-1:]), cache.nbytes() if cache is not None else 0


def sample(
    model: MiniLM,
    tokenizer: CharTokenizer,
    chars: int = 500,
    temperature: float = DEFAULT_TEMPERATURE,
    prefix: str = DEFAULT_PREFIX,
    seed: int = 0,
    use_cache: bool = True,
    precision: str = "fp32",
) -> str:
    """Prefix plus `chars` sampled characters (temperature 0: the most likely ones)."""
    new = stream(model, tokenizer, chars, temperature, prefix, seed, use_cache, precision)
    return prefix + "".join(char for char, _ in new)


def seconds_text(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def with_progress(chars: Iterator[tuple[str, int]], total: int, label: str) -> Iterator[tuple[str, int]]:
    """The stream, unchanged; on stderr, how far a long generation has come: a bar on a terminal,
    a line every tenth in a log; and a warning once the speed says it will take long."""
    bar = None
    if sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=total, desc=label, unit="char", unit_scale=True, dynamic_ncols=True)
    start, every = time.perf_counter(), max(1, total // 10)
    for done, item in enumerate(chars, 1):
        yield item
        if bar is not None:
            bar.update(1)
        if done == MEASURE_CHARS or done % every == 0:
            elapsed = time.perf_counter() - start
            left = elapsed / done * (total - done)
            if done == MEASURE_CHARS and left > SLOW_S:
                print(
                    f"warning: {label}: {total} characters will take about {seconds_text(elapsed + left)} "
                    f"at the speed of the first {done} (fewer: --chars)",
                    file=sys.stderr,
                    flush=True,
                )
            if bar is None and done % every == 0:
                print(
                    f"{label}: {done}/{total} characters, {elapsed:.0f} s, {seconds_text(left)} left",
                    file=sys.stderr,
                    flush=True,
                )
    if bar is not None:
        bar.close()


def generate_samples(
    run_dir: str | Path,
    checkpoint: str = "last",
    chars: int = 500,
    temperature: float = DEFAULT_TEMPERATURE,
    prefix: str = DEFAULT_PREFIX,
    seed: int = 0,
) -> dict:
    """One sample record for a run. A diverged run's last weights are not numbers, so it is
    sampled from its best checkpoint instead, and the record says so."""
    run = RunFolder(run_dir)
    note = None
    if run.summary.is_file():
        summary = read_summary(run.summary)
        if summary.get("diverged"):
            note = f"run diverged at step {summary.get('diverged_step')}"
            if checkpoint == "last":
                checkpoint = "best"
                note += "; sampled from the best checkpoint"
            if run.model_file("best") is None:
                # it diverged before its first finite evaluation
                checkpoint = None
                note = f"run diverged at step {summary.get('diverged_step')}; no checkpoint to sample from"
    text = None
    precision = run_precision(run_dir)
    if checkpoint is not None:
        model, tokenizer = load_model(run_dir, checkpoint)
        new = stream(model, tokenizer, chars, temperature, prefix, seed, precision=precision)  # what sample() joins
        if chars >= PROGRESS_FROM:
            new = with_progress(new, chars, f"{run.root} ({checkpoint})")
        text = prefix + "".join(char for char, _ in new)
    return {
        "checkpoint": checkpoint,
        "precision": precision,
        "prefix": prefix,
        "temperature": temperature,
        "seed": seed,
        "chars": chars,
        "text": text,
        "note": note,
    }


def with_memorisation(records: list[dict], run_dir: Path) -> list[dict]:
    """The records with how much of each text is copied from the training split
    (anatomy/generation/memorisation.py), when the corpus the run trained on is at hand."""
    try:
        data_dir = data_dir_of(run_dir)
    except AnatomyError as err:
        print(f"note: memorisation not measured: {err}", file=sys.stderr)
        return records
    try:
        return annotate(records, Memorisation(data_dir))
    except AnatomyError as err:  # the corpus is gone (e.g. a run copied from elsewhere): say so, keep the text
        print(f"note: memorisation not measured: {err}", file=sys.stderr)
        return records


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", help="a run folder written by `anatomy train`")
    parser.add_argument(
        "--checkpoint",
        nargs="+",
        default=["last"],
        choices=list(CHECKPOINTS),
        help="one sample from each: `--checkpoint last best` shows what memorising after "
        "the best val did to the text (default: last)",
    )
    parser.add_argument("--chars", type=int, default=500, help="characters to generate (default 500)")
    parser.add_argument(
        "--temperature",
        type=float,
        default=DEFAULT_TEMPERATURE,
        help="default %(default)s; 0 always picks the most likely character (greedy)",
    )
    parser.add_argument("--prefix", default=DEFAULT_PREFIX, help="text to start from (default '## ')")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="write the sample as JSON here (e.g. RUN_DIR/samples.json)")


def run(args: argparse.Namespace) -> int:
    if args.chars < 0:
        raise AnatomyError(f"--chars {args.chars} is not valid: expected 0 or more")
    if not 0 <= args.seed <= SEED_MAX:  # what torch's generator takes, as for training
        raise AnatomyError(f"--seed {args.seed} is not valid: expected 0 to {SEED_MAX}")
    check_temperature(args.temperature)  # before the checkpoint is loaded
    records = [
        generate_samples(args.run_dir, checkpoint, args.chars, args.temperature, args.prefix, args.seed)
        for checkpoint in dict.fromkeys(args.checkpoint)
    ]
    records = with_memorisation(records, Path(args.run_dir))
    if args.out:
        with naming_a_full_disk(args.out):
            write_json(args.out, records)
    for record in records:
        if len(records) > 1:
            print(f"--- {record['checkpoint']} checkpoint")
        print(record["text"] if record["text"] is not None else record["note"])
    return 0
