"""The dashboard in a real browser: `streamlit run dashboard`, headless Chromium, screenshots.

AppTest runs the scripts but not the front end; this drives Debian's `chromium` over the
DevTools protocol (with the `websockets` package Streamlit already depends on), waits until
every page has drawn its Vega charts and shows no exception box, and saves a screenshot of
each page to $ANATOMY_SCREENSHOT_DIR (a CI artifact) or the test's temporary folder.

For the screenshots in docs/dashboard.md, point it at a real grid's database instead of the tiny one:
    ANATOMY_BROWSER_DB=results/anatomy.duckdb ANATOMY_SCREENSHOT_DIR=docs/screenshots \
        python -m pytest tests/test_dashboard_browser.py
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from anatomy.language import LANGUAGES, _, speaking
from anatomy.report import protocol
from anatomy.report.roles import only_runs_of
from anatomy.results.reader import load
from dashboard_pages import grid_and_studies_db  # noqa: F401 (a fixture)

REPO_ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# url path of each view -> how many charts it draws on the fixture database (the tiny grid and,
# beside it, a scale study and a bf16 pair: tests/dashboard_pages.py's grid_and_studies_db)
PAGES = {
    "": 1,
    "progress": 0,  # nothing of the fixture grid is training: the page says so
    "listen": 0,
    "curves": 2,  # the loss, and the learning rate beside it (the tiny runs log gradient norms too)
    "overfitting": 4,
    "ablations": 1,
    "breaks": 3,
    "exams": 7,  # the KV cache's bars among them: the widest chart at a phone's width
    "studies": 2,  # best val by size, and the curves of one size; its wide Markdown tables too
    "samples": 0,
}
# the Listen page writes its text once its Generate button is pressed
PRESS_GENERATE = """document.querySelector('[data-testid="stBaseButton-primary"]').click()"""
WINDOW = (1440, 1500)
CHAPTERS = dict(protocol.CHAPTER_PROTOCOL)  # before conftest sets the tests' small one


def in_language(language: str, message: str) -> str:
    with speaking(language):
        return _(message)


# the banner's button to the shipped results, as each language shows it
REFERENCE_BUTTON = {language: in_language(language, "Open the shipped reference results") for language in LANGUAGES}

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install -y chromium)"),
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def poll(check, timeout: float):
    """check() until it returns something truthy or time runs out; the last result either way."""
    deadline = time.monotonic() + timeout
    result = None
    while time.monotonic() < deadline:
        try:
            result = check()
        except OSError:
            result = None
        if result:
            break
        time.sleep(0.25)
    return result


def wait_for(check, timeout: float, what: str):
    result = poll(check, timeout)
    if not result:
        raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
    return result


def http_get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read().decode()


@contextmanager
def streamlit_server(db: Path, log: Path):
    port = free_port()
    env = {**os.environ, "ANATOMY_DB": str(db)}
    with log.open("w") as log_file:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamlit",
                "run",
                "dashboard",
                "--server.headless",
                "true",
                "--server.address",
                "127.0.0.1",
                "--server.port",
                str(port),
                "--browser.gatherUsageStats",
                "false",
                "--server.fileWatcherType",
                "none",
                "--client.toolbarMode",
                "viewer",
            ],
            cwd=REPO_ROOT,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            wait_for(
                lambda: server.poll() is None and http_get(f"{url}/_stcore/health") == "ok",
                60,
                f"streamlit to start (log: {log})",
            )
            yield url
        finally:
            server.terminate()
            server.wait(timeout=20)


class DevTools:
    """The few DevTools-protocol calls the check needs, over one websocket."""

    def __init__(self, socket):
        self.socket = socket
        self.ids = itertools.count(1)
        self.requested: list[str] = []  # every address the page asked for (Network.enable)

    def call(self, method: str, **params):
        call_id = next(self.ids)
        self.socket.send(json.dumps({"id": call_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv(timeout=60))
            if message.get("method") == "Network.requestWillBeSent":
                self.requested.append(message["params"]["request"]["url"])
            if message.get("id") == call_id:
                if "error" in message:
                    raise AssertionError(f"{method}: {message['error']}")
                return message["result"]

    def evaluate(self, expression: str):
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")


@contextmanager
def chromium(profile: Path):
    browser = subprocess.Popen(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            f"--user-data-dir={profile}",
            f"--window-size={WINDOW[0]},{WINDOW[1]}",
            "--remote-debugging-port=0",
            "--remote-allow-origins=*",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # Chromium writes the port it chose into the profile folder
        active = profile / "DevToolsActivePort"
        port = wait_for(
            lambda: active.exists() and active.read_text().split("\n")[0].strip(), 60, "chromium's DevTools port"
        )
        targets = wait_for(
            lambda: [t for t in json.loads(http_get(f"http://127.0.0.1:{port}/json/list")) if t["type"] == "page"],
            30,
            "a chromium page",
        )
        from websockets.sync.client import connect

        with connect(targets[0]["webSocketDebuggerUrl"], max_size=64 * 2**20, open_timeout=20) as socket:
            devtools = DevTools(socket)
            devtools.call("Page.enable")
            devtools.call("Network.enable")
            devtools.call(
                "Emulation.setDeviceMetricsOverride",
                width=WINDOW[0],
                height=WINDOW[1],
                deviceScaleFactor=1,
                mobile=False,
            )
            yield devtools
    finally:
        browser.terminate()
        browser.wait(timeout=20)


PAGE_STATE = """(() => {
  const charts = document.querySelectorAll('.vega-embed canvas, .vega-embed svg.marks').length;
  const running = document.querySelector('[data-testid="stStatusWidget"]') !== null;
  const exceptions = [...document.querySelectorAll('[data-testid="stException"]')].map(e => e.innerText);
  const title = document.querySelector('h1') ? document.querySelector('h1').innerText : '';
  return {charts, running, exceptions, title, text: document.body.innerText};
})()"""


@pytest.fixture(scope="module")
def screenshot_dir(tmp_path_factory) -> Path:
    folder = os.environ.get("ANATOMY_SCREENSHOT_DIR")
    path = Path(folder) if folder else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


def headline_names(db: Path) -> tuple[list[str], list[str]]:
    """(experiments, run labels) of the headline runs, as the pages name them."""
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("""SELECT experiment, seed FROM runs WHERE "group" = 'headline'""").fetchall()
    return sorted({e for e, _ in rows}), [f"{e} · seed {s}" for e, s in rows]


@pytest.fixture
def browser_db(request) -> Path:
    """$ANATOMY_BROWSER_DB (a full or quick grid's database, relative to the repository root), else
    the tiny real grid with two studies beside it."""
    chosen = os.environ.get("ANATOMY_BROWSER_DB")
    return Path(chosen) if chosen else request.getfixturevalue("grid_and_studies_db")


def study_labels(db: Path) -> list[str]:
    """The runs of the studies, as the pages would name them: the grid's pages never show them."""
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            """SELECT experiment, seed FROM runs WHERE "group" IN ('precision', 'scale', 'lr')"""
        ).fetchall()
    return [f"{e} · seed {s}" for e, s in rows]


