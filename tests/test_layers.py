"""The layering the code keeps, read from the source with `ast` (nothing is imported):

- no import cycle among the modules of anatomy/ and dashboard/;
- the package never imports the dashboard (the dashboard imports the package);
- the reader and the dashboard never import collect, the writer;
- no project import inside a function, where it would hide a cycle, except of the few heavy
  modules below, imported late so that whoever does not need torch or Altair does not load them.
"""

from __future__ import annotations

import ast
from importlib.util import resolve_name
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# The project modules a function may import, and why: each loads torch or Altair at its top.
HEAVY = {
    "anatomy.report.charts": "Altair: the report's figures (its text needs none)",
    "anatomy.model": "torch: one claim counts the KV cache's bytes",
    "anatomy.training.trainer": "torch: the depth exam trains its cells (reading them needs none)",
    "anatomy.training.step_timing": "torch: `anatomy costs` times its shapes (the report reads costs.json without)",
    "anatomy.files.weights": "torch: `anatomy reference` ships weights only when asked",
    "anatomy.exams.kv_cache": "torch: collect reads a cache exam's rows only where there are some",
    "anatomy.exams.wall_clock": "torch: collect reads the wall-clock exam only where it ran",
}


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


FILES = {module_name(path): path for top in ("anatomy", "dashboard") for path in sorted((REPO / top).rglob("*.py"))}


def project_imports(module: str) -> list[tuple[str, int, bool]]:
    """(project module it names, line, inside a function?) for each import statement of `module`."""
    package = module if FILES[module].name == "__init__.py" else module.rpartition(".")[0]
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                names = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom):  # `from a import b`: module a.b, or a name of a
                base = resolve_name("." * child.level + (child.module or ""), package)
                names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in FILES else base for alias in child.names]
            else:
                visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))
                continue
            found.extend((name, child.lineno, in_function) for name in dict.fromkeys(names) if name in FILES)

    visit(ast.parse(FILES[module].read_text(encoding="utf-8")), False)
    return found


IMPORTS = [(module, *found) for module in FILES for found in project_imports(module)]


def where(module: str, target: str, line: int) -> str:
    return f"{FILES[module].relative_to(REPO)}:{line} imports {target}"


def test_no_import_cycle():
    # importing a.b.c runs a and a.b first: the graph's edges go to those packages too
    graph: dict[str, dict[str, int]] = {module: {} for module in FILES}
    for module, target, line, _ in IMPORTS:
        parts = target.split(".")
        for loaded in (".".join(parts[:i]) for i in range(1, len(parts) + 1)):
            if loaded in FILES and loaded != module:
                graph[module].setdefault(loaded, line)
    done: set[str] = set()

    def cycle_from(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return path[path.index(module) :] + [module]
        if module not in done:
            for target in sorted(graph[module]):
                if cycle := cycle_from(target, path + [module]):
                    return cycle
            done.add(module)
        return None

    for module in sorted(graph):
        if cycle := cycle_from(module, []):
            raise AssertionError(
                "an import cycle: " + "; ".join(where(a, b, graph[a][b]) for a, b in zip(cycle, cycle[1:]))
            )


def test_the_package_never_imports_the_dashboard():
    upward = [where(m, t, line) for m, t, line, _ in IMPORTS if m.startswith("anatomy") and t.startswith("dashboard")]
    assert not upward, "the dashboard imports the package, never the other way: " + "; ".join(upward)


# collect is the one writer of a results database. What reads one reads through the reader and
# anatomy/results/database.py, never through the writer: the reader side, down every import it
# makes, and each dashboard module in its own imports (to have the shipped results collected, the
# dashboard asks anatomy/results/reference_db.py, which owns that write).
WRITER = "anatomy.results.collect"
READER_SIDE = ("anatomy.results.reader", "anatomy.results.database", "anatomy.results.progress")


def test_the_reader_and_the_dashboard_never_import_the_writer():
    reached: dict[str, str] = {}  # module -> the import that brought it in
    todo = list(READER_SIDE)
    while todo:
        module = todo.pop()
        for target, line, _ in project_imports(module):
            if target not in reached and target not in READER_SIDE:
                reached[target] = where(module, target, line)
                todo.append(target)
    wrong = [reached[WRITER]] if WRITER in reached else []
    wrong += [where(m, t, line) for m, t, line, _ in IMPORTS if m.startswith("dashboard") and t == WRITER]
    assert not wrong, "the reader and the dashboard read, and never import the writer: " + "; ".join(wrong)


def test_no_project_import_hides_in_a_function_unless_it_loads_torch_or_altair():
    hidden = [where(m, t, line) for m, t, line, late in IMPORTS if late and t not in HEAVY]
    assert not hidden, (
        "import these at the top of the module (were it to dodge a cycle, break the cycle instead); "
        "only a module in HEAVY, which loads torch or Altair, may be imported inside a function: " + "; ".join(hidden)
    )


def test_the_heavy_modules_do_load_torch_or_altair():
    for module in HEAVY:
        tree = ast.parse(FILES[module].read_text(encoding="utf-8"))
        tops = {alias.name.split(".")[0] for node in tree.body if isinstance(node, ast.Import) for alias in node.names}
        assert tops & {"torch", "altair"}, f"{module} loads neither torch nor altair: take it out of HEAVY"


def test_every_module_is_named_in_the_architecture_doc():
    """docs/ARCHITECTURE.md is the map a newcomer reads: a module it does not name has drifted."""
    doc = (REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    modules = [*(REPO / "anatomy").rglob("*.py"), *(REPO / "dashboard").rglob("*.py")]
    unnamed = [
        str(path.relative_to(REPO)) for path in modules if path.name != "__init__.py" and f"{path.name}`" not in doc
    ]
    assert not unnamed, f"name these in docs/ARCHITECTURE.md: {unnamed}"
