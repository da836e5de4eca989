"""The Listen page under Streamlit's AppTest, on a working folder laid out as a fresh clone has it.

The runs are real tiny runs trained on the workflow's default corpus (results/corpus, built from
data/posts and recorded relative, as the workflow records it); a fresh clone ships such runs but
not their corpus folder, which the page must build itself to mark what is copied.
"""

from __future__ import annotations

import re
import shutil
import sys
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from anatomy.generation import generate
from anatomy.files.atomic import write_json
from anatomy.data.default_corpus import build_default_corpus
from anatomy.generation.memorisation import Memorisation
from anatomy.results.collect import collect
from anatomy.training.trainer import train
from run_folders import LLAMA_PARTS

from dashboard_pages import no_reference, open_page  # noqa: F401 (no_reference: a fixture)

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # the dashboard is an app folder, not an installed package
    sys.path.insert(0, str(REPO_ROOT))
from dashboard.sample_text import highlighted, merged_spans  # noqa: E402

CORPUS = Path("results/corpus")  # relative: the page and the runs name it from the working folder
# Two posts, each repeated so that a tiny model learns (and copies) them within a few steps; the
# front matter is the corpus step's to drop
POSTS = {
    "lunyu.md": "---\ntitle: 学而\n---\n" + "## 学而\n子曰：学而时习之，不亦说乎？有朋自远方来，不亦乐乎？\n" * 30,
    "fox.md": "+++\ntitle = 'fox'\n+++\n" + "## fox\nThe quick brown fox jumps over the lazy dog.\n" * 12,
}
FAST = {"steps": 80, "eval_every": 20, "batch_size": 8, "lr": 1e-2, "threads": 1, "compile": False, "seed": 42}


