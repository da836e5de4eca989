"""`python -m anatomy bench`: how fast is each version, measured rather than guessed.

Training: one optimizer step of vanilla and llama at the chapter's size, with the hand-written
(`manual`) and the `fused` parts, and the fused ones through torch.compile (`fused+compile`, where
a backend is installed; its compile time is the `1st step` column). Generation: 512 characters
with and without the KV cache. The cost of logging the per-block gradient norms at every step
(anatomy/grad_norms.py), as training steps with and without it. With `--parts`, each part alone,
manual against fused (the wall-clock exam's rows, anatomy/exams/wall_clock.py).
Everything runs in one process, interleaved round by round (so a noisy neighbour slows all
variants alike), and the report quotes medians and ratios, not single timings.
"""

from __future__ import annotations

import argparse
import functools
import platform
import statistics
import time

import torch

from anatomy.atomic import write_json
from anatomy.compiling import backend_available, compiled_or_eager, forward_backward, run_with_fallback
from anatomy.config import preset
from anatomy.devices import pick_device
from anatomy.generate import sample
from anatomy.grad_norms import block_grad_norms
from anatomy.model import MiniLM
from anatomy.tokenizer import CharTokenizer

CHAPTER_VOCAB = 1719
GRAD_NORM_TARGET = 0.03  # what logging the gradient norms at every step may add to a step, at most
NORM_CALLS = 20  # block_grad_norms timed alone, this many calls


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds per variant (default 10)")
    parser.add_argument("--steps-per-round", type=int, default=3, help="training steps timed per round")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--gen-chars", type=int, default=512, help="characters per generation timing")
    parser.add_argument("--gen-rounds", type=int, default=3)
    parser.add_argument(
        "--gen-ctx-lens",
        type=int,
        nargs="+",
        default=[128, 512],
        metavar="N",
        help="context lengths to time generation at (default 128, the chapter's, and 512)",
    )
    parser.add_argument("--vocab-size", type=int, default=CHAPTER_VOCAB)
    parser.add_argument("--device", default="auto", help="auto (cuda > mps > cpu), cpu, cuda, mps")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--no-compile", action="store_true", help="leave out the fused+compile variants")
    parser.add_argument(
        "--parts",
        action="store_true",
        help="also time each part alone, manual against fused (the wall_clock exam's rows)",
    )
    parser.add_argument("--out", help="write the results as JSON here")


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()
    elif device.type == "mps":
        torch.mps.synchronize()


