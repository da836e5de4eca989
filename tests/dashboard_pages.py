"""Opening dashboard pages under Streamlit's AppTest: the builders every dashboard test shares.

A test module imports what it needs from here; importing `no_reference` (an autouse fixture) makes
its tests run without the shipped reference results, on the databases they build themselves.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from streamlit.components.v2 import manifest_scanner
from streamlit.testing.v1 import AppTest

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # the dashboard is an app folder, not an installed package
    sys.path.insert(0, str(REPO_ROOT))
from dashboard import loaders  # noqa: E402
from anatomy.results.collect import collect  # noqa: E402
from run_folders import LLAMA_PARTS, write_run_folder, write_scale_runs  # noqa: E402

APP = REPO_ROOT / "dashboard" / "streamlit_app.py"

# Each new AppTest reads the metadata of every installed package, looking for Streamlit components
# (a third of a second here, more on a busy machine: every page test pays it). A server looks once,
# when it starts; so do the tests, once per process (nothing is installed while they run).
_installed_components = functools.cache(manifest_scanner.scan_component_manifests)
manifest_scanner.scan_component_manifests = lambda max_workers=None: list(_installed_components())

# every page, by its file in dashboard/views/
PAGES = [
    "overview",
    "progress",
    "listen",
    "curves",
    "overfitting",
    "ablations",
    "breaks",
    "exams",
    "studies",
    "samples",
]


def pages_in_the_inner_loop(pages: list[str], *kept: str) -> list:
    """`pages` as parameters of a test that opens each: the `kept` ones run in every test run, the
    rest are marked slow, so that `pytest -m "not slow"` (README, "Tests") opens a page matrix in
    one or two cases and CI, which runs everything, still opens them all."""
    assert set(kept) <= set(pages), kept
    return [pytest.param(page, marks=() if page in kept else pytest.mark.slow) for page in pages]


@pytest.fixture(autouse=True)
def no_reference(tmp_path_factory, monkeypatch):
    """No shipped reference results unless a test ships some: the views are tested on their own."""
    empty = tmp_path_factory.mktemp("no_reference")
    monkeypatch.setattr(loaders, "REFERENCE_DIR", empty / "reference")
    monkeypatch.setattr(loaders, "REFERENCE_DB", empty / "reference.duckdb")


def open_page(
    db: Path | str, page: str, monkeypatch, language: str | None = None, params: dict | None = None
) -> AppTest:
    """The app on the database `db`, switched to views/PAGE.py, with no exception raised;
    `language`: opened by a link that asks for it (`?lang=zh_CN`); `params`: by a link with these
    query parameters.

    The page is opened straight away, as a link to it opens it: rendering the Overview first, as
    this did before, took half the time of a page test (the pages take their addresses from their
    file names, so AppTest finds one before the first run)."""
    monkeypatch.setenv("ANATOMY_DB", str(db))
    app = AppTest.from_file(str(APP), default_timeout=60)
    app.query_params = dict(params or {})
    if language is not None:
        app.query_params["lang"] = language
    if page != "overview":
        app.switch_page(f"views/{page}.py")
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    # an address no page has opens the Overview without a word: check, from AppTest's record of
    # the page its run finished on, that the page drawn is the one asked for (the record is
    # AppTest's own: were an upgrade to rename it, this line would fail, not pass unchecked)
    ran = app._registered_pages.get(app._finished_page_script_hash, {}).get("script_path")
    assert ran and Path(ran).name == f"{page}.py", f"asked for views/{page}.py, the app drew {ran}"
    return app


def texts(app: AppTest) -> str:
    """Every piece of prose on the page, one string (metrics as their label and value)."""
    parts = []
    for kind in ("title", "header", "subheader", "markdown", "caption", "info", "warning", "error", "text"):
        parts += [str(element.value) for element in getattr(app, kind)]
    parts += [str(m.label) + str(m.value) for m in app.metric]
    return "\n".join(parts)


def chart_tables(app: AppTest) -> list[pd.DataFrame]:
    """The data behind each Altair chart on the page, one DataFrame per chart (all layers)."""
    tables = []
    for chart in app.get("vega_lite_chart"):
        frames = [pa.ipc.open_stream(d.data.data).read_all().to_pandas() for d in chart.proto.datasets]
        tables.append(pd.concat(frames, ignore_index=True) if frames else pd.DataFrame())
    return tables


def chart_specs(app: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in app.get("vega_lite_chart")]


ENGLISH_WORDS = re.compile(r"[A-Za-z]+(?:[ ,:'-]+[A-Za-z]+){3,}")  # four English words in a row


def english_left(app: AppTest, data: list[str]) -> list[str]:
    """The page's prose lines that still hold an English sentence, leaving out code (backticks) and
    `data`: texts the database stores as written (samples, an exam's reason), which no catalogue has."""
    left = []
    for line in texts(app).splitlines():
        prose = re.sub(r"`[^`]*`", "", line)
        for stored in data:
            prose = prose.replace(stored, "")
        if ENGLISH_WORDS.search(prose) and not any(line.strip() in stored for stored in data):
            left.append(line)
    return left


def curve_labels(app: AppTest) -> set[str]:
    """The runs the Curves page draws in its loss chart (its first): each run's own line, or the
    runs each experiment's line is the mean of."""
    chart = chart_tables(app)[0]
    if "label" in chart:
        return set(chart["label"].dropna())
    return {label for labels in chart["run_labels"].dropna() for label in labels.split("; ")}


@pytest.fixture(scope="session")
def grid_and_studies_db(dashboard_db, tmp_path_factory) -> Path:
    """The tiny grid's runs and exams, with a scale study at two sizes and a bf16 pair beside them."""
    root = tmp_path_factory.mktemp("grid_and_studies")
    shutil.copytree(dashboard_db.parent / "runs", root / "runs")
    shutil.copytree(dashboard_db.parent / "exams", root / "exams")
    write_scale_runs(root / "runs", {"s": (2.0, 2.0), "l": (1.8, 1.5)})
    for seed in (42, 7):
        bf16 = dict(group="precision", train={"precision": "bf16"})
        write_run_folder(root / "runs", "vanilla_bf16", seed, preset="vanilla", floor=2.3, **bf16)
        write_run_folder(root / "runs", "llama_bf16", seed, preset="llama", model=LLAMA_PARTS, floor=2.1, **bf16)
    db = root / "anatomy.duckdb"
    collect(root / "runs", db, exams_root=root / "exams", experiments_path=dashboard_db.parent / "experiments.json")
    return db
