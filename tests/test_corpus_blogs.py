"""The corpus step on what real blogs hold, and a corpus folder that knows what it was made from.

Issue 37, items 1 and 8: each test here failed before its fix. The blogs are small fixtures, one
per thing a real blog held (Jekyll's includes and kramdown, HTML tables, MDX, odd characters,
crafted inputs); the workflow's tests run Snakemake in a temporary working directory, dry runs only.
"""

from __future__ import annotations

import json
import os
import random
import re
import threading
import time
from contextlib import suppress
from pathlib import Path

import numpy as np
import pytest

from anatomy.cli import main
from anatomy.data.corpus import extract_corpus
from anatomy.data.corpus_source import SOURCE_CHANGED_NOTE, as_argument, source_change, source_digest
from anatomy.data.markup import MarkupTally, clean_markup, code_spans
from anatomy.data.tokenizer import load_tokenized, tokenize_corpus
from anatomy.errors import AnatomyError
from deep_folders import LEVEL, levels_past_the_limit, make_deep_chain, remove_deep_chain
from guarded_command import GUARD_S
from test_workflow import job_counts, snakemake, write_posts

POST = "---\ntitle: {title}\n---\n\n## {title}\n\n学而时习之，不亦说乎。有朋自远方来，不亦乐乎。\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def blog(folder: Path, titles=("一", "二", "三")) -> Path:
    for i, title in enumerate(titles):
        write(folder / f"p{i}.md", POST.format(title=title))
    return folder


def corpus(args: list[str]) -> int:
    return main(["corpus", *map(str, args)])


def age(*paths: Path, seconds: float) -> None:
    for path in paths:
        os.utime(path, (time.time() - seconds, time.time() - seconds))


# ---------------------------------------------------------------------------------------------
# Item 1: a corpus folder records what it was made from, and another source rebuilds it
# ---------------------------------------------------------------------------------------------


def test_stats_record_the_source_its_digest_and_the_options(tmp_path):
    src = blog(tmp_path / "posts")
    assert corpus([src, "--out", tmp_path / "out", "--include-drafts"]) == 0
    stats = json.loads((tmp_path / "out" / "stats.json").read_text(encoding="utf-8"))
    assert stats["source"] == src.as_posix()
    assert stats["source_digest"] == source_digest(src)
    assert stats["options"] == {"skip_bad": False, "include_drafts": True, "keep_markup": False}


def test_a_folder_made_from_another_source_or_other_posts_or_options_says_so(tmp_path):
    src, out = blog(tmp_path / "posts"), tmp_path / "out"
    assert corpus([src, "--out", out]) == 0
    assert source_change(out, src) is None
    assert source_change(out, f"{src}/") is None  # the same folder, written another way
    assert (
        source_change(out, tmp_path / "mine") == f"{out} was made from {src.as_posix()}, not from {tmp_path / 'mine'}"
    )
    write(src / "p0.md", POST.format(title="改过"))  # edited, and as old as before: times cannot tell
    age(src / "p0.md", seconds=3600)
    assert source_change(out, src) == f"the posts in {src.as_posix()} have changed since {out} was made from them"
    assert corpus([src, "--out", out, "--include-drafts"]) == 0
    assert source_change(out, src) == f"{out} was made from {src.as_posix()} with --include-drafts"


def test_a_stats_file_without_a_record_is_taken_at_its_word(tmp_path):
    write(tmp_path / "out" / "stats.json", "stand-in")
    assert source_change(tmp_path / "out", tmp_path / "anything") is None
    write(tmp_path / "out" / "stats.json", json.dumps({"source": "data/posts"}))  # before records
    assert source_change(tmp_path / "out", "data/posts") is None
    assert source_change(tmp_path / "out", "mine") is not None


