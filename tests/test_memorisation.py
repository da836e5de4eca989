"""Memorisation: spans copied verbatim from the training text, found with a suffix array."""

from __future__ import annotations

import json
import random
from pathlib import Path

import duckdb
import pytest

from anatomy.cli import main
from anatomy.errors import AnatomyError
from anatomy.generation.memorisation import (
    Corpus,
    Memorisation,
    SuffixIndex,
    copied_spans,
    covered_fraction,
    suffix_array,
)
from anatomy.results.collect import collect
from anatomy.data.tokenizer import tokenize_corpus
from run_folders import write_run_folder

# Two posts of training text, then the validation tail (the last 10% of the corpus).
POSTS = [
    ("a.md", "## 关雎\n\n关关雎鸠，在河之洲。窈窕淑女，君子好逑。\n参差荇菜，左右流之。窈窕淑女，寤寐求之。"),
    (
        "b.md",
        "## 学而\n\n子曰：学而时习之，不亦说乎？有朋自远方来，不亦乐乎？人不知而不愠，不亦君子乎？\n"
        "有子曰：其为人也孝弟，而好犯上者，鲜矣。"
        * 3
        # said once, at the very end: the validation tail holds text training never saw
        + "曾子曰：吾日三省吾身：为人谋而不忠乎？与朋友交而不信乎？传不习乎？",
    ),
]


def brute_force_longest(text: str, query: str, i: int) -> int:
    for length in range(i + 1, 0, -1):
        if query[i - length + 1 : i + 1] in text:
            return length
    return 0


def test_the_suffix_array_sorts_every_suffix_as_python_compares_strings():
    rng = random.Random(1)
    texts = ["", "a", "banana", "aaaaaaaaaaaaaaaaaaaa", "关关雎鸠，关关雎鸠\n", "\U0001f600a\u00e9z"]
    texts += ["".join(rng.choice("ab关\n") for _ in range(rng.randint(1, 60))) for _ in range(200)]
    for text in texts:
        assert suffix_array(text).tolist() == sorted(range(len(text)), key=lambda i: text[i:]), text


def test_the_index_finds_the_longest_match_ending_at_every_position_and_its_first_place():
    rng = random.Random(0)
    for _ in range(300):
        text = "".join(rng.choice("abc") for _ in range(rng.randint(0, 40)))
        query = "".join(rng.choice("abcd") for _ in range(rng.randint(0, 30)))
        index = SuffixIndex(text)
        for i, length in enumerate(index.longest_matches(query)):
            assert length == brute_force_longest(text, query, i)
            if length:  # and it says where the text has it first
                copied = query[i - length + 1 : i + 1]
                assert index.first_occurrence(copied) == text.find(copied)
        assert index.first_occurrence("d") == -1


def test_spans_are_maximal_and_coverage_counts_each_character_once():
    text = "the quick brown fox jumps over the lazy dog"
    spans = copied_spans("XXquick brown foxYYlazy dogZZover theQQ", SuffixIndex(text), 8)
    assert [(s.start, s.length) for s in spans] == [(2, 15), (19, 8), (29, 8)]
    assert covered_fraction(spans, 39) == pytest.approx(31 / 39)
    assert copied_spans("XXquick brown foxYY", SuffixIndex(text), 16) == []