@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory) -> Path:
    """A working folder with data/posts, the workflow's config, and two tiny runs (vanilla, llama)
    trained on results/corpus and collected into results/anatomy.duckdb; then results/corpus is
    removed, as a fresh clone lacks it."""
    root = tmp_path_factory.mktemp("fresh_clone")
    (root / "data" / "posts").mkdir(parents=True)
    for name, text in POSTS.items():
        (root / "data" / "posts" / name).write_text(text, encoding="utf-8")
    (root / "workflow").mkdir()
    (root / "workflow" / "config.yaml").write_text("corpus: data/posts\n", encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        build_default_corpus()
        for name, parts in (("vanilla", {}), ("llama", LLAMA_PARTS)):
            run = Path("results/runs") / name / "seed42"
            train(CORPUS, run, "debug", parts, FAST, {"experiment": name, "description": name, "group": "headline"})
            write_json(run / "samples.json", [generate.generate_samples(run, chars=40)])
        collect(Path("results/runs"), Path("results/anatomy.duckdb"), Path("results/results.json"))
    shutil.rmtree(root / CORPUS)
    return root


@pytest.fixture
def listen(fresh_clone, monkeypatch) -> AppTest:
    """The Listen page, opened from the fresh clone's folder."""
    monkeypatch.chdir(fresh_clone)
    return open_page("results/anatomy.duckdb", "listen", monkeypatch)


def generate_with(app: AppTest, runs: list[str], **controls) -> AppTest:
    app.multiselect(key="listen_runs").set_value(runs)
    for key, value in controls.items():
        app.number_input(key=f"listen_{key}").set_value(value)
    app.button(key="listen_go").click().run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def pane_captions(app: AppTest) -> list[str]:
    return [caption.value for caption in app.caption if "characters/s" in caption.value]


def shown_texts(app: AppTest) -> list[str]:
    return [h.proto.body for h in app.get("html") if "<pre" in h.proto.body]


def everything_said(app: AppTest) -> str:
    return "\n".join(str(e.value) for kind in ("markdown", "caption", "info", "error") for e in getattr(app, kind))


def test_copies_are_marked_on_a_fresh_clone_whose_corpus_is_built_on_first_use(listen, fresh_clone, tmp_path):
    from anatomy.cli import main

    shutil.rmtree(fresh_clone / CORPUS, ignore_errors=True)  # as the clone came, whatever ran before
    generate_with(listen, ["vanilla · seed 42"], temperature=0.0, chars=60)  # greedy: it recites
    # built where the workflow builds it, and what the workflow's own two commands write
    by_hand = tmp_path / "by_hand"
    assert main(["corpus", "data/posts", "--out", str(by_hand)]) == 0
    assert main(["tokenize", str(by_hand / "corpus.txt"), "--out", str(by_hand)]) == 0
    for name in ("corpus.txt", "stats.json", "vocab.json", "train.npy", "val.npy"):
        assert (fresh_clone / CORPUS / name).read_bytes() == (by_hand / name).read_bytes(), name
    assert not list((fresh_clone / CORPUS).glob(".*.tmp"))  # no temporaries left beside them
    # the copies are measured against it and marked
    (pane,) = listen.session_state["listen_history"][0]["panes"].values()
    expected = Memorisation(CORPUS)(pane["text"], "## ")["copied_spans"]
    assert expected and pane["spans"] == expected
    (shown,) = shown_texts(listen)
    assert shown.count("<mark") == len(merged_spans(expected))  # overlapping spans are marked as one
    (caption,) = pane_captions(listen)
    assert "copied" in caption and "not measured" not in caption
    # and the page says that it built the folder, and from what
    assert "`results/corpus` was not here: built it from `data/posts`" in everything_said(listen)


def test_each_pane_shows_its_own_models_speed(listen, monkeypatch):
    # A fake clock that only the streams move: each llama character takes 0.1 s, each vanilla one
    # 0.01 s. Shared between the panes, both would read (2 x 20) / 2.2 s = 18 characters/s.
    clock = [0.0]
    real_stream = generate.stream

    def timed_stream(model, *args, **kwargs):
        tick = 0.1 if model.cfg.pos_type == "rope" else 0.01
        for item in real_stream(model, *args, **kwargs):
            clock[0] += tick
            yield item

    monkeypatch.setattr(generate, "stream", timed_stream)
    monkeypatch.setattr(time, "perf_counter", lambda: clock[0])
    generate_with(listen, ["vanilla · seed 42", "llama · seed 42"], chars=20)
    rates = [re.search(r"· ([\d,]+) characters/s", caption).group(1) for caption in pane_captions(listen)]
    assert rates == ["100", "10"]  # vanilla's pane, then llama's


def test_generated_text_survives_a_control_change_and_sits_beside_the_next(listen):
    generate_with(listen, ["vanilla · seed 42", "llama · seed 42"], chars=20, temperature=0.8)
    first = listen.session_state["listen_history"][0]
    first_shown = [highlighted(pane["text"], pane["spans"]) for pane in first["panes"].values()]
    assert shown_texts(listen) == first_shown

    listen.number_input(key="listen_temperature").set_value(1.5).run()
    assert shown_texts(listen) == first_shown  # still there, under the settings that made it
    assert "**Generation 1** · `last` · temperature 0.8 · seed 0 · prefix `'## '`" in everything_said(listen)

    listen.button(key="listen_go").click().run()
    second = listen.session_state["listen_history"][0]
    assert second["settings"]["temperature"] == 1.5
    second_shown = [highlighted(pane["text"], pane["spans"]) for pane in second["panes"].values()]
    assert shown_texts(listen) == second_shown + first_shown  # the newest first, the old one below
    said = everything_said(listen)
    assert (
        "**Generation 2** · `last` · temperature 1.5" in said and "**Generation 1** · `last` · temperature 0.8" in said
    )

    listen.button(key="listen_clear").click().run()
    assert shown_texts(listen) == [] and listen.session_state["listen_history"] == []


def test_only_the_last_few_generations_are_kept(listen):
    keep = 4  # the page's HISTORY
    for seed in range(keep + 1):
        generate_with(listen, ["vanilla · seed 42"], chars=5, seed=seed)
    numbers = [record["number"] for record in listen.session_state["listen_history"]]
    assert numbers == list(range(keep + 1, 1, -1))
    assert len(shown_texts(listen)) == keep


def test_the_cache_note_gives_the_runs_ctx_len_and_why_the_size_drops(listen):
    generate_with(listen, ["vanilla · seed 42"], chars=10)
    (short,) = listen.session_state["listen_history"][0]["panes"].values()
    generate_with(listen, ["vanilla · seed 42"], chars=40)
    (long,) = listen.session_state["listen_history"][0]["panes"].values()
    # the debug preset's ctx_len is 16: 3 + 9 tokens read fill 12 positions; 3 + 39 = 42 have
    # jumped the window ahead by 8s to position 32, leaving 10
    assert (short["ctx_len"], short["positions"], long["positions"]) == (16, 12, 10)
    # the positions counted are the cache's own: its bytes per position do not change
    assert long["cache_bytes"] / long["positions"] == short["cache_bytes"] / short["positions"]
    caption = pane_captions(listen)[0]  # the newest generation's
    assert f"KV cache {long['cache_bytes'] / 1024:,.1f} KiB for 10 positions (at most ctx_len = 16" in caption
    assert "the window jumps ahead by 8" in caption


def test_a_corpus_that_cannot_be_built_is_said_and_nothing_is_written(listen, fresh_clone, monkeypatch):
    from anatomy.data import default_corpus

    shutil.rmtree(fresh_clone / CORPUS, ignore_errors=True)
    monkeypatch.setattr(default_corpus, "workflow_source", lambda: Path("data/nowhere"))
    generate_with(listen, ["vanilla · seed 42"], chars=10)
    (caption,) = pane_captions(listen)
    assert "copies not measured: `results/corpus` is not here, and building it failed: data/nowhere" in caption
    assert not (fresh_clone / CORPUS).exists()
    assert listen.session_state["listen_texts"]["vanilla · seed 42"].startswith("## ")  # the text still comes


def test_each_run_streams_in_its_own_precision(listen, fresh_clone, monkeypatch):
    """As `python -m anatomy generate` does: a bf16 run generates under bf16 autocast, an fp32 one not."""
    import json

    config = fresh_clone / "results" / "runs" / "llama" / "seed42" / "config.json"
    original = config.read_text(encoding="utf-8")
    recorded = {}
    real_stream = generate.stream

    def recording(model, *args, precision="fp32", **kwargs):
        recorded[model.cfg.ffn_type] = precision  # llama: swiglu, vanilla: gelu
        return real_stream(model, *args, precision=precision, **kwargs)

    monkeypatch.setattr(generate, "stream", recording)
    try:
        trained = json.loads(original)
        trained["train"]["precision"] = "bf16"
        config.write_text(json.dumps(trained), encoding="utf-8")
        generate_with(listen, ["vanilla · seed 42", "llama · seed 42"], chars=5)
    finally:
        config.write_text(original, encoding="utf-8")
    assert recorded == {"gelu": "fp32", "swiglu": "bf16"}
