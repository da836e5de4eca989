"""Train one model (one config, one seed, one corpus) into a run folder.

`python -m anatomy train --data results/corpus --out results/runs/llama/seed42 --preset llama`

What makes runs comparable: the batches depend only on (seed, step), never on the model, so
two runs that differ only in their parts see byte-identical batches in the same order. The
evaluation is deterministic: fixed windows over the whole validation split.

What makes a run safe: every eval writes `last.pt` atomically with model, optimizer, RNG and
the metrics so far; a run started again resumes from there and ends with the same numbers.
Every run also logs each block's gradient norm (anatomy/grad_norms.py) into grad_norms.jsonl,
kept the same way as metrics.jsonl.
A loss that turns NaN/inf ends the run as a result (`diverged: true`), not as a crash.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from anatomy.atomic import atomic_path, check_folder_target, remove_stale_temporaries, write_json
from anatomy.compiling import compiled_or_eager, run_with_fallback
from anatomy.config import ModelConfig, TrainConfig, parse_value, preset
from anatomy.errors import AnatomyError
from anatomy.grad_norms import GRAD_NORMS_FILE, block_grad_norms, norms_row, should_log
from anatomy.locks import held_lock, lifeline_lost
from anatomy.model import MiniLM
from anatomy.run_files import read_run_config, read_summary
from anatomy.tokenizer import check_windows, load_tokenized

# ---------------------------------------------------------------------------------------------
# Resolving a run's settings from a preset and `key=value` overrides
# ---------------------------------------------------------------------------------------------

MODEL_FIELDS = {f.name for f in dataclasses.fields(ModelConfig)}
TRAIN_FIELDS = {f.name for f in dataclasses.fields(TrainConfig)}


def split_overrides(pairs: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """`key=value` texts into (model overrides, train overrides); `model.`/`train.` prefixes allowed."""
    model, train = {}, {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise AnatomyError(f"override {pair!r} is not of the form key=value")
        section, _, name = key.rpartition(".")
        if section not in ("", "model", "train"):
            raise AnatomyError(f"override {pair!r}: prefix must be 'model.' or 'train.', not {section + '.'!r}")
        if name in MODEL_FIELDS and section != "train":
            model[name] = parse_value(ModelConfig, name, raw)
        elif name in TRAIN_FIELDS and section != "model":
            train[name] = parse_value(TrainConfig, name, raw)
        else:
            raise AnatomyError(
                f"override {pair!r}: unknown key {name!r}; model keys: {', '.join(sorted(MODEL_FIELDS))}; "
                f"train keys: {', '.join(sorted(TRAIN_FIELDS))}"
            )
    return model, train


def resolve_model_config(preset_name: str, overrides: dict[str, Any], vocab_size: int) -> ModelConfig:
    """The preset, with the fused kernels unless asked otherwise, the data's vocabulary, and overrides."""
    if "vocab_size" in overrides and overrides["vocab_size"] != vocab_size:
        raise AnatomyError(
            f"vocab_size={overrides['vocab_size']} does not match the data's vocabulary of {vocab_size}"
        )
    return preset(preset_name, **{"impl": "fused", **overrides, "vocab_size": vocab_size})


def pick_device(requested: str) -> torch.device:
    if requested == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise AnatomyError(f"device {requested!r} was asked for, but CUDA is not available here; use device=auto")
    if requested == "mps" and not torch.backends.mps.is_available():
        raise AnatomyError("device 'mps' was asked for, but MPS is not available here; use device=auto")
    return torch.device(requested)


# ---------------------------------------------------------------------------------------------
# Data: batches that depend only on (seed, step); fixed evaluation windows
# ---------------------------------------------------------------------------------------------


def batch_starts(seed: int, step: int, n_tokens: int, ctx_len: int, batch_size: int) -> np.ndarray:
    """Window starts of the batch for `step`: a pure function of (seed, step), independent of the
    model and of torch's RNG, so every model sees the same batches and a resumed run continues
    exactly where it stopped."""
    rng = np.random.default_rng([seed, step])
    return rng.integers(0, n_tokens - ctx_len, size=batch_size)