def source_change_or_fail(corpus_dir: Path, src: str, pipe: Path) -> str | None:
    """source_change, in a thread of its own: were it to wait on the named pipe `pipe`, the test
    opens it for writing (so the reader gets on) and fails, rather than hang for good."""
    found = []
    reader = threading.Thread(target=lambda: found.append(source_change(corpus_dir, src)), daemon=True)
    reader.start()
    reader.join(GUARD_S)
    if reader.is_alive():
        with suppress(OSError):
            os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail(f"source_change still ran after {GUARD_S} s: it waits on a named pipe")
    return found[0]


def test_a_stats_file_that_is_no_regular_file_or_too_big_is_named_not_read(tmp_path, monkeypatch):
    """source_change read stats.json whole, before the workflow plans: a named pipe there made the
    plan wait for good, a link to /dev/zero or a file of gigabytes would fill the memory. Each is
    named in one line, unread, and the corpus is made again."""
    from anatomy.data import corpus_source

    stats = tmp_path / "out" / "stats.json"
    stats.parent.mkdir()
    os.mkfifo(stats)
    assert source_change_or_fail(stats.parent, "data/posts", stats) == (
        f"{stats}: is not a regular file (a named pipe): expected the corpus step's statistics"
    )
    stats.unlink()
    stats.symlink_to("/dev/zero")
    assert source_change(stats.parent, "data/posts") == (
        f"{stats}: is not a regular file (a character device): expected the corpus step's statistics"
    )
    stats.unlink()
    monkeypatch.setattr(corpus_source, "TEXT_LIMIT", 1024)  # the real one: 1 GiB
    write(stats, json.dumps({"source": "data/posts", "padding": "x" * 2000}))
    assert source_change(stats.parent, "data/posts") == (
        f"{stats}: 2.0 KiB is more than the corpus step's statistics should hold (1.0 KiB at most), so it is not read"
    )


def test_rebuilding_the_same_corpus_writes_nothing_and_keeps_its_tokens(tmp_path):
    src, out = blog(tmp_path / "posts", titles=[str(i) for i in range(60)]), tmp_path / "out"
    assert corpus([src, "--out", out]) == 0
    tokenize_corpus(out / "corpus.txt", out, ctx_len=8)
    files = sorted(out.iterdir())
    age(*files, seconds=600)
    times = {path.name: path.stat().st_mtime_ns for path in files}
    assert corpus([src, "--out", out]) == 0
    assert {path.name: path.stat().st_mtime_ns for path in sorted(out.iterdir())} == times
    write(src / "p0.md", POST.format(title="新的一篇"))  # another text: its tokens go
    assert corpus([src, "--out", out]) == 0
    assert sorted(path.name for path in out.iterdir()) == ["corpus.txt", "stats.json"]


def test_the_listen_pages_build_records_its_source_too(tmp_path, monkeypatch):
    from anatomy.data.default_corpus import build_default_corpus

    monkeypatch.chdir(tmp_path)
    blog(Path("data/posts"), titles=[str(i) for i in range(60)])
    build_default_corpus()
    assert source_change("results/corpus", "data/posts") is None
    assert source_change("results/corpus", "my-blog") == "results/corpus was made from data/posts, not from my-blog"


def tokenized(folder: Path) -> Path:
    write(folder / "corpus.txt", "学而时习之，不亦说乎。有朋自远方来，不亦乐乎。" * 20)
    tokenize_corpus(folder / "corpus.txt", folder, ctx_len=8)
    return folder


def test_tokens_of_another_text_than_the_corpus_beside_them_are_refused_in_one_line(tmp_path):
    data = tokenized(tmp_path / "data")
    write(data / "corpus.txt", "人不知而不愠，不亦君子乎？" * 40)  # a corpus put there after tokenizing
    with pytest.raises(AnatomyError) as err:
        load_tokenized(data)
    message = str(err.value)
    assert message.startswith(f"{data}: the tokens were made from another text than the corpus.txt beside them")
    assert f"python -m anatomy tokenize {data / 'corpus.txt'} --out {data}" in message and "\n" not in message