def not_the_chapters(db: Path, monkeypatch) -> bool:
    """Whether the pages must say the database is not the chapter's protocol (the server judges
    with the real protocol, not the small one tests/conftest.py lets the tests' runs stand for)."""
    monkeypatch.setattr(protocol, "CHAPTER_PROTOCOL", CHAPTERS)
    return protocol.protocol_of(only_runs_of(load(db), None)).warned


def sample_characters() -> str:
    """Every character the shipped samples hold (whitespace aside): the common ones need the
    system's CJK font (.ci/run installs one), the rare ones the font the dashboard serves."""
    chars = set()
    for path in (REPO_ROOT / "results" / "reference" / "runs").glob("*/seed*/samples.json"):
        chars |= {c for sample in json.loads(path.read_text(encoding="utf-8")) for c in sample.get("text") or ""}
    return "".join(sorted(c for c in chars if not c.isspace()))


# Which of `chars` the page's font draws as nothing or as the box of a code point no font has.
BOXED = """(async (chars) => {
  const family = getComputedStyle(document.querySelector('[data-testid="stMarkdownContainer"]') || document.body).fontFamily;
  await document.fonts.load(`32px ${family}`, chars);
  const canvas = document.createElement('canvas');
  canvas.width = canvas.height = 48;
  const pen = canvas.getContext('2d');
  const draw = (c) => { pen.clearRect(0, 0, 48, 48); pen.font = `32px ${family}`; pen.fillText(c, 4, 36); return canvas.toDataURL(); };
  const box = draw('\\u{10FFFD}'), blank = draw(' ');
  return [...chars].filter((c) => { const drawn = draw(c); return drawn === box || drawn === blank; });
})"""
NO_FONT_HAS = "\U00030f84"  # U+30F84 (CJK Extension G): no Hanazono font has it; the check must see its box

# Chromium at a desktop width and at a phone's
WIDTHS = {"wide": 1400, "phone": 390}
HAN = re.compile(r"[\u4e00-\u9fff]")


