"""Walking a folder of posts: which files are posts (and which are skipped, and why), reading
each (front matter off, markup out), and every post that cannot be used, named in one run.

Hidden files, files that are not Markdown and drafts are skipped and counted, so nothing is mixed
in, or left out, silently; so are folders linked in (not followed), folders that cannot be read
and Markdown names that are no regular file (a named pipe, a link to a device: never opened,
since reading one waits for good or never ends), each named. A post too long to be one
(POST_LIMIT) is not read. The folder is walked with a list of folders still to look in, not by
recursion, so no depth of nesting runs out of stack.
"""

from __future__ import annotations

import errno
import os
import stat
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from anatomy.data.front_matter import is_draft, normalise_newlines, split_front_matter
from anatomy.data.markup import MarkupTally, clean_markup
from anatomy.data.text_files import read_utf8
from anatomy.errors import AnatomyError
from anatomy.files.atomic import file_kind, folder_entries

# The names Jekyll reads as Markdown (its markdown_ext), .mdown, and MDX (Markdown with JSX, whose
# import/export lines, JSX tags and {expressions} markup.py removes)
MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdown", ".mkdown", ".mkdn", ".mkd", ".mdx")
MDX_SUFFIX = ".mdx"
TEXT_SUFFIX = ".txt"
DRAFTS_FOLDER = "_drafts"  # Hexo's and Jekyll's unpublished posts
# The most one post may hold. The whole default corpus is 0.3 MB and the scale study's largest
# text about 24 MB; a "post" of more than 64 MiB is something else (a dump, a log renamed .md),
# and reading it whole would take several times its size in memory.
POST_LIMIT = 64 * 1024**2
NOT_REGULAR = "not a regular file"  # the reason a Markdown name that is no file is skipped


@dataclass(frozen=True)
class Options:
    """The choices `anatomy corpus` offers on its command line (corpus.py, `add_arguments`)."""

    skip_bad: bool = False  # leave out posts that cannot be used, listed in stats.json
    include_drafts: bool = False  # keep drafts: _drafts/, draft: true, published: false
    keep_markup: bool = False  # keep HTML comments, template tags and raw HTML as written


def shown(path: str | os.PathLike) -> str:
    """A path (or a message naming one) as text that can be printed and written to JSON: a name
    that is not UTF-8 (say GBK bytes from a zip made on Windows) shows its bytes as \\xNN."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def is_utf8_name(name: str) -> bool:
    # os.walk hands bytes that are not UTF-8 over as lone surrogates, which cannot be encoded.
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def find_posts(folder: Path) -> tuple[list[Path], list[dict], list[dict]]:
    """Markdown files under `folder` (relative paths, sorted), the files and folders skipped with
    why, and those that cannot be used: names that are not UTF-8 (never opened: their names could
    not be stored) and folders that cannot be read. A folder's entries end in "/".

    The folders still to look in are kept in a list: os.walk (Python 3.11) recurses once per
    level, and about 990 nested folders ended in a RecursionError."""
    posts, skipped, bad = [], [], []
    to_visit = [folder]
    while to_visit:
        root_path = to_visit.pop()
        try:
            dirs, files = folder_entries(root_path)
        except OSError as err:
            if root_path == folder:
                raise AnatomyError(f"{shown(folder)}: cannot read the folder: {err.strerror}") from None
            bad.append(unreadable_folder(folder, root_path, err))
            continue
        for name in sorted(dirs + files):
            if not is_utf8_name(name):
                where = shown(root_path / name)
                bad.append(
                    {
                        "path": shown((root_path / name).relative_to(folder)) + ("/" if name in dirs else ""),
                        "error": f"{where}: the name is not UTF-8 (its bytes shown as \\xNN); rename it",
                    }
                )
        followed = []
        for name in sorted(dirs):
            if not is_utf8_name(name):
                continue
            entry = (root_path / name).relative_to(folder).as_posix() + "/"
            if name.startswith("."):  # .git, .obsidian...: skipped whole, counted once
                skipped.append({"path": entry, "reason": "hidden"})
                continue
            try:
                is_link = (root_path / name).is_symlink()
            except OSError as err:  # its path is too long to look at (some 2,050 folders deep)
                bad.append(unreadable_folder(folder, root_path / name, err))
                continue
            if is_link:
                # Not followed (a link can lead out of the blog, or back into it, round and round),
                # as the workflow's list of corpus files does not follow it: named instead.
                skipped.append({"path": entry, "reason": "linked folder"})
            else:
                followed.append(name)
        to_visit += [root_path / name for name in reversed(followed)]
        for name in files:
            relative = (root_path / name).relative_to(folder)
            if not is_utf8_name(name):
                continue
            if name.startswith("."):
                skipped.append({"path": relative.as_posix(), "reason": "hidden"})
            elif not name.lower().endswith(MARKDOWN_SUFFIXES):
                skipped.append({"path": relative.as_posix(), "reason": "not markdown"})
            elif (kind := special_file_kind(root_path / name)) is not None:
                skipped.append({"path": relative.as_posix(), "reason": NOT_REGULAR, "kind": kind})
            else:
                posts.append(relative)
    # Sorting on path parts gives the same order on every file system and OS.
    posts.sort(key=lambda p: p.parts)
    return posts, skipped, bad


# Past this many levels a folder too deep to read is named by its first and last ones
NESTING_SHOWN = 3


def unreadable_folder(folder: Path, path: Path, err: OSError) -> dict:
    """The entry of `bad` for a folder below `folder` that cannot be read or looked at. A path
    longer than the system allows (PATH_MAX, 4,096 bytes on Linux: some 2,050 nested folders) is
    named by its depth and its first and last folders, since printed whole it would be that long:
    in the error, and as the entry's path, which the summary prints and stats.json keeps."""
    relative = path.relative_to(folder)
    if err.errno != errno.ENAMETOOLONG:
        where = err.filename if err.filename is not None else path
        return {
            "path": shown(relative.as_posix() + "/"),
            "error": f"{shown(where)}: cannot read the folder: {err.strerror}",
        }
    ends = nesting_ends(relative)
    return {
        "path": shown(ends.as_posix() + "/"),
        "error": f"{shown(folder / ends)}: cannot read the folder, {len(relative.parts):,} levels deep: "
        "its path is longer than the system allows; expected posts in folders nested less deep",
    }