def test_a_vocabulary_that_is_not_the_tokens_own_is_refused_in_one_line(tmp_path):
    data = tokenized(tmp_path / "data")
    vocab = json.loads((data / "vocab.json").read_text(encoding="utf-8"))
    vocab["chars"] = sorted(chr(ord(char) + 1) for char in vocab["chars"])  # same size, other characters
    write(data / "vocab.json", json.dumps(vocab, ensure_ascii=False))
    with pytest.raises(AnatomyError, match=r"vocab.json, train.npy and val.npy are not the set it was written with"):
        load_tokenized(data)
    np.save(data / "train.npy", np.zeros(3, dtype=np.uint16))  # and sizes that disagree: said first
    with pytest.raises(AnatomyError, match="records vocab/train/val"):
        load_tokenized(data)


def workflow_dir(tmp_path: Path, monkeypatch) -> Path:
    """A working directory with data/posts and a blog of one's own ("mine"), both older than
    results/corpus, which was built by hand from data/posts, as the workflow would name it."""
    write_posts(tmp_path / "data" / "posts", count=40)
    blog(tmp_path / "mine")
    age(*(tmp_path / "data" / "posts").iterdir(), *(tmp_path / "mine").iterdir(), seconds=7200)
    monkeypatch.chdir(tmp_path)
    assert corpus(["data/posts", "--out", "results/corpus"]) == 0
    tokenize_corpus(Path("results/corpus/corpus.txt"), Path("results/corpus"), ctx_len=8)
    return tmp_path


@pytest.mark.slow  # seconds: CI runs it, the inner loop leaves it out
def test_a_corpus_built_by_hand_from_another_source_is_extracted_again_by_the_workflow(tmp_path, monkeypatch):
    # Before: nothing to be done, and training read data/posts' tokens as "your writing".
    workdir = workflow_dir(tmp_path, monkeypatch)
    plan = snakemake(workdir, "-n", "results/corpus/split.json")
    assert "Nothing to be done" in plan.stdout + plan.stderr, plan.stdout[-2000:]  # the same source
    plan = snakemake(workdir, "-n", "results/corpus/split.json", "--config", "corpus=mine")
    assert job_counts(plan.stdout) == {"extract_corpus": 1, "tokenize_corpus": 1}
    assert (
        "results/corpus was made from data/posts, not from mine (config `corpus`): extracting it again" in plan.stderr
    )
    assert f"results/corpus/{SOURCE_CHANGED_NOTE}" in plan.stdout


@pytest.mark.slow  # seconds: CI runs it, the inner loop leaves it out
def test_a_source_folder_whose_name_starts_with_a_dash_is_given_as_a_path(tmp_path, monkeypatch):
    assert as_argument("-posts") == "./-posts" and as_argument("data/posts") == "data/posts"
    blog(tmp_path / "-posts")
    monkeypatch.chdir(tmp_path)
    assert corpus([as_argument("-posts"), "--out", "out"]) == 0
    assert json.loads(Path("out/stats.json").read_text(encoding="utf-8"))["source"] == "-posts"
    assert source_change("out", "-posts") is None  # the record names it as the workflow's config does
    write_posts(tmp_path / "data" / "posts")
    plan = snakemake(tmp_path, "-n", "-p", "results/corpus/corpus.txt", "--config", "corpus=-posts")
    assert "python -m anatomy corpus ./-posts --out results/corpus" in plan.stdout, plan.stdout[-2000:]


# ---------------------------------------------------------------------------------------------
# Item 8: what real blogs hold
# ---------------------------------------------------------------------------------------------

JEKYLL_INCLUDE_PAGE = "---\nlayout: page\ntitle: 关于\n---\n{{ about_zh | markdownify }}\n"
JEKYLL_KRAMDOWN_POST = """---
title: 提示
---
正文里有 {{ site.title }} 和 {{ page.date | date: "%Y" }} 两个标签。
{: .lead}

> 一条提示。
{: .notice--info}

[链接](https://example.com){:target="_blank"} 在这里。

{:toc}

```liquid
{{ kept_in_code }} {: .kept}
```
"""


