"""anatomy.data.corpus, with the front matter, markup, posts and statistics modules it joins: a
blog folder (or a .txt) into one text, and every way the input can be wrong."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from anatomy.cli import main
from anatomy.data.corpus import extract_corpus, write_corpus
from anatomy.data.corpus_stats import ODD_KINDS, size_warning
from anatomy.data.front_matter import is_draft
from anatomy.data.markup import MarkupTally, clean_markup, code_and_prose
from anatomy.errors import AnatomyError
from guarded_command import MEMORY_CAP, run_anatomy

REPO = Path(__file__).resolve().parents[1]
DEFAULT_POSTS = REPO / "data" / "posts"

JEKYLL_POST = """---
layout: post
title: "Hello: Jekyll"
date: 2024-01-02 10:00:00 +0800
tags: [a, b]
---

## First heading

Jekyll body.

---

After a horizontal rule.
"""

HUGO_POST = """+++
title = "Hello Hugo"
date = 2024-03-04T05:06:07Z
draft = false
tags = ["x", "y"]

[params]
subtitle = "a table too"
+++

## Hugo heading

Hugo body.
"""


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_bytes(text.encode("utf-8"))
    return path


def test_jekyll_yaml_front_matter_is_removed_and_body_kept(tmp_path):
    write(tmp_path / "2024-01-02-hello.md", JEKYLL_POST)
    text, stats = extract_corpus(tmp_path)
    assert text == "## First heading\n\nJekyll body.\n\n---\n\nAfter a horizontal rule."
    assert stats["posts"] == 1


def test_hugo_toml_front_matter_is_removed_and_body_kept(tmp_path):
    write(tmp_path / "content" / "posts" / "hello.md", HUGO_POST)
    text, _ = extract_corpus(tmp_path)
    assert text == "## Hugo heading\n\nHugo body."


def test_post_without_front_matter_is_kept_whole(tmp_path):
    write(tmp_path / "plain.markdown", "# Title\n\nNo front matter here.\n")
    text, _ = extract_corpus(tmp_path)
    assert text == "# Title\n\nNo front matter here."


def test_posts_are_joined_with_one_blank_line_in_sorted_path_order(tmp_path):
    # Created out of order, nested: the order must come from the paths, not the file system.
    write(tmp_path / "b.md", "\n\nB\n\n\n")
    write(tmp_path / "2023" / "z.md", "Z")
    write(tmp_path / "a.md", "---\ntitle: a\n---\nA")
    write(tmp_path / "2023" / "c.markdown", "C")
    text, stats = extract_corpus(tmp_path)
    assert text == "C\n\nZ\n\nA\n\nB"
    assert [p["path"] for p in stats["post_lengths"]] == ["2023/c.markdown", "2023/z.md", "a.md", "b.md"]


def test_order_does_not_depend_on_creation_order(tmp_path):
    names = ["b.md", "a/x.md", "a.md", "c/d/e.md", "a-b.md"]
    for folder, order in (("one", names), ("two", list(reversed(names)))):
        for name in order:
            write(tmp_path / folder / name, f"post {name}")
    assert extract_corpus(tmp_path / "one")[0] == extract_corpus(tmp_path / "two")[0]


def test_crlf_and_cr_line_endings_become_lf(tmp_path):
    write(tmp_path / "windows.md", "---\r\ntitle: w\r\n---\r\nline one\r\nline two\r\n")
    write(tmp_path / "xmac.md", "old\rmac\r")
    text, _ = extract_corpus(tmp_path)
    assert text == "line one\nline two\n\nold\nmac"
    assert "\r" not in text


def test_byte_order_mark_is_dropped_so_front_matter_is_still_found(tmp_path):
    write(tmp_path / "bom.md", "\ufeff---\ntitle: bom\n---\nbody")
    assert extract_corpus(tmp_path)[0] == "body"


def test_hidden_and_non_markdown_files_are_skipped_and_counted(tmp_path):
    write(tmp_path / "post.md", "kept")
    write(tmp_path / ".draft.md", "hidden draft")
    write(tmp_path / ".git" / "config", "hidden folder")
    write(tmp_path / ".git" / "notes.md", "inside hidden folder")
    write(tmp_path / "images" / "cat.png", b"\x89PNG\r\n")
    write(tmp_path / "notes.txt", "not a post")
    write(tmp_path / "_index.md", '+++\ntitle = "section"\n+++\n')  # Hugo section page: no body
    text, stats = extract_corpus(tmp_path)
    assert text == "kept"
    assert stats["posts"] == 1
    assert stats["skipped"] == {"empty": 1, "hidden": 2, "not markdown": 2}
    assert {s["path"]: s["reason"] for s in stats["skipped_files"]} == {
        ".draft.md": "hidden",
        ".git/": "hidden",
        "images/cat.png": "not markdown",
        "notes.txt": "not markdown",
        "_index.md": "empty",
    }


def test_stats_describe_the_text(tmp_path):
    write(tmp_path / "a.md", "子曰：学而时习之")
    write(tmp_path / "b.md", "---\ntitle: b\n---\n\nab\nab\n")
    text, stats = extract_corpus(tmp_path)
    assert text == "子曰：学而时习之\n\nab\nab"
    assert stats["characters"] == len(text) == 15
    assert stats["distinct_characters"] == len(set(text)) == 11
    assert stats["post_lengths"] == [{"path": "a.md", "characters": 8}, {"path": "b.md", "characters": 5}]


def test_a_plain_text_file_is_the_corpus(tmp_path):
    src = write(tmp_path / "book.txt", "---\nnot front matter in a .txt\r\n---\r\nend\n")
    text, stats = extract_corpus(src)
    assert text == "---\nnot front matter in a .txt\n---\nend\n"
    assert stats["posts"] == 1 and stats["characters"] == len(text)


def test_a_single_markdown_post_is_the_corpus(tmp_path):
    src = write(tmp_path / "only.md", HUGO_POST)
    text, stats = extract_corpus(src)
    assert text == "## Hugo heading\n\nHugo body."
    assert stats["post_lengths"] == [{"path": "only.md", "characters": len(text)}]


def test_write_corpus_writes_text_and_stats(tmp_path):
    write(tmp_path / "src" / "a.md", HUGO_POST)
    text, stats = extract_corpus(tmp_path / "src")
    write_corpus(tmp_path / "out", text, stats)
    assert (tmp_path / "out" / "corpus.txt").read_text(encoding="utf-8") == text
    assert json.loads((tmp_path / "out" / "stats.json").read_text(encoding="utf-8")) == stats
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["corpus.txt", "stats.json"]


# Each bad input: (files to create, path to pass, words the message must hold)
BAD_INPUTS = {
    "not utf-8": ({"p.md": b"abc\n\xff\xfe rest"}, "", ["p.md", "not UTF-8", "byte offset 4", "line 2"]),
    "yaml never closed": ({"p.md": "---\ntitle: x\nbody"}, "", ["p.md", "'---'", "never closed"]),
    "toml never closed": ({"p.md": "+++\ntitle = 'x'\nbody"}, "", ["p.md", "'+++'", "never closed"]),
    "yaml unparsable": ({"p.md": "---\ntitle: [unclosed\n---\nbody"}, "", ["p.md", "not valid YAML", "line"]),
    "toml unparsable": ({"p.md": "+++\ntitle = \n+++\nbody"}, "", ["p.md", "not valid TOML", "line 2"]),
    "yaml not a mapping": ({"p.md": "---\njust a sentence\n---\nbody"}, "", ["p.md", "key: value", "str"]),
    "hugo json unparsable": ({"p.md": '{\n  "title": "x",\n}\nbody'}, "", ["p.md", "'{' is not valid JSON", "line 3"]),
    "hexo json unparsable": (
        {"p.md": ';;;\n"title": "x"\n"date": "2013/7/13"\n;;;\nbody'},
        "",
        ["p.md", "not valid JSON", "line 3"],
    ),
    "hexo json never closed": ({"p.md": ';;;\n"title": "x"\nbody'}, "", ["p.md", "';;;'", "never closed"]),
    "closing-only yaml unparsable": ({"p.md": "title: [x\n---\nbody"}, "", ["p.md", "not valid YAML", "line 2"]),
    "front matter never closed nor opened": (
        {"p.md": "title: 没有分隔线\ndate: 2020-01-01\n\n正文"},
        "",
        ["p.md", "unrecognised front matter", "'title'", "no '---' or ';;;'"],
    ),
    "empty folder": ({}, "", ["the folder is empty"]),
    "no markdown": ({"a.txt": "x", ".b.md": "y"}, "", ["no Markdown posts", "1 hidden", "1 not markdown"]),
    "only empty posts": ({"a.md": "---\ntitle: a\n---\n\n"}, "", ["no Markdown posts", "1 empty"]),
    "missing path": ({}, "nowhere", ["nowhere", "no such file or folder"]),
    "wrong file type": ({"book.pdf": "x"}, "book.pdf", ["book.pdf", "'.pdf'"]),
    "empty text file": ({"book.txt": "\n\n"}, "book.txt", ["book.txt", "empty"]),
}


@pytest.mark.parametrize("case", BAD_INPUTS, ids=list(BAD_INPUTS))
def test_bad_input_is_a_clear_error(tmp_path, case):
    files, relative, words = BAD_INPUTS[case]
    src = tmp_path / "src"
    src.mkdir()
    for name, content in files.items():
        write(src / name, content)
    with pytest.raises(AnatomyError) as err:
        extract_corpus(src / relative)
    message = str(err.value)
    assert str(src / relative) in message  # the path given, or the file inside it
    for word in words:
        assert word in message, (word, message)


def test_cli_reports_and_returns_zero(tmp_path, capsys):
    write(tmp_path / "src" / "a.md", JEKYLL_POST)
    write(tmp_path / "src" / "b.md", HUGO_POST)
    write(tmp_path / "src" / "c.jpg", b"\xff\xd8")
    assert main(["corpus", str(tmp_path / "src"), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "posts                2" in out
    assert "skipped files        1 not markdown" in out
    text = (tmp_path / "out" / "corpus.txt").read_text(encoding="utf-8")
    assert f"characters           {len(text):,}" in out


def test_cli_bad_input_returns_two_and_writes_nothing(tmp_path, capsys):
    write(tmp_path / "src" / "good.md", "good")
    write(tmp_path / "src" / "z-bad.md", "---\ntitle: never closed\n")
    assert main(["corpus", str(tmp_path / "src"), "--out", str(tmp_path / "out")]) == 2
    assert "z-bad.md" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_default_corpus_extracts_to_the_stated_size():
    text, stats = extract_corpus(DEFAULT_POSTS)
    assert stats["posts"] == 66 and stats["skipped"] == {}
    assert 110_000 <= stats["characters"] <= 125_000
    assert text.startswith("## 关雎\n\n关关雎鸠")
    assert "\r" not in text and "title:" not in text and "\n---" not in text
    # no markup to remove, so the corpus is the text as written (the grid's results rely on it)
    assert all(kind["count"] == kind["characters"] == 0 for kind in stats["markup_removed"].values())
    assert stats["odd_characters"] == {**dict.fromkeys(ODD_KINDS, 0), "found": {}}
    assert size_warning(stats["characters"]) is None


def test_default_posts_are_blog_posts_with_front_matter():
    posts = sorted(DEFAULT_POSTS.glob("*.md"))
    orders = []
    for path in posts:
        _, front, body = path.read_text(encoding="utf-8").split("---\n", 2)
        meta = yaml.safe_load(front)
        assert set(meta) == {"title", "source", "order", "tags"}, path
        assert meta["source"].startswith("chinese-poetry 2.0.1, dist/")
        assert body.lstrip("\n").startswith("## "), path
        orders.append(meta["order"])
    assert orders == list(range(1, len(posts) + 1))  # file names sort in reading order


# ---------------------------------------------------------------------------------------------
# Real blogs: dates that do not exist, names that are not UTF-8, --out, several bad posts
# ---------------------------------------------------------------------------------------------

HEXO_POST_DATED = """---
title: 闰年的博客
date: {date}
tags:
  - 随笔