def nesting_ends(relative: Path) -> Path:
    """A deep path by its first and last NESTING_SHOWN folders, "..." between them."""
    parts = relative.parts
    if len(parts) > 2 * NESTING_SHOWN:
        parts = (*parts[:NESTING_SHOWN], "...", *parts[-NESTING_SHOWN:])
    return Path(*parts)


def special_file_kind(path: Path) -> str | None:
    """What a Markdown name is when it is no regular file (a link is followed): "a named pipe",
    "a character device"...; None for a regular file, and for a path that cannot be looked at
    (a link to nothing: reading it says why, as for any post)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) else file_kind(mode)


def read_post(path: Path) -> tuple[dict, str]:
    """A Markdown post's metadata, and its text without the front matter."""
    text = read_utf8(path, POST_LIMIT, "a Markdown post")
    return split_front_matter(normalise_newlines(text), path)


def front_matter_warning(path: Path) -> str | None:
    """For `anatomy tokenize` given a post instead of a corpus.txt: it tokenizes every character,
    so the post's front matter (title, date, tags) would become training text."""
    if path.suffix.lower() not in MARKDOWN_SUFFIXES or not path.is_file():
        return None
    text = normalise_newlines(read_utf8(path))
    try:
        has_front_matter = split_front_matter(text, path)[1] != text
    except AnatomyError:  # front matter that does not parse is front matter all the same
        has_front_matter = True
    if not has_front_matter:
        return None
    return (
        f"{shown(path)} looks like a Markdown post with front matter, which is tokenized as text; "
        f"`python -m anatomy corpus {shown(path)} --out DIR` strips it"
    )


def in_drafts_folder(relative: Path) -> bool:
    return DRAFTS_FOLDER in relative.parts[:-1]


def is_mdx(path: Path) -> bool:
    return path.suffix.lower() == MDX_SUFFIX


def post_text(path: Path, body: str, options: Options, tally: MarkupTally) -> str:
    """A post's body as it enters the corpus: markup removed (unless kept), outer blank lines too."""
    if not options.keep_markup:
        try:
            body = clean_markup(body, tally, mdx=is_mdx(path))
        except AnatomyError as err:  # a crafted post that leaves markup.py no stand-in character
            raise AnatomyError(f"{shown(path)}: {err}") from None
    return body.strip()


