"""A run's shape timed as the workflow trains it: the lanes of `python -m anatomy costs`
(anatomy/results/costs.py, which turns the times into minutes per run).

The workflow on a small CPU trains two runs side by side, one thread each (`snakemake --cores 2
--config train_threads=1`), and two runs beside each other are slower than one alone: they
share the memory bus and the caches. So a shape is timed the same way: each lane is a process of
its own on one thread, and every lane times the same shape at the same moment (a barrier starts
them together), so that what one lane measures is a step with its neighbour busy.

What is timed is the trainer's own code (anatomy/training/trainer.py), on random tokens of the
run's vocabulary (a step costs the same whatever the text says): training steps through
`forward_backward` (anatomy/training/compiling.py) on the module `compiled_or_eager` gives for
the run's compile setting, in the run's precision, then AdamW's step; and the trainer's
`evaluate` over a few batches of windows. The first UNTIMED_STEPS steps are timed apart: the
first one compiles where the step is compiled, and a real run pays that once. Not timed: the
gradient norms logged over the first 200 steps, the checkpoints written at each evaluation,
starting the process and reading the corpus (a few seconds a run).
"""

from __future__ import annotations

import multiprocessing
import queue
import threading
import time
from typing import Any

import torch

from anatomy.config import ModelConfig, TrainConfig
from anatomy.data.batches import batch_starts, eval_starts, windows_at
from anatomy.errors import AnatomyError
from anatomy.model import MiniLM
from anatomy.precision import allow_tf32, resolve_precision
from anatomy.training.compiling import compiled_or_eager, forward_backward, run_with_fallback
from anatomy.training.devices import pick_device, sync
from anatomy.training.trainer import evaluate

LANE_THREADS = 1  # the workflow's `train_threads=1`: two lanes on two cores
UNTIMED_STEPS = 2  # the first compiles (where the step is compiled), the second settles the memory
EVAL_BATCHES = 2  # evaluation batches timed, after one untimed
WAIT_S = 5  # how often the lanes' coordinator checks that every lane is still alive


def evaluation_windows(model_cfg: ModelConfig, train_cfg: TrainConfig, train_tokens: int, val_tokens: int) -> int:
    """The windows one evaluation reads: the whole validation split, and max_train_eval_windows of
    the training split, cut by the trainer's own rule (as its `open_or_resume` cuts them)."""
    ctx_len = model_cfg.ctx_len
    return len(eval_starts(val_tokens, ctx_len)) + len(
        eval_starts(train_tokens, ctx_len, train_cfg.max_train_eval_windows)
    )


def time_shape(shape: dict[str, Any], steps: int) -> dict[str, Any]:
    """One lane's timing of one shape ({"model": ModelConfig's fields, "train": TrainConfig's}):
    the seconds of each untimed and each timed training step, and of one evaluation window."""
    model_cfg = ModelConfig.from_dict(shape["model"], source="the shape's model")
    train_cfg = TrainConfig.from_dict(shape["train"], source="the shape's train settings")
    device = pick_device(train_cfg.device)
    precision = resolve_precision(train_cfg.precision, device)
    if precision == "fp32":
        allow_tf32(device)
    torch._dynamo.reset()  # a fresh compile per shape: as in a run's own process, not a cached one
    torch.manual_seed(0)
    model = MiniLM(model_cfg).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=train_cfg.lr, weight_decay=train_cfg.weight_decay)
    ctx_len, eval_batch = model_cfg.ctx_len, train_cfg.eval_batch_size
    n_tokens = ctx_len * ((EVAL_BATCHES + 1) * eval_batch + 1) + 1  # room for every window used below
    tokens = torch.randint(model_cfg.vocab_size, (n_tokens,), device=device)

    forward = compiled_or_eager(model, train_cfg.compile, device, precision)
    step_s = []
    for step in range(UNTIMED_STEPS + steps):
        x, y = windows_at(tokens, batch_starts(0, step, n_tokens, ctx_len, train_cfg.batch_size), ctx_len)
        tick = time.perf_counter()
        loss, forward = run_with_fallback(
            lambda module: forward_backward(module, optimizer, x, y, precision), forward, model
        )
        optimizer.step()
        loss.item()  # waits for the step, as the trainer's does
        sync(device)
        step_s.append(time.perf_counter() - tick)

    starts = eval_starts(n_tokens, ctx_len)
    evaluate(model, tokens, starts[:eval_batch], eval_batch, precision)  # untimed: the first pass settles
    tick = time.perf_counter()
    evaluate(model, tokens, starts[eval_batch : (EVAL_BATCHES + 1) * eval_batch], eval_batch, precision)
    sync(device)
    eval_window_s = (time.perf_counter() - tick) / (EVAL_BATCHES * eval_batch)
    return {
        "untimed_s": step_s[:UNTIMED_STEPS],
        "step_s": step_s[UNTIMED_STEPS:],
        "eval_window_s": eval_window_s,
        "compiled": forward is not model,
        "device": str(device),
        "torch_version": torch.__version__,
    }


def lane(index: int, shapes: list[dict[str, Any]], steps: int, barrier, results) -> None:
    """One lane (a process of its own): every shape in turn, each started with the other lanes.
    What goes wrong is sent as one line, and breaks the barrier so that no lane waits for good."""
    torch.set_num_threads(LANE_THREADS)
    try:
        for number, shape in enumerate(shapes):
            barrier.wait()
            results.put((index, number, time_shape(shape, steps)))
    except threading.BrokenBarrierError:
        return  # another lane failed and said so
    except BaseException as err:  # noqa: BLE001 - any failure, sent to the coordinator in words
        barrier.abort()
        results.put((index, None, str(err) if isinstance(err, AnatomyError) else f"{type(err).__name__}: {err}"))


def time_in_lanes(shapes: list[dict[str, Any]], steps: int, lanes: int, said=None) -> list[list[dict[str, Any]]]:
    """Every shape timed by `lanes` lanes side by side: for each shape, each lane's `time_shape`.
    `said(number, timings)` is called as each shape is done (the command's progress line)."""
    context = multiprocessing.get_context("spawn")  # a fresh interpreter: no threads inherited from this one
    barrier, results = context.Barrier(lanes), context.Queue()
    workers = [
        context.Process(target=lane, args=(index, shapes, steps, barrier, results), daemon=True)
        for index in range(lanes)
    ]
    for worker in workers:
        worker.start()
    timings: list[dict[int, dict[str, Any]]] = [{} for _ in shapes]
    try:
        done = 0
        while done < len(shapes):
            try:
                index, number, timing = results.get(timeout=WAIT_S)
            except queue.Empty:
                if stopped := [w for w in workers if not w.is_alive() and w.exitcode]:
                    raise AnatomyError(
                        f"a timing lane stopped (exit code {stopped[0].exitcode}): out of memory, or killed"
                    ) from None
                continue
            if number is None:
                raise AnatomyError(f"timing lane {index + 1}: {timing}")
            timings[number][index] = timing
            while done < len(shapes) and len(timings[done]) == lanes:
                if said is not None:
                    said(done, list(timings[done].values()))
                done += 1
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.terminate()
            worker.join()
    return [list(timing.values()) for timing in timings]