categories: 生活
---

正文第一段。
"""

# Dates no calendar holds: placeholders (WordPress's empty date), typos, and what PyYAML's datetime refused
DATES_NO_CALENDAR_HOLDS = [
    "0000-00-00 00:00:00",
    "9999-99-99",
    "2016-02-30 10:00:00",
    "2016-13-01 10:00:00",
    "2016-01-01 24:00:00",
]


@pytest.mark.parametrize("value", DATES_NO_CALENDAR_HOLDS)
def test_a_date_the_corpus_never_uses_does_not_cost_the_post(tmp_path, value):
    # Each refused the whole post ("is not a date that exists"): the corpus reads no date.
    write(tmp_path / "source" / "_posts" / "dated.md", HEXO_POST_DATED.format(date=value))
    assert extract_corpus(tmp_path)[0] == "正文第一段。"


def test_a_real_leap_day_is_a_date(tmp_path):
    write(tmp_path / "leap.md", HEXO_POST_DATED.format(date="2016-02-29 10:00:00"))
    assert extract_corpus(tmp_path)[0] == "正文第一段。"


def write_gbk_named_image(folder: Path) -> bytes:
    """An image whose name is GBK bytes, as unzipping an archive made on Chinese Windows leaves."""
    name = "你好.jpg".encode("gbk")
    (folder / "images").mkdir(parents=True, exist_ok=True)
    with open(os.path.join(os.fsencode(folder / "images"), name), "wb") as image:
        image.write(b"\xff\xd8\xff\xe0")
    return name


def test_a_file_name_that_is_not_utf8_is_named_even_for_a_skipped_image(tmp_path, capsys):
    write(tmp_path / "src" / "post.md", JEKYLL_POST)
    write_gbk_named_image(tmp_path / "src")
    out = tmp_path / "out"
    assert main(["corpus", str(tmp_path / "src"), "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1  # one line
    assert "images/\\xc4\\xe3\\xba\\xc3.jpg: the name is not UTF-8" in error
    assert not out.exists()  # neither corpus.txt nor stats.json


def test_skip_bad_leaves_out_a_name_that_is_not_utf8_and_lists_it(tmp_path):
    write(tmp_path / "src" / "post.md", JEKYLL_POST)
    write_gbk_named_image(tmp_path / "src")
    out = tmp_path / "out"
    assert main(["corpus", str(tmp_path / "src"), "--out", str(out), "--skip-bad"]) == 0
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert stats["skipped"] == {"bad": 1}
    assert stats["skipped_files"][0]["path"] == "images/\\xc4\\xe3\\xba\\xc3.jpg"
    assert (out / "corpus.txt").read_text(encoding="utf-8").startswith("## First heading")


def test_a_blog_folder_whose_own_name_is_not_utf8_still_gets_its_stats(tmp_path):
    src = tmp_path / os.fsdecode("博客".encode("gbk"))  # the folder a Windows zip unpacked into
    write(src / "good.md", JEKYLL_POST)
    write(src / "broken.md", "---\ntitle: [never closed\n---\nbody\n")
    out = tmp_path / "out"
    assert main(["corpus", str(src), "--out", str(out), "--skip-bad"]) == 0
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert stats["source"].endswith("/\\xb2\\xa9\\xbf\\xcd")
    assert "\\xb2\\xa9\\xbf\\xcd/broken.md: front matter is not valid YAML" in stats["skipped_files"][0]["error"]


def test_out_pointing_at_a_file_is_a_clear_error(tmp_path, capsys):
    write(tmp_path / "src" / "post.md", JEKYLL_POST)
    existing = write(tmp_path / "notes.txt", "my notes")
    assert main(["corpus", str(tmp_path / "src"), "--out", str(existing)]) == 2
    assert f"--out {existing}: is a file; expected a folder" in capsys.readouterr().err
    assert existing.read_text() == "my notes"


def test_out_naming_corpus_txt_says_out_is_a_folder(tmp_path, capsys):
    write(tmp_path / "src" / "post.md", JEKYLL_POST)
    out = tmp_path / "results" / "corpus" / "corpus.txt"
    assert main(["corpus", str(tmp_path / "src"), "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert f"--out {out}: expected a folder" in error
    assert f"--out {out.parent}" in error  # what to type instead
    assert not (tmp_path / "results").exists()


def make_tokenized_folder(out: Path) -> list[Path]:
    """What `anatomy corpus` then `anatomy tokenize` left in a folder (contents do not matter)."""
    names = ["corpus.txt", "stats.json", "vocab.json", "train.npy", "val.npy", "split.json"]
    for name in names:
        write(out / name, "from an earlier corpus")
    return [out / name for name in names[2:]]


def test_extraction_removes_the_token_files_of_the_corpus_it_replaces(tmp_path):
    write(tmp_path / "src" / "post.md", JEKYLL_POST)
    tokens = make_tokenized_folder(tmp_path / "out")
    assert main(["corpus", str(tmp_path / "src"), "--out", str(tmp_path / "out")]) == 0
    assert [path for path in tokens if path.exists()] == []


@pytest.mark.parametrize("mistake", ["a typo in the source", "a broken post"])
def test_a_failed_extraction_deletes_nothing(tmp_path, mistake):
    """The old corpus and its tokens still belong together: a typo must not cost them."""
    write(tmp_path / "src" / "post.md", "---\ntitle: [never closed\n---\nbody\n")
    src = tmp_path / ("scr" if mistake == "a typo in the source" else "src")
    tokens = make_tokenized_folder(tmp_path / "out")
    assert main(["corpus", str(src), "--out", str(tmp_path / "out")]) == 2
    assert [path.read_text() for path in (tmp_path / "out").iterdir()] == ["from an earlier corpus"] * 6
    assert all(path.exists() for path in tokens)


def test_tokens_without_their_corpus_go_even_if_extraction_fails(tmp_path):
    # As Snakemake leaves the folder: it deletes a job's outputs (corpus.txt, stats.json) before
    # running it, and the tokens of that corpus must not outlive it.
    tokens = make_tokenized_folder(tmp_path / "out")
    (tmp_path / "out" / "corpus.txt").unlink()
    assert main(["corpus", str(tmp_path / "no-such-blog"), "--out", str(tmp_path / "out")]) == 2
    assert [path for path in tokens if path.exists()] == []


BROKEN_POSTS = {
    "2015/unclosed.md": ("---\ntitle: 草稿\ndate: 2015-01-01\n\n正文", "never closed"),
    "2016/bad-toml.md": ('+++\ntitle = "引号没关\n+++\n正文', "not valid TOML"),
    "2017/bad-yaml.md": ("---\ntitle: [没关\n---\n正文", "not valid YAML"),
}


def write_blog_with_broken_posts(src: Path) -> None:
    write(src / "2014" / "good.md", JEKYLL_POST)
    for name, (text, _) in BROKEN_POSTS.items():
        write(src / name, text)


def test_every_bad_post_is_reported_in_one_run(tmp_path):
    write_blog_with_broken_posts(tmp_path / "src")
    with pytest.raises(AnatomyError) as err:
        extract_corpus(tmp_path / "src")
    header, *lines = str(err.value).splitlines()
    assert "3 files cannot be used" in header and "--skip-bad" in header
    assert len(lines) == 3
    for line, (name, (_, problem)) in zip(lines, sorted(BROKEN_POSTS.items())):
        assert str(tmp_path / "src" / name) in line and problem in line, (name, line)


def test_skip_bad_builds_the_corpus_from_the_good_posts_and_lists_the_bad(tmp_path, capsys):
    write_blog_with_broken_posts(tmp_path / "src")
    out = tmp_path / "out"
    assert main(["corpus", str(tmp_path / "src"), "--out", str(out), "--skip-bad"]) == 0
    assert "skipped files        3 bad" in capsys.readouterr().out
    assert (out / "corpus.txt").read_text(encoding="utf-8") == extract_corpus(tmp_path / "src" / "2014")[0]
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert stats["skipped"] == {"bad": 3}
    listed = {entry["path"]: entry["error"] for entry in stats["skipped_files"]}
    assert set(listed) == set(BROKEN_POSTS)
    for name, (_, problem) in BROKEN_POSTS.items():
        assert problem in listed[name]


# ---------------------------------------------------------------------------------------------
# Front matter in JSON, and Hexo's forms with only a closing line
# ---------------------------------------------------------------------------------------------

HUGO_JSON_POST = """{
  "title": "Hugo 的 JSON 前言",
  "date": "2019-05-01T08:00:00+08:00",
  "tags": ["hugo", "json"],
  "params": {
    "toc": true
  }
}