@pytest.fixture
def corpus_dir(tmp_path) -> Path:
    """A tokenized corpus folder as the corpus and tokenize steps leave it."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    text = "\n\n".join(body for _, body in POSTS)
    (folder / "corpus.txt").write_text(text, encoding="utf-8")
    stats = {"post_lengths": [{"path": path, "characters": len(body)} for path, body in POSTS]}
    (folder / "stats.json").write_text(json.dumps(stats), encoding="utf-8")
    tokenize_corpus(folder / "corpus.txt", folder, ctx_len=8)
    return folder


def test_planted_copies_are_measured_and_traced_to_their_post(corpus_dir):
    measure = Memorisation(corpus_dir, min_chars=8)
    corpus = Corpus.load(corpus_dir)
    from_a = "窈窕淑女，寤寐求之"  # 9 characters, from a.md, line 4
    from_b = "有朋自远方来，不亦乐乎？人"  # 13, from b.md, line 3
    too_short = "君子好逑。"  # 5: below min_chars
    assert from_a in corpus.train and from_b in corpus.train
    generated = "甲乙" + from_a + "丙丁戊" + from_b + "己" + too_short + "庚"
    figures = measure("## " + generated, "## ")

    assert figures["copied_fraction"] == pytest.approx((len(from_a) + len(from_b)) / len(generated))
    assert figures["longest_copy"] == len(from_b) and figures["longest_copy_text"] == from_b
    assert figures["longest_copy_source"] == {"post": "b.md", "line": 3}
    # span positions are in the whole text, prefix included, ready for highlighting
    starts = [3 + 2, 3 + 2 + len(from_a) + 3]
    assert figures["copied_spans"] == [[starts[0], len(from_a), "a.md", 4], [starts[1], len(from_b), "b.md", 3]]
    sample = "## " + generated
    assert sample[starts[1] : starts[1] + len(from_b)] == from_b


def test_the_validation_split_is_the_control(corpus_dir):
    corpus = Corpus.load(corpus_dir)
    from_val = corpus.val[-10:]  # the tail of the corpus: never in training
    assert from_val not in corpus.train
    figures = Memorisation(corpus_dir, min_chars=8)("## " + "甲乙" + from_val, "## ")
    assert figures["copied_fraction"] < figures["val_copied_fraction"] == pytest.approx(10 / 12)
    assert figures["longest_copy_source"] is None or figures["longest_copy"] < 10


def test_cli_annotates_samples_and_collect_stores_the_figures(corpus_dir, tmp_path, capsys):
    runs = tmp_path / "runs"
    run = write_run_folder(runs, "llama", 42)
    config = json.loads((run / "config.json").read_text())
    config["data"]["dir"] = str(corpus_dir)
    (run / "config.json").write_text(json.dumps(config))
    copied = "有朋自远方来，不亦乐乎？人不知"
    (run / "samples.json").write_text(
        json.dumps(
            [
                {
                    "checkpoint": "last",
                    "prefix": "## ",
                    "temperature": 0.8,
                    "seed": 0,
                    "chars": 18,
                    "text": "## 甲乙" + copied + "丙",
                },
                {
                    "checkpoint": "best",
                    "prefix": "## ",
                    "temperature": 0.8,
                    "seed": 0,
                    "chars": 18,
                    "text": "## 甲乙丙丁戊己庚辛壬癸子丑寅卯辰巳午",
                },
            ],
            ensure_ascii=False,
        )
    )
    assert main(["memorised", str(run), "--min-chars", "8"]) == 0
    assert "(last): 83.3% copied from train" in capsys.readouterr().out
    db = tmp_path / "anatomy.duckdb"
    collect(runs, db)
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("""SELECT checkpoint, step, copied_fraction, longest_copy, longest_copy_post
                              FROM sample_memorisation ORDER BY sample_idx""").fetchall()
        best_step, last_step = con.execute("SELECT best_step, last_step FROM run_summary").fetchone()
    assert rows == [("last", last_step, pytest.approx(15 / 18), 15, "b.md"), ("best", best_step, 0.0, 0, None)]


def test_cli_errors_are_one_line(tmp_path, capsys):
    assert main(["memorised", str(tmp_path)]) == 2
    assert "samples.json: no such file" in capsys.readouterr().err
    with pytest.raises(AnatomyError, match="not a tokenized corpus folder"):
        Memorisation(tmp_path)
    with pytest.raises(AnatomyError, match="min_chars = 0"):
        Memorisation(tmp_path, min_chars=0)


def test_a_corpus_text_over_the_cap_is_one_line_naming_it_not_read(corpus_dir, monkeypatch):
    """The corpus is read only up to the cap every text read has (a link to /dev/zero would
    otherwise read until the memory runs out); the cap is made small here, so nothing big is read."""
    from anatomy.generation import memorisation

    monkeypatch.setattr(memorisation, "TEXT_LIMIT", 100, raising=False)
    with pytest.raises(AnatomyError) as err:
        Corpus.load(corpus_dir)
    message = str(err.value)
    assert f"{corpus_dir / 'corpus.txt'}: " in message and "is more than a corpus text should hold" in message
    assert "\n" not in message


def test_a_corpus_split_by_its_files_is_measured_against_its_own_two_texts(tmp_path):
    """tokenize --val (the named corpora: poems_8m): the training text is the first train_tokens
    characters of the (xz) training file, the control the validation file. Read as one text, the
    xz file was "not UTF-8", and memorisation went unmeasured with a wrong reason."""
    import lzma

    from anatomy.data.tokenizer import tokenize_split

    train = "the quick brown fox jumps over the lazy dog. " * 4 + "NEVER TRAINED ON THIS TAIL"
    with lzma.open(tmp_path / "train.txt.xz", "wt", encoding="utf-8") as f:
        f.write(train)
    (tmp_path / "val.txt").write_text("a sleepy cat naps in the warm sun all day long.", encoding="utf-8")
    n_train = len(train) - len("NEVER TRAINED ON THIS TAIL")
    tokenize_split(tmp_path / "train.txt.xz", tmp_path / "val.txt", tmp_path / "corpus", train_chars=n_train, ctx_len=8)
    corpus = Corpus.load(tmp_path / "corpus")
    assert corpus.train == train[:n_train] and corpus.val.startswith("a sleepy cat")
    measured = Memorisation(tmp_path / "corpus", min_chars=10)
    copied = measured("jumps over the lazy dog", "")
    assert copied["copied_fraction"] == 1.0
    # traced to the training file (a corpus.txt it has none), to the line the copy starts on
    assert copied["longest_copy_source"] == {"post": str(tmp_path / "train.txt.xz"), "line": 1}
    assert measured("NEVER TRAINED ON THIS TAIL", "")["copied_fraction"] == 0.0  # past the characters trained on
    assert measured("in the warm sun all day", "")["val_copied_fraction"] == 1.0


def test_a_training_text_too_large_to_index_is_named_with_its_size(corpus_dir, monkeypatch):
    from anatomy.generation import memorisation

    monkeypatch.setattr(memorisation, "INDEX_CHARS", 10)
    with pytest.raises(AnatomyError) as err:
        Memorisation(corpus_dir)
    n_train = json.loads((corpus_dir / "split.json").read_text(encoding="utf-8"))["train_tokens"]
    assert str(err.value) == (
        f"{corpus_dir}: its training text has {n_train:,} characters, more than the 10 this measurement takes "
        "(its index needs about 70 MB a million characters while it is built)"
    )