def set_width(browser: DevTools, width: int) -> None:
    browser.call(
        "Emulation.setDeviceMetricsOverride", width=width, height=WINDOW[1], deviceScaleFactor=1, mobile=width < 600
    )


# the page wider than the window: something is cut off or needs a sideways scroll
OVERFLOW = """(() => document.documentElement.scrollWidth - window.innerWidth)()"""
# each chart, and each word a chart writes (a legend's entry, an axis title), that runs past the
# window's edge, where it is cut off: the text and by how many pixels
CHARTS_CUT = """(() => [...document.querySelectorAll('.vega-embed canvas, .vega-embed svg.marks, .vega-embed svg text')]
  .map((drawn) => [drawn.textContent || drawn.tagName, Math.round(drawn.getBoundingClientRect().right - window.innerWidth)])
  .filter(([_text, past]) => past > 1))()"""


# Each chart's colour and dash scales, read from the Vega view that drew it (Streamlit keeps it in
# a React ref of the chart's component): [[value, colour], ...] by scale name, null where none.
SCALES = r"""(() => [...document.querySelectorAll('.vega-embed')].map((el) => {
  let view = null;
  for (let node = el; node && !view; node = node.parentElement) {
    const key = Object.keys(node).find((k) => k.startsWith('__reactFiber'));
    for (let fiber = key ? node[key] : null, depth = 0; fiber && !view && depth < 40; fiber = fiber.return, depth++) {
      for (let hook = fiber.memoizedState; hook && typeof hook === 'object' && !view; hook = hook.next) {
        const held = hook.memoizedState && hook.memoizedState.current;
        if (held && typeof held.scale === 'function' && typeof held.scenegraph === 'function') view = held;
      }
    }
  }
  if (!view) return null;
  const scales = {};
  for (const name of ['color', 'strokeDash']) {
    let scale = null;
    try { scale = view.scale(name); } catch (e) {}
    if (scale && scale.domain) scales[name] = scale.domain().map((value) => [String(value), String(scale(value))]);
  }
  return scales;
}))()"""


def run_of(value: str) -> str:
    """The experiment a chart's colour value names: "llama · seed 7" and "llama (RoPE)" are llama."""
    return re.sub(r" \(.*\)$", "", re.sub(r" · seed \d+$", "", value))


def one_colour_per_run(drawn: dict[str, list]) -> list[str]:
    """What breaks "one colour per run, on every page" in the scales the pages drew (SCALES by page):
    an experiment in two colours anywhere, or two experiments in one colour on one chart."""
    problems, colour_of = [], {}
    for page, charts in drawn.items():
        for chart in charts:
            assert chart is not None, f"/{page}: a chart whose Vega view the check cannot find"
            on_chart = {}
            for value, colour in chart.get("color", []):
                name = run_of(value)
                if colour_of.setdefault(name, (colour, page))[0] != colour:
                    problems.append(f"{name}: {colour_of[name][0]} on /{colour_of[name][1]}, {colour} on /{page}")
                if on_chart.setdefault(colour, name) != name and "other" not in (name, on_chart[colour]):
                    problems.append(f"/{page}: {on_chart[colour]} and {name} share {colour} on one chart")
    return problems