def windows_at(data: torch.Tensor, starts: np.ndarray, ctx_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs (B, ctx_len) and next-character targets (B, ctx_len) for the given window starts."""
    offsets = torch.as_tensor(starts, dtype=torch.long)[:, None] + torch.arange(ctx_len + 1)
    chunk = data[offsets]
    return chunk[:, :-1], chunk[:, 1:]


def eval_starts(n_tokens: int, ctx_len: int, max_windows: int | None = None) -> np.ndarray:
    """Fixed, non-overlapping windows covering the split (or `max_windows` of them, evenly spread)."""
    starts = np.arange(0, n_tokens - ctx_len, ctx_len)
    if max_windows is not None and len(starts) > max_windows:
        starts = starts[np.linspace(0, len(starts) - 1, max_windows).round().astype(int)]
    return starts


@torch.no_grad()
def evaluate(model: MiniLM, data: torch.Tensor, starts: np.ndarray, batch_size: int) -> float:
    """Mean next-character loss over the given windows (every target counted once)."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(starts), batch_size):
        x, y = windows_at(data, starts[i : i + batch_size], model.cfg.ctx_len)
        _, loss = model(x, y)
        total += loss.item() * y.numel()
        count += y.numel()
    model.train(was_training)
    return total / count


def learning_rate(cfg: TrainConfig, step: int) -> float:
    """Linear warmup over warmup_steps, then constant (or cosine down to min_lr)."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    if cfg.schedule == "constant":
        return cfg.lr
    progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    return cfg.min_lr + 0.5 * (cfg.lr - cfg.min_lr) * (1 + math.cos(math.pi * progress))


# ---------------------------------------------------------------------------------------------
# The run folder
# ---------------------------------------------------------------------------------------------


class RunFolder:
    """Paths of one run, and the few rules about them (summary.json last = finished)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.config = self.root / "config.json"
        self.metrics = self.root / "metrics.jsonl"
        self.grad_norms = self.root / GRAD_NORMS_FILE
        self.summary = self.root / "summary.json"
        self.last = self.root / "last.pt"
        self.best = self.root / "best.pt"

    def checkpoint(self, which: str) -> Path:
        if which not in ("last", "best"):
            raise AnatomyError(f"checkpoint {which!r} is not valid: expected 'last' or 'best'")
        path = self.last if which == "last" else self.best
        if not path.is_file():
            raise AnatomyError(f"{path}: no such checkpoint (has this run trained yet?)")
        return path

    def previous_settings(self) -> dict | None:
        """The settings of the run already in this folder, if any (from config.json or last.pt)."""
        if self.config.is_file():
            return run_settings(read_run_config(self.config))
        if self.last.is_file():
            return load_checkpoint(self.last).get("settings")
        return None

    def locked(self):
        """Hold this folder's lock: one trainer per run folder. A second one waits for the first
        to stop, then finds the run finished or resumes it; a killed holder releases it at once."""
        return held_lock(self.root, on_wait=lambda: print(
            f"{self.root}: another trainer is writing this folder; waiting for it to stop", flush=True))

    def remove_leftovers(self) -> None:
        """Temporary files of writes that were killed half way (a SIGKILL during torch.save).
        Only while holding the lock: then no other trainer can be writing them."""
        for path in (self.config, self.metrics, self.grad_norms, self.summary, self.last, self.best):
            remove_stale_temporaries(path)

    def clear(self) -> None:
        for path in (self.summary, self.last, self.best, self.metrics, self.grad_norms, self.config,
                     self.root / "samples.json"):
            path.unlink(missing_ok=True)

    def write_metrics(self, rows: list[dict]) -> None:
        write_lines(self.metrics, rows)

    def append_metric(self, row: dict) -> None:
        append_line(self.metrics, row)

    def write_grad_norms(self, rows: list[dict]) -> None:
        write_lines(self.grad_norms, rows)

    def append_grad_norms(self, row: dict) -> None:
        append_line(self.grad_norms, row)


def write_lines(path: Path, rows: list[dict]) -> None:
    """A .jsonl file, whole and atomically: one JSON object per line."""
    with atomic_path(path) as tmp:
        tmp.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def append_line(path: Path, row: dict) -> None:
    # Appending is not atomic, but last.pt holds every row: a resume rewrites the file whole.
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")


def save_checkpoint(path: Path, state: dict) -> None:
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


# What any reader of a checkpoint needs (generation: nothing more), and what resuming needs too.
CHECKPOINT_KEYS = ("model", "config", "vocab")
RESUME_KEYS = (*CHECKPOINT_KEYS, "optimizer", "rng", "state")


def load_checkpoint(path: Path, needs: tuple[str, ...] = CHECKPOINT_KEYS) -> dict:
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # a truncated or foreign file: say which and why
        raise AnatomyError(f"{path}: cannot read this checkpoint ({type(err).__name__}: {err})") from None
    if not isinstance(saved, dict):
        missing = list(needs)
    else:
        missing = [key for key in needs if key not in saved]
        if not missing and not (isinstance(saved["config"], dict) and "model" in saved["config"]):
            missing = ["config.model"]
    if missing:  # a file of someone else's torch.save, not a KeyError later
        raise AnatomyError(f"{path}: not a checkpoint written by `anatomy train` (missing {', '.join(missing)})")
    return saved


def finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


def forward_backward(module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Loss and fresh gradients for one batch; `module` is the model or its compiled version."""
    optimizer.zero_grad(set_to_none=True)
    _, loss = module(x, y)
    loss.backward()
    return loss


# ---------------------------------------------------------------------------------------------
# The training loop
# ---------------------------------------------------------------------------------------------


class Progress:
    """A tqdm bar with loss and ETA on a terminal; plain lines at every eval in a log file."""

    def __init__(self, total: int, initial: int, label: str):
        self.interactive = sys.stderr.isatty()
        self.total, self.label, self.start, self.first = total, label, time.perf_counter(), initial
        self.bar = None
        if self.interactive:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=initial, desc=label, unit="step", dynamic_ncols=True)

    def step(self, loss: float) -> None:
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(loss=f"{loss:.3f}", refresh=False)

    def eval(self, row: dict) -> None:
        text = f"val {row['val_loss']:.4f}" if row["val_loss"] is not None else "val -"
        if self.bar is not None:
            self.bar.set_postfix_str(f"train {row['train_loss']:.3f} {text}")
            return
        done = row["step"] - self.first
        elapsed = time.perf_counter() - self.start
        eta = elapsed / done * (self.total - row["step"]) if done > 0 else float("nan")
        print(f"{self.label} step {row['step']}/{self.total} train {row['train_loss']:.4f} {text} "
              f"lr {row['lr']:.2e} | {elapsed:.0f}s elapsed, ETA {eta:.0f}s", flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def train(
    data_dir: str | Path,
    out_dir: str | Path,
    preset_name: str = "vanilla",
    model_overrides: dict[str, Any] | None = None,
    train_overrides: dict[str, Any] | None = None,
    tags: dict[str, str] | None = None,
    restart_on_change: bool = False,
) -> dict:
    """Train (or resume, or skip a finished) run; returns its summary."""
    check_folder_target(out_dir, "--out")
    tokenizer, train_ids, val_ids = load_tokenized(data_dir)
    model_cfg = resolve_model_config(preset_name, model_overrides or {}, tokenizer.vocab_size)
    train_cfg = TrainConfig.from_dict(train_overrides or {}, source="train overrides")
    check_windows(len(train_ids), len(val_ids), model_cfg.ctx_len, Path(data_dir))
    device = pick_device(train_cfg.device)  # may refuse (no CUDA here): before anything is written

    run = RunFolder(out_dir)
    resolved = {
        "preset": preset_name,
        "model": model_cfg.to_dict(),
        "train": train_cfg.to_dict(),
        "tags": dict(tags or {}),
        "data": {"dir": Path(data_dir).as_posix(), "vocab_size": tokenizer.vocab_size,
                 "train_tokens": len(train_ids), "val_tokens": len(val_ids)},
    }
    run.root.mkdir(parents=True, exist_ok=True)
    with run.locked():
        return train_in_folder(run, resolved, (tokenizer, train_ids, val_ids), model_cfg, train_cfg, device,
                               restart_on_change)


def train_in_folder(run: RunFolder, resolved: dict, data: tuple, model_cfg: ModelConfig, train_cfg: TrainConfig,
                    device: torch.device, restart_on_change: bool) -> dict:
    """train(), once the settings are checked and this process alone writes the run folder."""
    tokenizer, train_ids, val_ids = data
    run.remove_leftovers()
    finished = settle_folder(run, resolved, restart_on_change)
    if finished is not None:
        return finished
    write_json(run.config, resolved)

    if train_cfg.threads:
        torch.set_num_threads(train_cfg.threads)
    torch.manual_seed(train_cfg.seed)  # model initialisation only; batches have their own RNG
    model = MiniLM(model_cfg).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=train_cfg.lr, weight_decay=train_cfg.weight_decay)
    train_data = torch.as_tensor(train_ids.astype(np.int64)).to(device)
    val_data = torch.as_tensor(val_ids.astype(np.int64)).to(device)
    val_windows = eval_starts(len(val_ids), model_cfg.ctx_len)
    train_windows = eval_starts(len(train_ids), model_cfg.ctx_len, train_cfg.max_train_eval_windows)

    # Everything besides weights and optimizer that a resumed run needs to continue exactly.
    state = {"step": 0, "metrics": [], "grad_norms": [], "best_val_loss": None, "best_step": None,
             "elapsed_s": 0.0, "step_times": [], "batch_digest": ""}
    if run.last.is_file():  # resume: model, optimizer, RNG, metrics and data position (= step)
        saved = load_checkpoint(run.last, needs=RESUME_KEYS)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        torch.set_rng_state(saved["rng"])
        state = saved["state"]
        print(f"{run.root}: resuming at step {state['step']}", flush=True)
    run.write_metrics(state["metrics"])  # drops rows written after the checkpoint
    # (a checkpoint from before gradient norms were logged has none: the log starts at the resume)
    run.write_grad_norms(state.setdefault("grad_norms", []))

    def log_grad_norms(step: int) -> None:
        # the model's own blocks: a compiled step fills the same parameters' .grad
        row = norms_row(step, block_grad_norms(model.blocks))
        state["grad_norms"].append(row)
        run.append_grad_norms(row)

    def checkpoint_state() -> dict:
        return {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "rng": torch.get_rng_state(), "state": state,
                "config": {"model": model_cfg.to_dict(), "train": train_cfg.to_dict()},
                "settings": run_settings(resolved),
                "vocab": tokenizer.chars}

    def metric_row(step: int, lr: float, train_loss: float | None, val_loss: float | None) -> dict:
        return {"step": step, "train_loss": train_loss, "val_loss": val_loss, "lr": lr,
                "tokens_seen": step * train_cfg.batch_size * model_cfg.ctx_len,
                "elapsed_s": round(state["elapsed_s"] + time.perf_counter() - clock, 3)}

    # The module the training steps call: the model itself, or torch.compile's wrapper around it
    # (same parameters; evaluation and checkpoints use the model directly).
    forward = compiled_or_eager(model, train_cfg.compile, device)
    progress = Progress(train_cfg.steps, state["step"], run.root.name if run.root.name else "run")
    diverged_step = None
    clock = time.perf_counter()
    model.train()
    step = state["step"]
    while step < train_cfg.steps:
        lr = learning_rate(train_cfg, step)
        for group in optimizer.param_groups:
            group["lr"] = lr
        starts = batch_starts(train_cfg.seed, step, len(train_ids), model_cfg.ctx_len, train_cfg.batch_size)
        # A running fingerprint of every batch seen: equal digests = identical batch sequences.
        state["batch_digest"] = hashlib.sha256(state["batch_digest"].encode() + starts.tobytes()).hexdigest()
        x, y = windows_at(train_data, starts, model_cfg.ctx_len)
        tick = time.perf_counter()
        loss, forward = run_with_fallback(lambda module: forward_backward(module, optimizer, x, y),
                                          forward, model, label=f"{run.root}: ")
        logged = should_log(step + 1, train_cfg.eval_every, train_cfg.steps)
        if logged:  # before clipping: the gradients as backward made them
            log_grad_norms(step + 1)
        if train_cfg.grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), train_cfg.grad_clip)
        optimizer.step()
        loss_value = loss.item()  # also waits for the device, so the step time is real
        state["step_times"].append(time.perf_counter() - tick)
        step += 1
        progress.step(loss_value)
        if lifeline_lost():  # the Snakemake that started this run was killed: no orphans
            raise AnatomyError(f"{run.root}: the workflow that started this run has stopped, so this run "
                               f"stops too, at step {step}; it resumes from its last checkpoint when started again")

        if not math.isfinite(loss_value):
            diverged_step = step
            if not logged:  # the step that diverged is always in the log (AdamW leaves .grad as it is)
                log_grad_norms(step)
            row = {**metric_row(step, lr, None, None), "diverged": True}
            state["metrics"].append(row)
            run.append_metric(row)
            break

        if step % train_cfg.eval_every == 0 or step == train_cfg.steps:
            row = metric_row(
                step, lr,
                train_loss=evaluate(model, train_data, train_windows, train_cfg.eval_batch_size),
                val_loss=finite_or_none(evaluate(model, val_data, val_windows, train_cfg.eval_batch_size)),
            )
            state["metrics"].append(row)
            run.append_metric(row)
            progress.eval(row)
            best = state["best_val_loss"]
            if row["val_loss"] is not None and (best is None or row["val_loss"] < best):
                state["best_val_loss"], state["best_step"] = row["val_loss"], step
                save_checkpoint(run.best, checkpoint_state())
            state["step"] = step
            state["elapsed_s"] = row["elapsed_s"]
            clock = time.perf_counter()
            save_checkpoint(run.last, checkpoint_state())
    progress.close()

    state["step"] = step
    if diverged_step is not None:
        save_checkpoint(run.last, checkpoint_state())
    summary = _summary(model, state, diverged_step, device, forward is not model, train_cfg, model_cfg)
    write_json(run.summary, summary)  # last: its presence means the run is finished
    return summary


def settle_folder(run: RunFolder, resolved: dict, restart_on_change: bool) -> dict | None:
    """Check what the folder already holds against the run asked for. Returns the summary of a
    finished run with the same settings (nothing left to do), or None: train, fresh or resumed.
    A run whose settings cannot be checked counts as different: nothing is trusted unchecked."""
    previous = run.previous_settings()
    if previous is None and run.summary.is_file():
        problem = "holds summary.json, but neither config.json nor last.pt to tell which settings made it"
    elif previous is not None and previous != run_settings(resolved):
        problem = f"holds a run with different settings ({settings_difference(previous, run_settings(resolved))})"
    else:
        problem = None
    if problem is not None:
        if not restart_on_change:
            raise AnatomyError(f"{run.root}: this folder {problem}; "
                               f"use another --out, delete the folder, or pass --restart-on-change")
        print(f"{run.root}: this folder {problem}; starting over", flush=True)
        run.clear()
        return None
    if not run.summary.is_file():
        return None
    summary = read_summary(run.summary)
    if not run.config.is_file():  # last.pt vouched for the settings: put back what was lost
        write_json(run.config, resolved)
    print(f"{run.root}: already finished, nothing to do")
    return summary


def settings_difference(before: dict, after: dict, prefix: str = "") -> str:
    """The first few fields that differ, e.g. "model.n_layer: 2 in the folder, 3 asked for"."""
    differences = []
    for key in sorted(set(before) | set(after), key=str):
        old, new = before.get(key), after.get(key)
        if isinstance(old, dict) and isinstance(new, dict):
            if old != new:
                differences.append(settings_difference(old, new, f"{prefix}{key}."))
        elif old != new:
            differences.append(f"{prefix}{key}: {old!r} in the folder, {new!r} asked for")
    return "; ".join(differences[:3]) + ("; ..." if len(differences) > 3 else "")


def run_settings(resolved: dict) -> dict:
    """What defines a run's numbers: model, training and data, but not where or how it runs (device,
    threads and compile may change between a kill and a resume) nor its tags (labels, not settings)."""
    train = {k: v for k, v in resolved["train"].items() if k not in ("device", "threads", "compile")}
    return {"preset": resolved["preset"], "model": resolved["model"], "train": train, "data": resolved["data"]}


def _summary(model, state, diverged_step, device, compiled, train_cfg, model_cfg) -> dict:
    metrics = state["metrics"]
    evaluated = [m for m in metrics if m.get("val_loss") is not None]
    step_time = statistics.median(state["step_times"]) if state["step_times"] else None
    return {
        "params": model.num_params(),
        "best_val_loss": state["best_val_loss"],
        "best_step": state["best_step"],
        "final_train_loss": evaluated[-1]["train_loss"] if evaluated else None,
        "final_val_loss": evaluated[-1]["val_loss"] if evaluated else None,
        "step_time_s": step_time,
        "tokens_per_s": train_cfg.batch_size * model_cfg.ctx_len / step_time if step_time else None,
        "steps_done": state["step"],
        "device": str(device),
        "compiled": compiled,  # whether the training steps ran through torch.compile
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "diverged": diverged_step is not None,
        "diverged_step": diverged_step,
        "status": "diverged" if diverged_step is not None else "done",
        "batch_digest": state["batch_digest"],
        "elapsed_s": metrics[-1]["elapsed_s"] if metrics else 0.0,
    }


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


def parse_tags(pairs: list[str]) -> dict[str, str]:
    tags = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise AnatomyError(f"--tag {pair!r} is not of the form key=value")
        tags[key] = value
    return tags


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", required=True, help="folder written by `anatomy tokenize`")
    parser.add_argument("--out", required=True, help="the run folder (created; resumed if it holds a run)")
    parser.add_argument("--preset", default="vanilla", help="vanilla, llama or debug (default vanilla)")
    parser.add_argument("--tag", action="append", default=[], metavar="KEY=VALUE",
                        help="metadata stored with the run (experiment, group, part, direction, ...)")
    parser.add_argument("--restart-on-change", action="store_true",
                        help="if --out holds a run with other settings, discard it and start over "
                             "(default: refuse); a run with the same settings is always resumed")
    parser.add_argument("overrides", nargs="*", metavar="key=value",
                        help="any ModelConfig or TrainConfig field, e.g. n_layer=12 warmup_steps=0 seed=7")


def run(args: argparse.Namespace) -> int:
    model_overrides, train_overrides = split_overrides(args.overrides)
    summary = train(args.data, args.out, args.preset, model_overrides, train_overrides, parse_tags(args.tag),
                    restart_on_change=args.restart_on_change)
    if summary["diverged"]:
        print(f"{args.out}: diverged at step {summary['diverged_step']} (recorded; not an error)")
    else:
        print(f"{args.out}: best val {summary['best_val_loss']:.4f} at step {summary['best_step']}, "
              f"final val {summary['final_val_loss']:.4f}, {summary['step_time_s'] * 1000:.1f} ms/step")
    return 0
