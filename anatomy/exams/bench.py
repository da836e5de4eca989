"""`python -m anatomy bench`: how fast is each version, measured rather than guessed.

Training: one optimizer step of vanilla and llama at the chapter's size, with the hand-written
(`manual`) and the `fused` parts, and the fused ones through torch.compile (`fused+compile`, where
a backend is installed; its compile time is the `1st step` column). The fused rows run in fp32 and
in bf16 autocast (anatomy/precision.py; bf16 where the device multiplies it natively, or when
`--precision` asks); the manual rows in fp32 only, to keep the bench short. Where litgpt is
installed, its GPT in our llama's shape trains next to ours at each precision (`litgpt` rows).
Generation: 512 characters with and without the KV cache. The cost of logging the per-block
gradient norms at every step (anatomy/training/grad_norms.py), as training steps with and without it. With
`--parts`, each part alone, manual against fused (the wall-clock exam's rows,
anatomy/exams/wall_clock.py).
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

from anatomy.files.atomic import write_json
from anatomy.training.compiling import (
    backend_available,
    compile_wanted,
    compiled_or_eager,
    forward_backward,
    run_with_fallback,
)
from anatomy.config import CHAPTER_VOCAB, preset
from anatomy.training.devices import pick_device, sync
from anatomy.exams.wall_clock import interleaved_ms, paired_ratio, print_table, rows_of, time_ms, time_parts
from anatomy.generation.generate import sample
from anatomy.training.grad_norms import block_grad_norms
from anatomy.exams.litgpt_llama import INSTALL_HINT, LitgptLM, litgpt_classes, litgpt_version
from anatomy.model import MiniLM
from anatomy.precision import USED, native_bf16
from anatomy.data.tokenizer import CharTokenizer

MODELS = ("vanilla", "llama")
Variant = tuple[str, str, str]  # (model, impl, precision): one row of the training table
LITGPT_OF = {"fused": "litgpt", "fused+compile": "litgpt+compile"}  # our impl -> litgpt's row, same compile
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
        "--precision",
        nargs="+",
        choices=USED,
        help="precisions to time the fused variants in (default: fp32, and bf16 where the device multiplies it natively)",
    )
    parser.add_argument(
        "--no-litgpt", action="store_true", help="leave out the comparison with litgpt (timed where it is installed)"
    )
    parser.add_argument(
        "--parts",
        action="store_true",
        help="also time each part alone, manual against fused (the wall_clock exam's rows)",
    )
    parser.add_argument("--out", help="write the results as JSON here")


def bench_precisions(requested: list[str] | None, device) -> tuple[list[str], str | None]:
    """The precisions to time, and the line that says why bf16 is left out, where it is."""
    if requested:
        return [p for p in USED if p in requested], None
    if native_bf16(device):
        return ["fp32", "bf16"], None
    why = (
        f"no bf16 rows: this {device.type} has no native bfloat16 multiply, so bf16 would be emulated "
        "(time it anyway with --precision fp32 bf16)"
    )
    return ["fp32"], why


def training_variants(precisions: list[str], compiled: bool, litgpt: bool) -> list[Variant]:
    """Each model's impls at each precision. The manual impl runs in fp32 only, to keep the bench
    short: it is the slowest row, and what it asks (the cost of hand-written parts) fp32 answers."""
    fused = ["fused", "fused+compile"] if compiled else ["fused"]
    variants = []
    for name in MODELS:
        if "fp32" in precisions:
            variants.append((name, "manual", "fp32"))
        variants += [(name, impl, p) for p in precisions for impl in fused]
    if litgpt:
        variants += [("llama", LITGPT_OF[impl], p) for p in precisions for impl in fused]
    return variants


def build_model(variant: Variant, vocab_size: int, device):
    """The model a variant trains, before any compile; same seed, so same-impl rows share weights."""
    name, impl, _ = variant
    base = impl.removesuffix("+compile")
    torch.manual_seed(0)
    if base == "litgpt":
        return LitgptLM(preset(name, vocab_size=vocab_size)).to(device)
    return MiniLM(preset(name, vocab_size=vocab_size, impl=base)).to(device)


def bench_training(device, variants: list[Variant], vocab_size, batch_size, rounds, steps_per_round) -> list[dict]:
    setups = {}  # variant -> (model, the module a step calls, optimizer)
    for variant in variants:
        model = build_model(variant, vocab_size, device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
        # compiled as training compiles it: torch.compile(model), its forward under autocast
        forward = compiled_or_eager(model, variant[1].endswith("+compile"), device, variant[2])
        setups[variant] = (model, forward, optimizer)
    ctx_len = preset("vanilla").ctx_len
    data = torch.randint(0, vocab_size, (batch_size, ctx_len + 1), generator=torch.Generator().manual_seed(0))
    x, y = data[:, :-1].to(device), data[:, 1:].to(device)

    def step(forward, optimizer, precision):
        forward_backward(forward, optimizer, x, y, precision)
        optimizer.step()

    first_step_s = {}
    for variant, (model, forward, optimizer) in list(setups.items()):  # warm-up; compiles
        start = time.perf_counter()
        _, used = run_with_fallback(
            lambda module: step(module, optimizer, variant[2]), forward, model, label=f"{' '.join(variant)}: "
        )
        sync(device)
        first_step_s[variant] = time.perf_counter() - start
        if used is not forward:  # the compile failed: that variant has nothing to time
            del setups[variant]
            continue
        step(forward, optimizer, variant[2])
    sync(device)
    times = {variant: [] for variant in setups}
    for _ in range(rounds):
        for variant, (_, forward, optimizer) in setups.items():
            start = time.perf_counter()
            for _ in range(steps_per_round):
                step(forward, optimizer, variant[2])
            sync(device)
            times[variant].append((time.perf_counter() - start) / steps_per_round)
    rows = []
    for (name, impl, precision), samples in times.items():
        median = statistics.median(samples)
        rows.append(
            {
                "model": name,
                "impl": impl,
                "precision": precision,
                "step_ms": median * 1000,
                "min_ms": min(samples) * 1000,
                "max_ms": max(samples) * 1000,
                "tokens_per_s": batch_size * ctx_len / median,
                "rounds": len(samples),
                "first_step_s": first_step_s[(name, impl, precision)],
                "round_ms": [t * 1000 for t in samples],
            }
        )
    return rows


def print_training(rows: list[dict]) -> None:
    print(
        f"\n{'model':<9}{'impl':<16}{'precision':<11}{'ms/step':>9}{'min':>8}{'max':>8}{'tokens/s':>11}{'1st step s':>12}"
    )
    for r in rows:
        print(
            f"{r['model']:<9}{r['impl']:<16}{r['precision']:<11}{r['step_ms']:>9.1f}{r['min_ms']:>8.1f}"
            f"{r['max_ms']:>8.1f}{r['tokens_per_s']:>11,.0f}{r['first_step_s']:>12.1f}"
        )
    print("(manual: fp32 only, to keep the bench short)")


def variant_of(row: dict) -> Variant:
    return row["model"], row["impl"], row["precision"]


def step_ratio(rows: list[dict], first: Variant, second: Variant) -> dict[str, float]:
    """first / second step time, two ways. `of_medians`: ratio of the two medians. `paired`: the
    median of the per-round ratios; both ran in the same round, a few seconds apart, so a machine
    that speeds up or slows down over the run moves both alike and the ratio stays steadier."""
    by_variant = {variant_of(r): r for r in rows}
    a, b = by_variant[first], by_variant[second]
    paired = statistics.median(x / y for x, y in zip(a["round_ms"], b["round_ms"]))
    return {"of_medians": a["step_ms"] / b["step_ms"], "paired": paired}


def ratios_of(rows: list[dict], pairs: list[tuple[Variant, Variant]]) -> dict[str, dict[str, float]]:
    """step_ratio of each pair whose two variants were both timed, by "first / second" label."""
    timed = {variant_of(r) for r in rows}
    return {f"{'_'.join(a)} / {'_'.join(b)}": step_ratio(rows, a, b) for a, b in pairs if a in timed and b in timed}


# Models and impls compared with each other, at each precision; first / second step time.
MODEL_PAIRS = [
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


def trained_variant(name: str, precision: str, device, vocab_size: int) -> Variant:
    """The row `anatomy train --preset NAME` runs as, with compile=auto at this precision."""
    compiled = compile_wanted("auto", device, preset(name, vocab_size=vocab_size), precision)
    return name, "fused+compile" if compiled else "fused", precision


def training_ratios(rows: list[dict], precisions: list[str], device, vocab_size: int) -> dict[str, dict]:
    """The ratio groups of the report, each "first / second" step time (see RATIO_TITLES)."""
    timed = [variant_of(r) for r in rows]
    return {
        "ratios": ratios_of(rows, [((*a, p), (*b, p)) for p in precisions for a, b in MODEL_PAIRS]),
        "precision_ratios": ratios_of(rows, [(v, (*v[:2], "bf16")) for v in timed if v[2] == "fp32"]),
        "setting_ratios": ratios_of(
            rows,
            [
                (trained_variant(name, "fp32", device, vocab_size), trained_variant(name, "bf16", device, vocab_size))
                for name in MODELS
            ],
        ),
        "litgpt_ratios": ratios_of(
            rows, [(("llama", LITGPT_OF[impl], p), ("llama", impl, p)) for p in precisions for impl in LITGPT_OF]
        ),
    }


RATIO_TITLES = {
    "ratios": "step-time ratios (below 1: the first is faster)",
    "precision_ratios": "fp32 / bf16 step time, same model and impl (above 1: bf16 is faster)",
    "setting_ratios": (
        "what `anatomy train` runs by default (compile=auto, precision=fp32) / compile=auto with "
        "precision=bf16 (above 1: bf16 is faster)"
    ),
    "litgpt_ratios": "litgpt / ours, same shape and precision (above 1: ours is faster)",
}


def print_ratios(groups: dict[str, dict]) -> None:
    for key, ratios in groups.items():
        print(f"\n{RATIO_TITLES[key]}")
        if not ratios:
            print("  not measured in this run: a variant it compares was left out")
            continue
        width = max(map(len, ratios)) + 2
        print(f"  {'':<{width}}{'of medians':>11}{'per round':>11}")
        for label, value in ratios.items():
            print(f"  {label:<{width}}{value['of_medians']:>11.2f}{value['paired']:>11.2f}")


def parameter_count(model) -> int:
    return sum(p.numel() for p in model.parameters())


def litgpt_check(vocab_size: int) -> dict:
    """Whether litgpt is here to compare with, and its parameter count next to ours (the same
    count says the two are the same model)."""
    if litgpt_classes() is None:
        print(f"litgpt is not installed, so no comparison with it ({INSTALL_HINT} to add one)")
        return {"installed": False, "install": INSTALL_HINT}
    cfg = preset("llama", vocab_size=vocab_size)
    theirs, ours = parameter_count(LitgptLM(cfg)), parameter_count(MiniLM(cfg))
    verdict = "the same model" if theirs == ours else "they differ: not a like-for-like comparison"
    print(f"litgpt {litgpt_version()}, its GPT in our llama's shape: {theirs:,} parameters, ours {ours:,} ({verdict})")
    return {"installed": True, "version": litgpt_version(), "params": theirs, "ours_params": ours}


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
    precisions, bf16_missing = bench_precisions(args.precision, device)
    if bf16_missing:
        print(bf16_missing)
    litgpt = None if args.no_litgpt else litgpt_check(args.vocab_size)
    compiled = not args.no_compile and backend_available(device)  # both models, whatever `auto` picks
    variants = training_variants(precisions, compiled, litgpt=bool(litgpt and litgpt["installed"]))
    training = bench_training(device, variants, args.vocab_size, args.batch_size, args.rounds, args.steps_per_round)
    print_training(training)
    ratios = training_ratios(training, precisions, device, args.vocab_size)
    print_ratios(ratios)

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
                "precisions": precisions,
                "bf16_missing": bf16_missing,
                "litgpt": litgpt,
                "training": training,
                **ratios,
                "grad_norm_cost": norm_cost,
                "generation": generation,
                **parts,
            },
        )
        print(f"\nwritten to {args.out}")
    return 0