## JSON 之后

Hugo body.
"""

HEXO_JSON_POST = """;;;
"title": "Hexo 的 JSON 前言",
"date": "2013/7/13 20:46:25",
"tags": ["hexo"]
;;;

Hexo JSON body.
"""

HEXO_JSON_CLOSING_ONLY = """"title": "只有结尾的分隔线",
"date": "2013/7/13 20:46:25"
;;;
Closing-only JSON body.
"""

HEXO_YAML_CLOSING_ONLY = """title: 只有结尾的 YAML
date: 2013-07-13 20:46:25
tags:
- hexo
---
正文。

---

分隔线之后。
"""

FRONT_MATTER_FORMS = {
    "hugo json object": (HUGO_JSON_POST, "## JSON 之后\n\nHugo body."),
    "hexo json between ;;;": (HEXO_JSON_POST, "Hexo JSON body."),
    "hexo json closed by ;;; only": (HEXO_JSON_CLOSING_ONLY, "Closing-only JSON body."),
    # the second `---` is a horizontal rule of the body, and stays
    "hexo yaml closed by --- only": (HEXO_YAML_CLOSING_ONLY, "正文。\n\n---\n\n分隔线之后。"),
}


@pytest.mark.parametrize("form", sorted(FRONT_MATTER_FORMS))
def test_json_and_closing_only_front_matter_are_removed(tmp_path, form):
    post, body = FRONT_MATTER_FORMS[form]
    write(tmp_path / "post.md", post)
    assert extract_corpus(tmp_path)[0] == body


def test_json_front_matter_is_read_for_drafts(tmp_path):
    write(tmp_path / "post.md", HUGO_JSON_POST.replace('"tags"', '"draft": true,\n  "tags"'))
    write(tmp_path / "other.md", "kept")
    text, stats = extract_corpus(tmp_path)
    assert text == "kept" and stats["skipped"] == {"draft": 1}


def test_a_first_paragraph_before_a_horizontal_rule_is_not_front_matter(tmp_path):
    # The shape of Hexo's closing-only form, but line 1 sets no front matter key: it is text.
    post = "Note: this post is from 2012.\n\n---\n\n## Then\n"
    write(tmp_path / "post.md", post)
    assert extract_corpus(tmp_path)[0] == post.strip()


# ---------------------------------------------------------------------------------------------
# Drafts
# ---------------------------------------------------------------------------------------------

HEXO_PUBLISHED = """---
title: 已发布
date: 2020-01-01 10:00:00
---
已发布的正文。
"""

HEXO_UNPUBLISHED = """---
title: 还没发布
date: 2020-01-02 10:00:00
published: false
---
未发布的正文。
"""

HEXO_DRAFT = """---
title: 草稿
tags:
---
_drafts 里的草稿。
"""

HUGO_DRAFT = """+++
title = "Hugo 草稿"
date = 2020-01-03T10:00:00Z
draft = true
+++
Hugo 的草稿。
"""


def write_blog_with_drafts(src: Path) -> None:
    write(src / "source" / "_posts" / "published.md", HEXO_PUBLISHED)
    write(src / "source" / "_posts" / "unpublished.md", HEXO_UNPUBLISHED)
    write(src / "source" / "_drafts" / "idea.md", HEXO_DRAFT)
    write(src / "content" / "posts" / "draft.md", HUGO_DRAFT)


def test_drafts_are_left_out_and_counted(tmp_path, capsys):
    write_blog_with_drafts(tmp_path / "src")
    assert main(["corpus", str(tmp_path / "src"), "--out", str(tmp_path / "out")]) == 0
    assert "skipped files        3 draft" in capsys.readouterr().out
    assert (tmp_path / "out" / "corpus.txt").read_text(encoding="utf-8") == "已发布的正文。"
    stats = json.loads((tmp_path / "out" / "stats.json").read_text(encoding="utf-8"))
    assert {s["path"] for s in stats["skipped_files"] if s["reason"] == "draft"} == {
        "source/_posts/unpublished.md",
        "source/_drafts/idea.md",
        "content/posts/draft.md",
    }


def test_include_drafts_keeps_them(tmp_path):
    write_blog_with_drafts(tmp_path / "src")
    assert main(["corpus", str(tmp_path / "src"), "--out", str(tmp_path / "out"), "--include-drafts"]) == 0
    text = (tmp_path / "out" / "corpus.txt").read_text(encoding="utf-8")
    assert text == "Hugo 的草稿。\n\n_drafts 里的草稿。\n\n已发布的正文。\n\n未发布的正文。"


def test_a_single_draft_post_is_used_only_with_include_drafts(tmp_path):
    post = write(tmp_path / "draft.md", HUGO_DRAFT)
    with pytest.raises(AnatomyError, match="draft.md: is a draft .*--include-drafts"):
        extract_corpus(post)
    assert extract_corpus(post, include_drafts=True)[0] == "Hugo 的草稿。"


# ---------------------------------------------------------------------------------------------
# Markup: HTML comments, template tags and raw HTML go; code and the Markdown stay
# ---------------------------------------------------------------------------------------------

HEXO_BLOG_POST = """---
title: 用 Hexo 写博客
date: 2018-03-04 21:30:00
tags:
  - hexo