def bench_training(device, vocab_size, batch_size, rounds, steps_per_round, with_compile=True) -> list[dict]:
    # fused+compile for both models, whatever `auto` would pick: these rows are its evidence
    impls = ["manual", "fused"] + (["fused+compile"] if with_compile and backend_available(device) else [])
    variants = [(name, impl) for name in ("vanilla", "llama") for impl in impls]
    setups = {}  # variant -> (model, the module a step calls, optimizer)
    for name, impl in variants:
        torch.manual_seed(0)
        model = MiniLM(preset(name, vocab_size=vocab_size, impl=impl.removesuffix("+compile"))).to(device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
        forward = compiled_or_eager(model, impl.endswith("+compile"), device)
        setups[(name, impl)] = (model, forward, optimizer)
    ctx_len = preset("vanilla").ctx_len
    data = torch.randint(0, vocab_size, (batch_size, ctx_len + 1), generator=torch.Generator().manual_seed(0))
    x, y = data[:, :-1].to(device), data[:, 1:].to(device)

    def step(forward, optimizer):
        forward_backward(forward, optimizer, x, y)
        optimizer.step()

    first_step_s = {}
    for variant, (model, forward, optimizer) in list(setups.items()):  # warm-up; compiles
        start = time.perf_counter()
        _, used = run_with_fallback(
            lambda module: step(module, optimizer), forward, model, label=f"{variant[0]} {variant[1]}: "
        )
        sync(device)
        first_step_s[variant] = time.perf_counter() - start
        if used is not forward:  # the compile failed: that variant has nothing to time
            del setups[variant]
            continue
        step(forward, optimizer)
    sync(device)
    times = {variant: [] for variant in setups}
    for _ in range(rounds):
        for variant, (_, forward, optimizer) in setups.items():
            start = time.perf_counter()
            for _ in range(steps_per_round):
                step(forward, optimizer)
            sync(device)
            times[variant].append((time.perf_counter() - start) / steps_per_round)
    rows = []
    for (name, impl), samples in times.items():
        median = statistics.median(samples)
        rows.append(
            {
                "model": name,
                "impl": impl,
                "step_ms": median * 1000,
                "min_ms": min(samples) * 1000,
                "max_ms": max(samples) * 1000,
                "tokens_per_s": batch_size * ctx_len / median,
                "rounds": len(samples),
                "first_step_s": first_step_s[(name, impl)],
                "round_ms": [t * 1000 for t in samples],
            }
        )
    return rows


def step_ratio(rows: list[dict], first: tuple[str, str], second: tuple[str, str]) -> dict[str, float]:
    """first / second step time, two ways. `of_medians`: ratio of the two medians. `paired`: the
    median of the per-round ratios; both ran in the same round, a few seconds apart, so a machine
    that speeds up or slows down over the run moves both alike and the ratio stays steadier."""
    by_variant = {(r["model"], r["impl"]): r for r in rows}
    a, b = by_variant[first], by_variant[second]
    paired = statistics.median(x / y for x, y in zip(a["round_ms"], b["round_ms"]))
    return {"of_medians": a["step_ms"] / b["step_ms"], "paired": paired}


def logged_training_step(model, optimizer, x, y, log_norms: bool) -> None:
    """A step as the trainer takes it, with or without the gradient norms it logs early on."""
    loss = forward_backward(model, optimizer, x, y)
    if log_norms:
        block_grad_norms(model.blocks)
    optimizer.step()
    loss.item()  # the trainer reads the loss at every step, which waits for the device


def grad_norm_cost(device, vocab_size, batch_size, rounds, steps_per_round) -> list[dict]:
    """What block_grad_norms at every step adds to a training step (the trainer's first 200 steps):
    each model (fused, uncompiled) with and without it, paired round by round. Where that ratio is
    lost in the machine's noise, the call timed alone (`norms_ms`, its share of a plain step) still
    says what it costs."""
    from anatomy.exams.wall_clock import interleaved_ms, paired_ratio, time_ms  # here: wall_clock imports this module

    ctx_len = preset("vanilla").ctx_len
    data = torch.randint(0, vocab_size, (batch_size, ctx_len + 1), generator=torch.Generator().manual_seed(0))
    x, y = data[:, :-1].to(device), data[:, 1:].to(device)
    rows = []
    for name in ("vanilla", "llama"):
        torch.manual_seed(0)
        model = MiniLM(preset(name, vocab_size=vocab_size, impl="fused")).to(device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
        steps = {
            kind: functools.partial(logged_training_step, model, optimizer, x, y, kind == "logged")
            for kind in ("plain", "logged")
        }
        ms = interleaved_ms(steps, rounds, device, repeats=steps_per_round)
        ratio = paired_ratio(ms["logged"], ms["plain"])
        norms_ms = time_ms(functools.partial(block_grad_norms, model.blocks), NORM_CALLS, device)  # last step's grads
        rows.append(
            {
                "model": name,
                "impl": "fused",
                "plain_ms": statistics.median(ms["plain"]),
                "logged_ms": statistics.median(ms["logged"]),
                "ratio": ratio,
                "norms_ms": norms_ms,
                "norms_share": norms_ms / statistics.median(ms["plain"]),
                "under_target": ratio < 1 + GRAD_NORM_TARGET,
                "rounds": rounds,
                "round_ratios": [a / b for a, b in zip(ms["logged"], ms["plain"])],
            }
        )
    return rows


def print_grad_norm_cost(rows: list[dict]) -> None:
    print(
        f"\nlogging the per-block gradient norms at every step (target: under {GRAD_NORM_TARGET:.0%} "
        "of step time), median of the per-round ratios"
    )
    print(f"{'model':<9}{'plain ms':>10}{'logged ms':>11}{'ratio':>8}{'call alone ms':>15}{'share':>8}")
    for r in rows:
        verdict = "under" if r["under_target"] else "over"
        print(
            f"{r['model']:<9}{r['plain_ms']:>10.1f}{r['logged_ms']:>11.1f}{r['ratio']:>8.3f}"
            f"{r['norms_ms']:>15.2f}{r['norms_share']:>8.2%}  "
            f"({r['ratio'] - 1:+.1%} per step: {verdict} the {GRAD_NORM_TARGET:.0%} target)"
        )


def bench_generation(device, vocab_size, chars, rounds, ctx_lens=(128,)) -> list[dict]:
    """Cached vs recomputed generation. Recomputing costs a forward over the whole window per
    character, so the cache's gain grows with the context length: timed at each of `ctx_lens`
    (untrained weights: speed does not depend on what the weights are)."""
    # Any vocabulary of the right size that holds the default prefix "## ".
    tokenizer = CharTokenizer(sorted([" ", "#"] + [chr(0x4E00 + i) for i in range(vocab_size - 2)]))
    rows = []
    for ctx_len, name in ((c, n) for c in ctx_lens for n in ("vanilla", "llama")):
        torch.manual_seed(0)
        model = MiniLM(preset(name, vocab_size=vocab_size, impl="fused", ctx_len=ctx_len)).to(device).eval()
        sample(model, tokenizer, chars=8)  # warm-up
        times = {True: [], False: []}
        for _ in range(rounds):
            for use_cache in (True, False):
                start = time.perf_counter()
                sample(model, tokenizer, chars=chars, seed=0, use_cache=use_cache)
                sync(device)
                times[use_cache].append(time.perf_counter() - start)
        cached, recomputed = statistics.median(times[True]), statistics.median(times[False])
        rows.append(
            {
                "model": name,
                "ctx_len": ctx_len,
                "chars": chars,
                "cached_s": cached,
                "recomputed_s": recomputed,
                "cached_chars_per_s": chars / cached,
                "recomputed_chars_per_s": chars / recomputed,
                "speedup": recomputed / cached,
                "rounds": rounds,
            }
        )
    return rows


def bench_parts(device, args: argparse.Namespace) -> dict:
    """The wall-clock exam's per-part rows at the chapter's size (printed as its table), and each
    part's manual / fused ratio."""
    from anatomy.exams.wall_clock import print_table, rows_of, time_parts  # here: wall_clock imports this module

    print(f"\neach part alone, forward + backward, manual against fused ({args.rounds} interleaved rounds)")
    timings = time_parts(device, args.batch_size, args.rounds, {"vocab_size": args.vocab_size})
    print_table(timings)
    return {"parts": rows_of(timings), "part_ratios": {f"{t.part}/{t.variant}": t.ratio for t in timings}}


def run(args: argparse.Namespace) -> int:
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    print(
        f"bench on {device} (torch {torch.__version__}, {torch.get_num_threads()} threads), "
        f"vocab {args.vocab_size}, batch {args.batch_size} x 128; medians over {args.rounds} rounds"
    )
    training = bench_training(
        device, args.vocab_size, args.batch_size, args.rounds, args.steps_per_round, with_compile=not args.no_compile
    )
    print(f"\n{'model':<9}{'impl':<15}{'ms/step':>9}{'min':>8}{'max':>8}{'tokens/s':>11}{'1st step s':>12}")
    for r in training:
        print(
            f"{r['model']:<9}{r['impl']:<15}{r['step_ms']:>9.1f}{r['min_ms']:>8.1f}{r['max_ms']:>8.1f}"
            f"{r['tokens_per_s']:>11,.0f}{r['first_step_s']:>12.1f}"
        )
    pairs = [
        (("llama", "fused"), ("vanilla", "fused")),
        (("llama", "fused"), ("vanilla", "manual")),
        (("llama", "manual"), ("vanilla", "manual")),
        (("vanilla", "fused"), ("vanilla", "manual")),
        (("llama", "fused"), ("llama", "manual")),
        (("llama", "fused+compile"), ("vanilla", "fused+compile")),
        (("llama", "fused+compile"), ("vanilla", "fused")),
        (("vanilla", "fused+compile"), ("vanilla", "fused")),
        (("llama", "fused+compile"), ("llama", "fused")),
    ]
    timed = {(r["model"], r["impl"]) for r in training}
    ratios = {
        f"{a[0]}_{a[1]} / {b[0]}_{b[1]}": step_ratio(training, a, b) for a, b in pairs if a in timed and b in timed
    }
    print("\nstep-time ratios (below 1: the first is faster)")
    print(f"  {'':<44}{'of medians':>11}{'per round':>11}")
    for label, value in ratios.items():
        print(f"  {label:<44}{value['of_medians']:>11.2f}{value['paired']:>11.2f}")

    norm_cost = grad_norm_cost(device, args.vocab_size, args.batch_size, args.rounds, args.steps_per_round)
    print_grad_norm_cost(norm_cost)

    parts = bench_parts(device, args) if args.parts else {}

    generation = bench_generation(device, args.vocab_size, args.gen_chars, args.gen_rounds, args.gen_ctx_lens)
    print(f"\ngeneration of {args.gen_chars} characters (fused), medians over {args.gen_rounds} rounds")
    print(f"{'model':<9}{'ctx_len':>8}{'cached s':>10}{'recomputed s':>14}{'speedup':>9}")
    for r in generation:
        print(f"{r['model']:<9}{r['ctx_len']:>8}{r['cached_s']:>10.2f}{r['recomputed_s']:>14.2f}{r['speedup']:>8.1f}x")

    if args.out:
        write_json(
            args.out,
            {
                "device": str(device),
                "torch_version": torch.__version__,
                "threads": torch.get_num_threads(),
                "machine": platform.machine(),
                "python_version": platform.python_version(),
                "vocab_size": args.vocab_size,
                "batch_size": args.batch_size,
                "training": training,
                "ratios": ratios,
                "grad_norm_cost": norm_cost,
                "generation": generation,
                **parts,
            },
        )
        print(f"\nwritten to {args.out}")
    return 0