def test_liquid_output_tags_and_kramdown_attribute_lists_go_and_an_include_only_page_is_empty(tmp_path):
    write(tmp_path / "about.md", JEKYLL_INCLUDE_PAGE)
    write(tmp_path / "post.md", JEKYLL_KRAMDOWN_POST)
    text, stats = extract_corpus(tmp_path)
    assert text == (
        "正文里有  和  两个标签。\n\n> 一条提示。\n\n[链接](https://example.com) 在这里。\n\n"
        "```liquid\n{{ kept_in_code }} {: .kept}\n```"
    )
    assert stats["skipped_files"] == [{"path": "about.md", "reason": "empty"}]
    removed = stats["markup_removed"]
    assert removed["template_tags"]["count"] == 3  # the include's, and the two in the post
    assert removed["attribute_lists"] == {
        "count": 4,
        "characters": len('{: .lead}{: .notice--info}{:target="_blank"}{:toc}'),
    }


def test_table_cells_are_kept_apart(tmp_path):
    table = (
        "<table>\n<tr><th>运算符</th><th>含义</th></tr>\n"
        "<tr><td>and</td><td>A logical AND operator</td></tr>\n"
        "<tr><td>or<td>A logical OR</tr>\n</table>\n"
    )
    write(tmp_path / "post.md", table)
    text = extract_corpus(tmp_path)[0]
    assert text == "运算符 含义\nand A logical AND operator\nor A logical OR"
    assert "andA" not in text


@pytest.mark.parametrize("suffix", [".mkd", ".mdown", ".mkdn", ".mkdown", ".mdx"])
def test_the_markdown_names_jekyll_reads_and_mdx_are_posts(tmp_path, suffix):
    write(tmp_path / f"post{suffix}", "## 标题\n\n正文。\n")
    assert extract_corpus(tmp_path)[0] == "## 标题\n\n正文。"


MDX_POST = """---
title: 用 MDX 写
---
import { Chart } from '../components/Chart'
import Note from './Note.mdx'
export const meta = {
  tags: ['a', 'b'],
}

# 图表

<Chart data={[1, 2, 3]} label="销量" />

{/* 一条注释 */}
正文 {props.year} 年，<Note type="tip">里面的话</Note>。

```js
import { kept } from 'code'
<Kept />
```
"""


def test_an_mdx_blog_loses_its_imports_jsx_and_expressions_but_keeps_its_text_and_code(tmp_path):
    write(tmp_path / "a.mdx", MDX_POST)
    text, stats = extract_corpus(tmp_path)
    assert text == "# 图表\n\n正文  年，里面的话。\n\n```js\nimport { kept } from 'code'\n<Kept />\n```"
    assert stats["markup_removed"]["mdx_syntax"]["count"] == 6  # 1 import/export block, 3 JSX tags, 2 expressions


def test_a_folder_of_posts_in_another_format_says_which(tmp_path):
    for i in range(3):
        write(tmp_path / f"p{i}.rst", "标题\n====\n")
    write(tmp_path / "index.html", "<p>x</p>")
    with pytest.raises(AnatomyError, match=re.escape("skipped: 4 not markdown (3 .rst, 1 .html)")) as err:
        extract_corpus(tmp_path)
    assert ".mdx" in str(err.value)  # the kinds it reads


def test_an_unclosed_script_or_style_in_prose_keeps_the_text_after_it(tmp_path):
    write(tmp_path / "a.md", "用 <script> 标签引入脚本，后面的字还在。\n\n<style>p {color: red}</style>下一段。\n")
    write(tmp_path / "b.md", "写 <STYLE> 也一样，这些字还在。\n")
    text = extract_corpus(tmp_path)[0]
    assert text == "用 <script> 标签引入脚本，后面的字还在。\n\n下一段。\n\n写 <STYLE> 也一样，这些字还在。"


def test_front_matter_closed_by_three_dots_is_front_matter_and_a_later_rule_swallows_no_heading(tmp_path):
    write(tmp_path / "post.md", "---\ntitle: 点号结尾\ntags: [a]\n...\n\n## 第一节\n\n正文。\n\n---\n\n## 第二节\n")
    assert extract_corpus(tmp_path)[0] == "## 第一节\n\n正文。\n\n---\n\n## 第二节"