categories: 折腾
---
用 Hexo 写博客的第一篇。

<!-- more -->

## 写作

{% blockquote 孔子 论语·学而 %}
学而时习之，不亦说乎。
{% endblockquote %}

{% asset_img cover.png 封面 %}

插入摘要分隔用 `<!-- more -->`，代码块这样写：

{% codeblock lang:html %}
<div class="note">{{ page.title }}</div>
{% endcodeblock %}

```yaml
# _config.yml
theme: next  # {% raw %}不是模板{% endraw %}
```
"""

HEXO_BLOG_CORPUS = """用 Hexo 写博客的第一篇。

## 写作

学而时习之，不亦说乎。

插入摘要分隔用 `<!-- more -->`，代码块这样写：

<div class="note">{{ page.title }}</div>

```yaml
# _config.yml
theme: next  # {% raw %}不是模板{% endraw %}
```"""

HEXO_TEMPLATE_TAGS = [
    "{% blockquote 孔子 论语·学而 %}",
    "{% endblockquote %}",
    "{% asset_img cover.png 封面 %}",
    "{% codeblock lang:html %}",
    "{% endcodeblock %}",
]

HEXO_DRAFT_WITH_MORE = """---
title: 下一篇
---
还没写完。
<!-- more -->
{% post_link hello %}
"""


def test_a_hexo_blog_gives_a_corpus_without_more_liquid_tags_or_drafts_and_counts_each(tmp_path, capsys):
    src = tmp_path / "source"
    write(src / "_posts" / "hello.md", HEXO_BLOG_POST)
    write(src / "_drafts" / "next.md", HEXO_DRAFT_WITH_MORE)
    assert main(["corpus", str(src), "--out", str(tmp_path / "out")]) == 0
    text = (tmp_path / "out" / "corpus.txt").read_text(encoding="utf-8")
    assert text == HEXO_BLOG_CORPUS
    out = capsys.readouterr().out
    assert "skipped files        1 draft" in out
    assert re.search(r"HTML comments +1 \(13 characters\)", out), out
    tags = sum(map(len, HEXO_TEMPLATE_TAGS))
    assert re.search(rf"template tags +5 \({tags} characters\)", out), out
    removed = json.loads((tmp_path / "out" / "stats.json").read_text(encoding="utf-8"))["markup_removed"]
    assert removed["html_comments"] == {"count": 1, "characters": len("<!-- more -->")}
    assert removed["template_tags"] == {"count": 5, "characters": tags}
    assert removed["html_tags"]["count"] == 0


JEKYLL_CODE_POST = """---
layout: post
title: "Liquid 与代码"
---
Inline `<br>` and ``{% include x %}`` stay; so does <https://jekyllrb.com/docs/>.