def test_every_page_draws_its_charts_in_chromium(browser_db, screenshot_dir, tmp_path, monkeypatch):
    db = browser_db
    toy = not_the_chapters(db, monkeypatch)
    drawn_scales = {}
    experiments, labels = headline_names(db)
    assert experiments, "the fixture database has no headline runs"
    studies = study_labels(db)
    # text each page must show (charts and tables draw on canvas, so this is the page's own text)
    # (the Listen page's own heading too: its button is pressed only once that page has replaced the last one)
    expected = {
        "": experiments,
        "listen": ["Listen to it"],
        "curves": labels,
        "samples": labels,
        "exams": ["RoPE: reading past the training length"],
    }
    log = tmp_path / "streamlit.log"
    # a fresh profile; in tmp_path, since Chromium's helpers may still write there as it exits
    with streamlit_server(db, log) as url, chromium(tmp_path / "profile") as browser:
        for language, width in (("en", "wide"), ("zh_CN", "wide"), ("en", "phone"), ("zh_CN", "phone")):
            set_width(browser, WIDTHS[width])
            for page, n_charts in PAGES.items():
                if page == "studies" and not studies:  # a grid alone (the quick one): the page says how to add them
                    n_charts = 0
                browser.call("Page.navigate", url=f"{url}/{page}?lang={language}")
                must_show = expected.get(page, []) if language == "en" else []

                last = {}

                def drawn():
                    last.update(browser.evaluate(PAGE_STATE) or {})
                    done = (
                        last.get("title")
                        and not last["running"]
                        and last["charts"] >= n_charts
                        and all(name in last["text"] for name in must_show)
                        and (language == "en" or HAN.search(last["title"]))
                        and (REFERENCE_BUTTON[language] in last["text"]) == toy  # the banner, where due
                    )
                    return done or bool(last.get("exceptions"))

                poll(drawn, 180)  # a first render of a full grid on a busy machine takes its time
                if page == "listen" and (language, width) == ("en", "wide") and not last.get("exceptions"):
                    # A click that lands while the page is still settling is lost (the server stays idle,
                    # checked with py-spy): press again if nothing has started after a while.
                    def written():
                        state = browser.evaluate(PAGE_STATE) or {}
                        return "characters/s" in state.get("text", "") and not state["running"]

                    for _press in range(3):
                        browser.evaluate(PRESS_GENERATE)
                        # a full-size pair streams for a while on a busy machine: wait while it runs
                        if poll(lambda: written() or (browser.evaluate(PAGE_STATE) or {}).get("running"), 20):
                            if poll(written, 300):
                                break
                    last.update(browser.evaluate(PAGE_STATE) or {})
                    assert "characters/s" in last["text"], "/listen wrote no text after Generate"
                time.sleep(1.0)  # let the charts finish their first paint before the screenshot
                shot = browser.call("Page.captureScreenshot", format="png")
                suffix = "" if (language, width) == ("en", "wide") else f"-{language}-{width}"
                target = screenshot_dir / f"dashboard-{page or 'overview'}{suffix}.png"
                target.write_bytes(base64.b64decode(shot["data"]))
                print(f"screenshot: {target}")
                where = f"/{page}?lang={language} at {WIDTHS[width]} px"
                assert last.get("exceptions") == [], f"{where} shows an exception: {last.get('exceptions')}"
                assert last["charts"] >= n_charts, f"{where} drew {last['charts']} of {n_charts} charts (see {target})"
                for name in must_show:
                    assert name in last["text"], f"{where} does not show {name}"
                if language != "en":
                    assert HAN.search(last["title"]), f"{where}: its title {last['title']!r} is not in Chinese"
                overflow = browser.evaluate(OVERFLOW)
                assert overflow <= 1, f"{where} is {overflow} px wider than the window: cut off (see {target})"
                cut = browser.evaluate(CHARTS_CUT)
                assert not cut, f"{where}: charts run {cut} px past the window's edge (see {target})"
                if page in ("curves", "overfitting", "exams", "breaks"):  # the grid's pages show the grid
                    shown = [label for label in studies if label in last["text"]]
                    assert not shown, f"{where} offers the studies' runs {shown[:3]}: they have their own page"
                # toy numbers never pass for findings: a banner on every page, verdicts not stated
                banner = REFERENCE_BUTTON[language] in last["text"]
                assert banner == toy, (
                    f"{where}: the not-the-chapter's-protocol banner is {'missing' if toy else 'shown'}"
                )
                if toy and page == "" and language == "en":
                    assert "not testable at this size" in last["text"], f"{where} states verdicts on toy runs"
                if (language, width) == ("en", "wide"):
                    drawn_scales[page] = browser.evaluate(SCALES)
                if page == "exams" and language == "en":  # counted among the grid's runs, not the studies'
                    assert re.search(r"\d+ of the grid's \d+ runs examined", last["text"]), f"{where}: no count"

        problems = one_colour_per_run(drawn_scales)
        assert not problems, "one run, one colour, on every page: " + "; ".join(problems[:5])
        # every character the shipped samples hold has a glyph (the check itself must see a box)
        chars = sample_characters()
        boxed = browser.call(
            "Runtime.evaluate",
            expression=f"{BOXED}({json.dumps(chars + NO_FONT_HAS)})",
            awaitPromise=True,
            returnByValue=True,
        )["result"]["value"]
        assert boxed == [NO_FONT_HAS], (
            f"drawn as boxes: {''.join(c for c in boxed if c != NO_FONT_HAS)!r} (data/build_font.py)"
        )
        # offline means offline: every address the pages asked for is the dashboard's own (no web font,
        # no icon, no usage statistics fetched from elsewhere)
        away = sorted({address for address in browser.requested if not address.startswith((url, "data:", "blob:"))})
        assert not away, f"the pages fetched from elsewhere: {away[:5]}"
    problems = [
        line
        for line in log.read_text(encoding="utf-8").splitlines()
        if re.search(r"Traceback|Error|Warning|WARNING", line)
    ]
    assert not problems, f"the server log ({log}) holds:\n" + "\n".join(problems[:20])