def extract_folder(folder: Path, options: Options) -> tuple[list[str], list[dict], list[dict], MarkupTally]:
    """(post bodies, their lengths, skipped files, markup removed) for a folder of posts.

    Every post is read before any error is raised, so one run reports all the bad ones.
    """
    paths, skipped, bad = find_posts(folder)
    bodies, lengths, tally = [], [], MarkupTally()
    for relative in paths:
        name = relative.as_posix()
        if in_drafts_folder(relative) and not options.include_drafts:
            skipped.append({"path": name, "reason": "draft"})
            continue
        try:
            metadata, body = read_post(folder / relative)
            if is_draft(metadata) and not options.include_drafts:
                skipped.append({"path": name, "reason": "draft"})
                continue
            body = post_text(folder / relative, body, options, tally)
        except AnatomyError as err:
            bad.append({"path": name, "error": shown(str(err))})
            continue
        if not body:  # e.g. Hugo's _index.md: front matter only
            skipped.append({"path": name, "reason": "empty"})
            continue
        bodies.append(body)
        lengths.append({"path": name, "characters": len(body)})
    if bad and not options.skip_bad:
        raise bad_files_error(folder, bad)
    skipped += [{"path": b["path"], "reason": "bad", "error": b["error"]} for b in bad]
    if not bodies:
        raise AnatomyError(f"{shown(folder)}: no Markdown posts with text ({suffix_list()}){skip_summary(skipped)}")
    return bodies, lengths, sorted(skipped, key=lambda s: s["path"]), tally


def bad_files_error(folder: Path, bad: list[dict]) -> AnatomyError:
    """One line per bad file, so that all of them can be fixed before the next run."""
    hint = site_root_hint(folder, bad) or "--skip-bad leaves {} out of the corpus".format(
        "it" if len(bad) == 1 else "them"
    )
    if len(bad) == 1:
        return AnatomyError(f"{bad[0]['error']}; {hint}")
    lines = [f"{shown(folder)}: {len(bad)} files cannot be used ({hint}):"]
    lines += [f"  {b['error']}" for b in sorted(bad, key=lambda b: b["path"])]
    return AnatomyError("\n".join(lines))


# A site's folder of templates for new posts (front matter full of `{{ .Date }}`, which no parser
# reads), and the posts folders to point at instead, first the usual one.
SITE_TEMPLATES = {"archetypes": ("Hugo", ("content/posts", "content")), "scaffolds": ("Hexo", ("source/_posts",))}


def site_root_hint(folder: Path, bad: list[dict]) -> str | None:
    """When bad files are a site's post templates, SRC is the site's root: where its posts are."""
    for templates in (b["path"].split("/")[0] for b in bad):
        if templates in SITE_TEMPLATES:
            site, candidates = SITE_TEMPLATES[templates]
            posts = next((folder / c for c in candidates if (folder / c).is_dir()), folder / candidates[0])
            return (
                f"{shown(folder)} looks like the root of a {site} site ({templates}/ holds templates for new "
                f"posts, not posts): give its posts folder instead, e.g. {shown(posts)}"
            )
    return None


def extract_file(path: Path, options: Options) -> tuple[str, MarkupTally]:
    """A single file as the whole corpus: a .txt as it is, a Markdown post as a post in a folder."""
    suffix, tally = path.suffix.lower(), MarkupTally()
    if suffix not in (TEXT_SUFFIX, *MARKDOWN_SUFFIXES):
        raise AnatomyError(f"{path}: expected a folder of Markdown posts or a .txt file, got a '{path.suffix}' file")
    if suffix == TEXT_SUFFIX:
        text = normalise_newlines(read_utf8(path))
    else:
        metadata, text = read_post(path)
        if is_draft(metadata) and not options.include_drafts:
            raise AnatomyError(f"{path}: is a draft (draft: true or published: false); --include-drafts uses it")
        text = post_text(path, text, options, tally)
    if not text.strip():
        raise AnatomyError(f"{path}: the file is empty")
    return text, tally


def suffix_list() -> str:
    return ", ".join(MARKDOWN_SUFFIXES)


SUFFIXES_NAMED = 3  # the kinds of file named when a folder holds no posts


def skip_summary(skipped: list[dict]) -> str:
    """What was skipped, by reason; the files that are not Markdown by their kind (12 .rst, 3
    .html), so that a blog written in another format says so."""
    counts = Counter(s["reason"] for s in skipped)
    if not counts:
        return " (the folder is empty)"
    kinds = Counter(Path(s["path"]).suffix.lower() or "no suffix" for s in skipped if s["reason"] == "not markdown")
    named = {"not markdown": " (" + ", ".join(f"{n} {kind}" for kind, n in kinds.most_common(SUFFIXES_NAMED)) + ")"}
    return "; skipped: " + ", ".join(f"{n} {reason}{named.get(reason, '')}" for reason, n in sorted(counts.items()))