{% highlight html %}
<p>{{ page.title }}</p>
{% endhighlight %}

{% raw %}
{{ site.url }} {% if x %}
{% endraw %}

~~~
<!-- in a tilde fence -->
~~~

    <b>indented code</b> &amp;

1. A list item with code:

   ```html
   <i>in a list</i>
   ```
"""


def test_code_keeps_its_markup_as_written(tmp_path):
    write(tmp_path / "post.md", JEKYLL_CODE_POST)
    text, stats = extract_corpus(tmp_path)
    body = JEKYLL_CODE_POST.split("---\n", 2)[2].strip()
    for tag in ("{% highlight html %}\n", "{% endhighlight %}\n", "{% raw %}\n", "{% endraw %}\n"):
        body = body.replace(tag, "", 1)  # only the tags around code go, on lines of their own
    assert text == body
    assert stats["markup_removed"]["template_tags"]["count"] == 4


OLD_IMPORT_POST = """---
title: 旧博客导入
date: 2009-06-01 12:00:00
---
<p>导入自旧博客。</p>
<p><span style="font-size: 14px; font-family: 宋体;">&nbsp;&nbsp;那年夏天，我们在河边。</span></p>
<p><span style="font-size: 14px;">第一行<br />第二行</span></p>
<p><img src="http://example.com/photo.jpg" alt="" /></p>
<script type="text/javascript">var _gaq = _gaq || [];</script>
<p>AT&amp;T 和 [链接](http://example.com/?a=1&para=2)</p>

## 后记

旧文 <b>重发</b>。
"""


def test_raw_html_becomes_the_text_a_reader_sees(tmp_path):
    write(tmp_path / "post.md", OLD_IMPORT_POST)
    text, stats = extract_corpus(tmp_path)
    assert text == (
        "导入自旧博客。\n  那年夏天，我们在河边。\n第一行\n第二行\n"  # &nbsp; is a plain space
        "AT&T 和 [链接](http://example.com/?a=1&para=2)\n\n## 后记\n\n旧文 重发。"
    )
    tags = stats["markup_removed"]["html_tags"]
    assert tags["count"] == 20  # 5 <p>, 5 </p>, 2 <span>, 2 </span>, <br />, <img />, <script>, </script>, <b>, </b>
    assert tags["characters"] > len(OLD_IMPORT_POST) // 2  # most of this post was markup


MATH_POST = """---
title: 不等式
mathjax: true
---
当 $x<y$ 且 $y<z$ 时，有 $x<z$。

> 引用：a<b 则 b>a。

详见 <https://zh.wikipedia.org/wiki/不等式> 或写信给 <me@example.com>；AT&T 的 &copy 不是实体。
"""


def test_a_less_than_sign_that_starts_no_html_is_text(tmp_path):
    # An HTML parser alone would read `<y$ ... >` as one tag, across paragraphs, and drop it;
    # CommonMark (and so this step) reads it as text. Autolinks stay too.
    write(tmp_path / "post.md", MATH_POST)
    text, stats = extract_corpus(tmp_path)
    assert text == MATH_POST.split("---\n", 2)[2].strip()
    assert stats["markup_removed"]["html_tags"] == {"count": 0, "characters": 0}


HUGO_SHORTCODE_POST = """+++
title = "Hugo 短代码"
date = 2021-01-01T10:00:00+08:00
+++

{{< figure src="/images/river.jpg" title="河边" >}}

## 代码

{{< highlight go "linenos=table" >}}
fmt.Println("<b>不是标签</b>")
{{< /highlight >}}

{{% notice tip %}}
提示里的文字保留。
{{% /notice %}}
"""


def test_hugo_shortcodes_go_and_highlighted_code_stays(tmp_path):
    write(tmp_path / "content" / "posts" / "shortcodes.md", HUGO_SHORTCODE_POST)
    text, stats = extract_corpus(tmp_path)
    assert text == '## 代码\n\nfmt.Println("<b>不是标签</b>")\n\n提示里的文字保留。'
    assert stats["markup_removed"]["template_tags"]["count"] == 5


@pytest.mark.parametrize("post", [HEXO_BLOG_POST, JEKYLL_CODE_POST, OLD_IMPORT_POST, HUGO_SHORTCODE_POST])
def test_keep_markup_keeps_the_body_as_written(tmp_path, post):
    write(tmp_path / "post.md", post)
    text, stats = extract_corpus(tmp_path, keep_markup=True)
    assert text == extract_corpus(tmp_path / "post.md", keep_markup=True)[0]
    assert text == re.split(r"^(?:---|\+\+\+)$", post, maxsplit=2, flags=re.MULTILINE)[2].strip()
    assert stats["markup_kept"] is True


@pytest.mark.parametrize("post", [HEXO_BLOG_POST, JEKYLL_CODE_POST, OLD_IMPORT_POST, HUGO_SHORTCODE_POST])
def test_the_kinds_removed_add_up_to_what_went(tmp_path, post):
    write(tmp_path / "post.md", post)
    kept = extract_corpus(tmp_path, keep_markup=True)[0]
    tally = MarkupTally()
    cleaned = clean_markup(kept, tally)
    assert sum(tally.characters.values()) == len(kept) - len(cleaned) > 0


def test_cli_says_when_markup_is_kept(tmp_path, capsys):
    write(tmp_path / "src" / "post.md", HEXO_BLOG_POST)
    assert main(["corpus", str(tmp_path / "src"), "--out", str(tmp_path / "out"), "--keep-markup"]) == 0
    assert "markup               kept as written (--keep-markup)" in capsys.readouterr().out
    assert "<!-- more -->\n\n## 写作" in (tmp_path / "out" / "corpus.txt").read_text(encoding="utf-8")


# ---------------------------------------------------------------------------------------------
# Character hygiene, and a corpus too small to train on
# ---------------------------------------------------------------------------------------------

# Pasted from elsewhere: a backspace, an icon-font glyph (private use), two characters a decoder
# could not read (U+FFFD), and a tab, which is meant.
ODD_POST = """---
title: 复制粘贴的文章
---
第一段\x08。

\ue600 图标字体，乱码 \ufffd\ufffd。

\t缩进的一行。
"""


def test_odd_characters_are_counted_and_reported_in_one_line(tmp_path, capsys):
    write(tmp_path / "src" / "post.md", ODD_POST)
    assert main(["corpus", str(tmp_path / "src"), "--out", str(tmp_path / "out")]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "odd characters" in line]
    assert lines == [
        (
            "  odd characters       1 control, 1 private use, 2 U+FFFD (U+0008, U+E600, U+FFFD): "
            "each enters the vocabulary; stats.json lists them"
        )
    ]
    stats = json.loads((tmp_path / "out" / "stats.json").read_text(encoding="utf-8"))
    assert stats["odd_characters"] == {
        **dict.fromkeys(ODD_KINDS, 0),
        "control": 1,
        "private_use": 1,
        "replacement": 2,
        "found": {"U+0008": 1, "U+E600": 1, "U+FFFD": 2},
    }


def test_a_corpus_too_small_to_train_is_warned_of_with_the_minimum(tmp_path, capsys):
    from anatomy.data.tokenizer import DEFAULT_CTX_LEN, min_corpus_length

    write(tmp_path / "src" / "post.md", HUGO_POST)
    assert main(["corpus", str(tmp_path / "src"), "--out", str(tmp_path / "out")]) == 0
    error = capsys.readouterr().err
    minimum = min_corpus_length(DEFAULT_CTX_LEN + 1)
    # written all the same: a warning, not an error
    text = (tmp_path / "out" / "corpus.txt").read_text(encoding="utf-8")
    assert error.startswith(f"warning: {len(text)} characters are too few to train on")
    assert f"at ctx_len {DEFAULT_CTX_LEN}: tokenizing needs at least {minimum:,}" in error
    assert error.count("\n") == 1


# ---------------------------------------------------------------------------------------------
# The corpus on real input: what real blogs hold, each a clear line or a corpus that works
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow  # seconds: CI runs it, the inner loop leaves it out
def test_the_workflow_stops_its_plan_at_a_file_name_that_is_not_utf8(tmp_path):
    """Snakemake cannot write such a name into its lock files (the run died there, after a plan
    that passed): the plan stops, naming the file, even an image that extraction would skip."""
    write(tmp_path / "p" / "post.md", JEKYLL_POST)
    write_gbk_named_image(tmp_path / "p")
    env = {key: value for key, value in os.environ.items() if key != "ANATOMY_LIFELINE"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    snakemake = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "workflow" / "Snakefile")]
    result = subprocess.run(
        [*snakemake, "--directory", str(tmp_path), "-n", "results/corpus/split.json", "--config", "corpus=p"],
        capture_output=True,
        text=True,
        errors="replace",  # the plan that passed printed the name as it is
        env=env,
    )
    assert result.returncode != 0
    assert (
        "corpus file 'p/images/\\xc4\\xe3\\xba\\xc3.jpg' (config key `corpus`): the name is not UTF-8 "
        "(its bytes shown as \\xNN); rename it"
    ) in result.stdout + result.stderr


def test_a_page_of_paragraphs_and_a_paragraph_of_stray_tags_take_linear_time():
    # Each took minutes when every line break looked through all the parts after it, and every
    # stray `{%` was searched past to the paragraph's end (quadratic); now about a second.
    assert clean_markup("<p>字</p>" * 200_000, MarkupTally()) == "字\n" * 200_000
    stray = "{% 没有闭合 " * 40_000
    tally = MarkupTally()
    assert clean_markup(stray + "{% tag %}", tally) == stray
    assert tally.count["template_tags"] == 1


@pytest.mark.parametrize(
    "unclosed",
    [
        "<!-- 没有闭合 ",
        "<? 没有闭合 ",
        "<![CDATA[ 没有闭合 ",
        "{% raw %} 没有闭合 ",
        "{% codeblock %} 没有闭合\n",
        "{{< highlight go >}} 没有闭合\n",
    ],
)
def test_thousands_of_unclosed_openings_take_linear_time(unclosed):
    # Each opening was searched past to the end of the text for its closing: 8,000 unclosed
    # `<!--` took 12 s, 1,000 unclosed `{% raw %}` 41 s; now a fraction of a second. None is
    # markup or code, so the text stays as written, less the template openings' tags.
    text = unclosed * 8_000
    cleaned = clean_markup(text, MarkupTally())
    tag = unclosed.split(" 没有闭合")[0]
    assert cleaned == (text if tag.startswith("<") else text.replace(tag, ""))


def test_raw_html_is_passed_over_whole_and_a_closed_code_block_after_unclosed_ones_is_code():
    assert clean_markup("前 <!-- a < b --> 后", MarkupTally()) == "前  后"
    assert clean_markup('<a title="x<y">链接</a>', MarkupTally()) == "链接"
    # an unclosed kind is given up once; a later block of another kind is still code
    text = "{% highlight %} 无\n\n" * 3 + "{% raw %}{{ 保留 }}{% endraw %} {% highlight %}"
    assert [code for is_code, code in code_and_prose(text) if is_code] == ["{{ 保留 }}"]


def test_a_stray_template_opening_keeps_the_text_after_it(tmp_path):
    write(tmp_path / "post.md", "写 {% 开头，{% note %} 之后的字。\n")
    text, stats = extract_corpus(tmp_path)
    assert text == "写 {% 开头， 之后的字。"
    assert stats["markup_removed"]["template_tags"] == {"count": 1, "characters": len("{% note %}")}


def test_a_linked_folder_is_named_not_followed_and_a_linked_file_is_read(tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    write(elsewhere / "notes" / "linked-folder-post.md", "from the linked folder")
    write(elsewhere / "single.md", "from the linked file")
    src = tmp_path / "src"
    write(src / "post.md", "kept")
    (src / "notes").symlink_to(elsewhere / "notes", target_is_directory=True)
    (src / "single.md").symlink_to(elsewhere / "single.md")
    assert main(["corpus", str(src), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "skipped files        1 linked folder" in out
    assert "folders left out     notes/ (linked folder)" in out
    assert (tmp_path / "out" / "corpus.txt").read_text(encoding="utf-8") == "kept\n\nfrom the linked file"
    stats = json.loads((tmp_path / "out" / "stats.json").read_text(encoding="utf-8"))
    assert stats["skipped_files"] == [{"path": "notes/", "reason": "linked folder"}]


def refuse_to_list(monkeypatch, folder: Path) -> None:
    """`folder` cannot be listed, as after chmod 000 (which does not stop root, who runs tests)."""
    real_scandir = os.scandir

    def scandir(path="."):
        if Path(os.fsdecode(path)) == folder:
            raise PermissionError(13, "Permission denied", os.fsdecode(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)


def test_a_folder_that_cannot_be_read_is_named(tmp_path, monkeypatch, capsys):
    src = tmp_path / "src"
    write(src / "post.md", "kept")
    write(src / "private" / "secret.md", "unseen")
    refuse_to_list(monkeypatch, src / "private")
    assert main(["corpus", str(src), "--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: {src / 'private'}: cannot read the folder: Permission denied; --skip-bad")
    assert error.count("\n") == 1

    assert main(["corpus", str(src), "--out", str(tmp_path / "out"), "--skip-bad"]) == 0
    assert "folders left out     private/ (bad)" in capsys.readouterr().out
    stats = json.loads((tmp_path / "out" / "stats.json").read_text(encoding="utf-8"))
    assert stats["skipped"] == {"bad": 1}
    assert stats["skipped_files"][0]["path"] == "private/"


def test_a_source_folder_that_cannot_be_read_says_so(tmp_path, monkeypatch):
    refuse_to_list(monkeypatch, tmp_path)
    with pytest.raises(AnatomyError, match=rf"^{re.escape(str(tmp_path))}: cannot read the folder: Permission denied$"):
        extract_corpus(tmp_path)


# A post with a table of characters, in a code block: most of them used nowhere else
TABLE = "```\n" + "".join(chr(0x4E00 + i) for i in range(300)) + "\n```\n"
TABLE_POST = "## 字表\n\n" + TABLE


def test_the_posts_that_bring_characters_found_in_no_other_post_are_named_with_their_cost(tmp_path, capsys):
    write(tmp_path / "src" / "a-prose.md", "## 字表\n\n" + "学而时习之，不亦说乎。" * 3)
    # The table twice, as in the blog that asked for this: counted by occurrence ("seen once"),
    # none of its characters counted, and the post went unnamed.
    write(tmp_path / "src" / "b-table.md", TABLE_POST + "\n" + TABLE)  # 5 of them are the prose's too
    write(tmp_path / "src" / "c-one.md", "学而时习之，不亦说乎。鼎")  # 鼎: here only
    assert main(["corpus", str(tmp_path / "src"), "--out", str(tmp_path / "out")]) == 0
    stats = json.loads((tmp_path / "out" / "stats.json").read_text(encoding="utf-8"))
    assert stats["in_one_post"] == {  # b-table: 295 of its characters, and the backtick
        "characters": 297,
        "d_model": 128,
        "embedding_parameters": 2 * 128 * 297,
        "posts": [{"path": "b-table.md", "characters": 296}, {"path": "c-one.md", "characters": 1}],
    }
    lines = [line for line in capsys.readouterr().out.splitlines() if "in one post only" in line]
    assert lines == [
        f"  in one post only     297 of {stats['distinct_characters']} distinct characters, 76,032 embedding "
        "parameters (2 x d_model 128 each: input embedding and output projection); the most from b-table.md (296), "
        "c-one.md (1)"
    ]


def test_one_post_bringing_a_thousand_characters_no_other_post_holds_is_warned_of_by_name(tmp_path, capsys):
    table = "".join(chr(0x4E00 + i) for i in range(1200))
    write(tmp_path / "src" / "a-prose.md", "## 学而\n\n" + "学而时习之，不亦说乎。" * 200)
    write(tmp_path / "src" / "b-table.md", f"## 字表\n\n| 字 |\n| --- |\n| {table} |\n\n{table}\n")
    assert main(["corpus", str(tmp_path / "src"), "--out", str(tmp_path / "out")]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "alone brings" in line]
    assert len(warnings) == 1
    assert warnings[0].startswith("warning: b-table.md alone brings 1,1")  # its characters less the prose's
    assert "found in no other post" in warnings[0] and "draft: true" in warnings[0]


def test_the_default_corpus_is_not_warned_of_for_its_rarer_characters(capsys):
    from anatomy.data.corpus_stats import vocabulary_warning

    stats = extract_corpus(DEFAULT_POSTS)[1]
    assert vocabulary_warning(stats) is None
    assert stats["in_one_post"]["posts"][0]["characters"] < 100  # 62 at most: classical poems


def test_zero_width_characters_are_odd_characters(tmp_path):
    write(tmp_path / "post.md", "零\u200b宽\u200c字\u200d符\u2060和\ufeff字节序标记\u200b")
    odd = extract_corpus(tmp_path)[1]["odd_characters"]
    assert odd["zero_width"] == 6
    assert odd["found"] == {"U+200B": 2, "U+200C": 1, "U+200D": 1, "U+2060": 1, "U+FEFF": 1}


def test_out_with_a_read_only_parent_is_one_line(tmp_path, monkeypatch, capsys):
    write(tmp_path / "src" / "post.md", JEKYLL_POST)
    parent = tmp_path / "read-only"
    parent.mkdir()
    parent.chmod(0o555)
    real_mkdir = os.mkdir

    def mkdir(path, mode=0o777, **kwargs):  # chmod does not stop root, who runs the tests
        if Path(path).parent == parent:
            raise PermissionError(13, "Permission denied", os.fsdecode(path))
        return real_mkdir(path, mode, **kwargs)

    monkeypatch.setattr(os, "mkdir", mkdir)
    assert main(["corpus", str(tmp_path / "src"), "--out", str(parent / "out")]) == 2
    error = capsys.readouterr().err
    assert error == (  # and what to do, in the words every command uses (collect's too)
        f"error: --out {parent / 'out'}: cannot write {parent / 'out'}: Permission denied; run the command in a "
        "copy of the project you may write to, or point --out at a folder you may write to\n"
    )


def test_out_that_is_a_link_to_nothing_is_one_line(tmp_path, capsys):
    write(tmp_path / "src" / "post.md", JEKYLL_POST)
    (tmp_path / "out").symlink_to(tmp_path / "gone")
    assert main(["corpus", str(tmp_path / "src"), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == (
        f"error: --out {tmp_path / 'out'}: {tmp_path / 'out'} is a symbolic link to {tmp_path / 'gone'}, which "
        "does not exist; make that folder, or give another --out\n"
    )


def yaml_alias_bomb(levels: int) -> str:
    """Front matter lines whose last alias stands for 9**levels strings once expanded."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines)


def test_a_yaml_alias_bomb_in_front_matter_loads_at_once(tmp_path):
    # The bomb's lists are shared, not copied, so it loads in a moment; nothing may walk or print
    # its expanded copies (9**9 strings), not even a draft flag that names it (below).
    write(tmp_path / "bomb.md", f"---\ntitle: t\n{yaml_alias_bomb(9)}\ndate: 2016-02-30\n---\nbody\n")
    assert extract_corpus(tmp_path)[0] == "body"


class Unprintable(list):
    """A front matter value that must not be turned into text (an alias bomb would print for ever)."""

    def __repr__(self):
        raise AssertionError("printed")


def test_a_draft_flag_that_is_a_list_is_not_printed_to_be_read():
    assert is_draft({"draft": Unprintable(), "published": Unprintable()}) is False
    assert is_draft({"draft": True}) and is_draft({"published": "False"}) and not is_draft({"draft": "no"})


def test_the_small_corpus_warning_names_the_drafts_left_out_and_the_settings(tmp_path, capsys):
    write_blog_with_drafts(tmp_path / "src")
    assert main(["corpus", str(tmp_path / "src"), "--out", str(tmp_path / "out")]) == 0
    error = capsys.readouterr().err
    assert "add posts, or bring back the drafts left out (3) with --include-drafts" in error
    assert "or use a shorter context: `anatomy tokenize --ctx-len N`, then train with ctx_len=N" in error
    assert error.count("\n") == 1


SITE_ROOTS = {
    "hugo": (
        "archetypes/default.md",
        '---\ntitle: "{{ replace .File.ContentBaseName "-" " " | title }}"\ndate: {{ .Date }}\ndraft: true\n---\n',
        "content/posts",
        "Hugo",
    ),
    "hexo": ("scaffolds/post.md", "---\ntitle: {{ title }}\ndate: {{ date }}\ntags:\n---\n", "source/_posts", "Hexo"),
}


@pytest.mark.parametrize("site", sorted(SITE_ROOTS))
def test_a_site_root_is_pointed_to_its_posts_folder(tmp_path, site):
    template, text, posts, name = SITE_ROOTS[site]
    write(tmp_path / template, text)
    write(tmp_path / posts / "hello.md", JEKYLL_POST)
    with pytest.raises(AnatomyError) as err:
        extract_corpus(tmp_path)
    message = str(err.value)
    assert message.startswith(f"{tmp_path / template}: front matter is not valid YAML")
    assert message.endswith(
        f"; {tmp_path} looks like the root of a {name} site ({template.split('/')[0]}/ holds templates for new "
        f"posts, not posts): give its posts folder instead, e.g. {tmp_path / posts}"
    )
    assert extract_corpus(tmp_path / posts)[1]["posts"] == 1


# ---------------------------------------------------------------------------------------------
# Nothing hangs or eats the machine: only regular files are read, and only so much of them


def test_a_named_pipe_or_a_link_to_a_device_named_like_a_post_is_skipped_and_named(tmp_path):
    """Opening a named pipe waits for a writer, for good; /dev/zero never ends. Neither is
    opened: each is counted among the skipped files, and named in the report and in stats.json."""
    src = tmp_path / "posts"
    write(src / "post.md", "kept")
    os.mkfifo(src / "pipe.md")
    (src / "notes").mkdir()
    (src / "notes" / "zero.md").symlink_to("/dev/zero")
    done = run_anatomy("corpus", str(src), "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert "  skipped files        2 not a regular file\n" in done.stdout
    assert (
        "  not regular files    notes/zero.md (a character device), pipe.md (a named pipe): not read\n" in done.stdout
    )
    assert (tmp_path / "out" / "corpus.txt").read_text(encoding="utf-8") == "kept"
    stats = json.loads((tmp_path / "out" / "stats.json").read_text(encoding="utf-8"))
    assert stats["skipped_files"] == [
        {"path": "notes/zero.md", "reason": "not a regular file", "kind": "a character device"},
        {"path": "pipe.md", "reason": "not a regular file", "kind": "a named pipe"},
    ]


@pytest.mark.parametrize("kind", ["pipe", "zero"])
def test_a_named_pipe_or_a_device_given_as_the_source_is_one_line(tmp_path, kind):
    src = tmp_path / "corpus.txt"
    if kind == "pipe":
        os.mkfifo(src)
    else:
        src.symlink_to("/dev/zero")
    what = "a named pipe" if kind == "pipe" else "a character device"
    done = run_anatomy("corpus", str(src), "--out", str(tmp_path / "out"))
    assert (done.returncode, done.stderr) == (
        2,
        f"error: {src}: is not a regular file ({what}): expected a text file\n",
    )


def test_a_post_too_long_to_be_one_is_named_not_read(tmp_path, monkeypatch, capsys):
    """A "post" of gigabytes (a dump renamed .md) is not read into memory: it cannot be used,
    like any broken post, and --skip-bad leaves it out."""
    from anatomy.data import posts

    monkeypatch.setattr(posts, "POST_LIMIT", 1024)  # the real one: 64 MiB
    src = tmp_path / "posts"
    write(src / "post.md", "kept")
    write(src / "dump.md", "x" * 2000)
    assert main(["corpus", str(src), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == (
        f"error: {src / 'dump.md'}: 2.0 KiB is more than a Markdown post should hold (1.0 KiB at most), so it is "
        "not read; --skip-bad leaves it out of the corpus\n"
    )
    assert main(["corpus", str(src), "--out", str(tmp_path / "out"), "--skip-bad"]) == 0
    assert (tmp_path / "out" / "corpus.txt").read_text(encoding="utf-8") == "kept"


def test_a_huge_corpus_and_stats_in_out_are_replaced_unread(tmp_path):
    """To leave an unchanged file as it is, the command compared it with the new bytes by reading
    it whole: a 2 GiB sparse stats.json in --out ended in a MemoryError traceback under a memory
    cap. A file of another size is another file, replaced without a read."""
    src, out = tmp_path / "posts", tmp_path / "out"
    write(src / "post.md", "kept")
    out.mkdir()
    for name in ("corpus.txt", "stats.json"):
        with open(out / name, "wb") as sparse:  # no disk space: a hole past the command's memory cap
            sparse.truncate(MEMORY_CAP + 1024**3)
    done = run_anatomy("corpus", str(src), "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    assert (out / "corpus.txt").read_text(encoding="utf-8") == "kept"
    assert json.loads((out / "stats.json").read_text(encoding="utf-8"))["posts"] == 1