def test_a_yaml_error_names_the_files_line_even_after_a_blank_first_line(tmp_path):
    write(tmp_path / "post.md", "---\n\ntitle: [没关\n---\n正文\n")
    with pytest.raises(AnatomyError, match="line 4"):  # the file's line: the next after `title`
        extract_corpus(tmp_path)


ODD = {
    "emoji joined": ("程序员👩\u200d💻和一家人👨\u200d👩\u200d👧", {}),
    "joiner in prose": ("零宽\u200d连接", {"U+200D": 1}),
    "bidi": ("文\u202e字\u200f", {"U+200F": 1, "U+202E": 1}),
    "soft hyphen": ("hy\u00adphen", {"U+00AD": 1}),
    "line separator": ("一行\u2028两行", {"U+2028": 1}),
    "typed no-break space": ("数字\u00a0100", {"U+00A0": 1}),
    "nbsp entity": ("<p>前&nbsp;&nbsp;缩进</p>", {}),
}


@pytest.mark.parametrize("case", sorted(ODD))
def test_odd_characters_are_flagged_and_a_joiner_inside_an_emoji_is_not(tmp_path, case):
    post, found = ODD[case]
    write(tmp_path / "post.md", post)
    text, stats = extract_corpus(tmp_path)
    assert stats["odd_characters"]["found"] == found
    if case == "nbsp entity":
        assert text == "前  缩进"  # plain spaces, not U+00A0


def test_a_post_holding_every_noncharacter_of_a_block_is_cleaned_not_crashed(tmp_path):
    nonchars = "".join(map(chr, range(0xFDD0, 0xFDF0)))
    write(tmp_path / "post.md", f"{nonchars} <b>粗</b>\n")
    text, stats = extract_corpus(tmp_path)
    assert text == f"{nonchars} 粗"
    assert stats["odd_characters"]["noncharacter"] == 32


def test_a_post_holding_every_stand_in_is_one_line_naming_it(tmp_path):
    everything = "".join(
        chr(code)
        for code in [*range(0xFDD0, 0xFDF0), *range(0xE000, 0xF900), *range(0xF0000, 0x110000)]
        if code & 0xFFFE != 0xFFFE
    )
    everything += "".join(chr(plane + last) for plane in range(0, 0x110000, 0x10000) for last in (0xFFFE, 0xFFFF))
    write(tmp_path / "crafted.md", everything + "<b>x</b>")
    write(tmp_path / "good.md", "好")
    with pytest.raises(AnatomyError) as err:
        extract_corpus(tmp_path)
    assert str(err.value).startswith(f"{tmp_path / 'crafted.md'}: holds every Unicode noncharacter")
    assert "--skip-bad" in str(err.value) and "\n" not in str(err.value)
    assert extract_corpus(tmp_path, keep_markup=True)[1]["posts"] == 2


def remove_chain(top: Path, depth: int) -> None:
    """Remove `top`/a/a/.../a, deepest first: pytest's own clean-up (shutil.rmtree) recurses once per
    level, and would fail on this folder at the end of every later session."""
    for level in range(depth, -1, -1):
        folder = top.joinpath(*["a"] * level)
        for entry in folder.iterdir():
            if not entry.is_dir():
                entry.unlink()
        folder.rmdir()


def test_a_thousand_nested_folders_are_walked_without_recursion(tmp_path):
    deep, depth = tmp_path / "blog", 990
    deep.mkdir()
    path = deep
    try:
        for _ in range(depth):  # one level at a time: mkdir(parents=True) recurses too
            path = path / "a"
            path.mkdir()
        write(path / "deep.md", "最深处的一篇。")
        write(deep / "top.md", "最上面的一篇。")
        text, stats = extract_corpus(deep)
        assert text == "最深处的一篇。\n\n最上面的一篇。"
        assert stats["posts"] == 2
    finally:
        remove_chain(deep, len(path.relative_to(deep).parts))


def test_folders_nested_past_the_path_limit_are_named_in_one_line(tmp_path):
    """About 2,050 nested folders (here 41 of long names, past the same limit): the path passes
    PATH_MAX, and looking at the next folder (is it a link?) ended in an OSError traceback
    (ENAMETOOLONG). It is a folder that cannot be read, named by its depth and its ends in one
    line, and --skip-bad leaves it out."""
    blog = write(tmp_path / "blog" / "top.md", "最上面的一篇。").parent
    depth = levels_past_the_limit(blog)
    make_deep_chain(blog, depth, {3: {"shallow.md": "浅处的一篇。"}, depth: {"deep.md": "最深处的一篇。"}})
    try:
        with pytest.raises(AnatomyError) as err:
            extract_corpus(blog)
        assert re.fullmatch(
            re.escape(f"{blog / LEVEL / LEVEL / LEVEL}/.../{LEVEL}/{LEVEL}/{LEVEL}: cannot read the folder, ")
            + r"[\d,]+ levels deep: its path is longer than the system allows; expected posts in folders nested "
            r"less deep; --skip-bad leaves it out of the corpus",
            str(err.value),
        ), str(err.value)[:500]
        text, stats = extract_corpus(blog, skip_bad=True)
        assert text == "浅处的一篇。\n\n最上面的一篇。"
        assert stats["skipped"] == {"bad": 1}
    finally:
        remove_deep_chain(blog, depth)


def test_a_folder_past_the_path_limit_is_left_out_by_its_ends_on_screen_and_in_stats(tmp_path, capsys):
    """With --skip-bad, the summary printed the whole ~4 KB path of such a folder under "folders
    left out", and stats.json kept it whole, while the error named it by its ends: so do both now."""
    blog = write(tmp_path / "blog" / "top.md", "最上面的一篇。").parent
    depth = levels_past_the_limit(blog)
    make_deep_chain(blog, depth, {depth: {"deep.md": "最深处的一篇。"}})
    try:
        assert corpus([blog, "--out", tmp_path / "out", "--skip-bad"]) == 0
    finally:
        remove_deep_chain(blog, depth)
    ends = f"{LEVEL}/{LEVEL}/{LEVEL}/.../{LEVEL}/{LEVEL}/{LEVEL}/"
    assert f"\n  folders left out     {ends} (bad)\n" in capsys.readouterr().out
    [left_out] = json.loads((tmp_path / "out" / "stats.json").read_text(encoding="utf-8"))["skipped_files"]
    assert (left_out["path"], left_out["reason"]) == (ends, "bad")
    assert re.search(r"cannot read the folder, [\d,]+ levels deep", left_out["error"]), left_out["error"]


# The code-span pattern the pairing replaced: quadratic on unmatched runs, right otherwise
OLD_CODE_SPAN = re.compile(r"(?<!`)(?P<ticks>`+)(?!`)(?:(?!\n[ \t]*\n).)*?(?<!`)(?P=ticks)(?!`)", re.DOTALL)


def test_code_spans_are_found_where_the_pattern_found_them():
    rng = random.Random(37)
    for _ in range(3000):
        text = "".join(
            rng.choice(["`", "``", "```", "a", " ", "\n", "\n\n", "\n \n"]) for _ in range(rng.randint(0, 30))
        )
        assert list(code_spans(text)) == [match.span() for match in OLD_CODE_SPAN.finditer(text)], repr(text)


def test_a_paragraph_of_unmatched_backtick_runs_is_cleaned_in_one_pass():
    # Runs of 1, 2, ... 600 backticks, each length once (180 KB): the pattern searched past each
    # run to the paragraph's end for its closing, seconds here and 40 s for 1.1 MB. Paired with
    # the next run of its length in one pass, none has one: nothing is code, and the HTML goes.
    text = "".join("`" * length + "字" for length in range(1, 601)) + "<b>x</b>"
    assert list(code_spans(text)) == []
    cleaned = clean_markup(text, MarkupTally())
    assert cleaned == text.replace("<b>x</b>", "x")
