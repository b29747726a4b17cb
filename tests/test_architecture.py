"""The layout's rule, checked: each folder of ``latency/`` is one stage of the data flow and
imports only the stages below it (docs/architecture.md), and the value layers import neither
torch nor Streamlit.

Every import counts — at module level or inside a function, ``import`` or ``from`` — because
a function-local import is still a dependency; hiding one there is how the circles this test
replaced had grown.
"""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from latency.layers import LAYERS, TORCH_FREE

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "latency"


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported module) for every import in ``path`` that names ``latency...``."""
    tree = ast.parse(path.read_text(), str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("latency")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "latency":  # from latency import x: x is a stage or a module
                out += [(node.lineno, f"latency.{a.name}") for a in node.names]
            elif node.module.startswith("latency."):
                out.append((node.lineno, node.module))
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path}: relative import at line {node.lineno}; name the "
                                 "stage (from latency.<stage>... import ...)")
    return out


def _stage(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def test_every_stage_is_declared():
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == set(LAYERS), "a folder of latency/ is missing from latency/layers.py"
    loose = {p.name for p in PACKAGE.glob("*.py")} - {"__init__.py", "__main__.py",
                                                       "layers.py", "api.py"}
    assert not loose, f"modules outside a stage: {sorted(loose)}"


def test_stages_import_only_downward():
    bad = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        if len(rel.parts) < 2:  # latency/__init__.py, __main__.py, layers.py, api.py: the top
            continue
        here = rel.parts[0]
        allowed = LAYERS[here] | {here}
        for line, module in _imports(path):
            there = _stage(module)
            if there is None or there == "api":  # the package's top: the API, every stage
                bad.append(f"latency/{rel}:{line} ({here}) imports {module} (the top)")
            elif there not in allowed and there != "layers":
                bad.append(f"latency/{rel}:{line} ({here}) imports {module} ({there})")
    assert not bad, "imports against the layer rule:\n" + "\n".join(bad)


def test_layers_form_no_circle():
    seen: dict[str, int] = {}

    def depth(stage: str, path: tuple[str, ...] = ()) -> int:
        assert stage not in path, f"circle: {' → '.join(path + (stage,))}"
        if stage not in seen:
            seen[stage] = 1 + max((depth(s, path + (stage,)) for s in LAYERS[stage]),
                                  default=-1)
        return seen[stage]

    for stage in LAYERS:
        depth(stage)


@pytest.mark.parametrize("modules", [
    ["latency"],
    [f"latency.{stage}" for stage in TORCH_FREE],
    ["latency.analysis.summary", "latency.analysis.snapshot", "latency.simulation.simulator",
     "latency.storage.store", "latency.figures.plots", "latency.analysis.summary_text"],
])
def test_value_layers_import_neither_torch_nor_streamlit(modules):
    code = ("import importlib, json, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            "print(json.dumps([m for m in ('torch', 'streamlit') if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [], f"importing {modules} pulled in {out.stdout.strip()}"


def test_engine_needs_no_streamlit():
    code = ("import importlib, sys\n"
            f"for stage in {sorted(LAYERS)!r}:\n"
            "    importlib.import_module('latency.' + stage)\n"
            "import latency.execution.engine, latency.cli.main\n"
            "print('streamlit' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def _table_in_docs() -> list[tuple[str, set[str]]]:
    """(stage, may import) for each row of docs/architecture.md's layer table, in its order;
    'everything below' is every stage above it in the table."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    rows: list[tuple[str, set[str]]] = []
    for stage, may in re.findall(r"^\| `(\w+)` \|.*\| ([^|]*) \|$", text, re.M):
        may = may.strip()
        if may == "everything below":
            allowed = {s for s, _ in rows}
        elif may in ("—", "-", ""):
            allowed = set()
        else:
            allowed = {s.strip().strip("`") for s in may.split(",")}
        rows.append((stage, allowed))
    return rows


def test_the_layer_table_in_the_docs_is_the_one_in_layers_py():
    rows = _table_in_docs()
    assert [s for s, _ in rows] and len({s for s, _ in rows}) == len(rows), \
        "docs/architecture.md: no layer table found, or a stage listed twice"
    assert {s for s, _ in rows} == set(LAYERS), \
        f"stages only in the docs: {sorted({s for s, _ in rows} - set(LAYERS))}; only in " \
        f"latency/layers.py: {sorted(set(LAYERS) - {s for s, _ in rows})}"
    differ = [f"{s}: docs say {sorted(a)}, layers.py says {sorted(LAYERS[s])}"
              for s, a in rows if a != LAYERS[s]]
    assert not differ, "docs/architecture.md and latency/layers.py disagree:\n" + \
        "\n".join(differ)
    above: set[str] = set()
    for stage, allowed in rows:  # the table reads downward: a stage imports only rows above
        assert allowed <= above, f"docs/architecture.md lists {stage} above what it imports: " \
                                 f"{sorted(allowed - above)}"
        above.add(stage)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(path: Path, modules: set[str]) -> set[str]:
    """The modules of ``latency`` that ``path`` imports when it runs, at module level or in a
    function; imports under ``if TYPE_CHECKING:`` are for the type checker only and excluded."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):  # drop the bodies of `if TYPE_CHECKING:` blocks
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            node.body = []
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}  # from pkg import module
    return out & modules


def test_no_import_circle_between_modules_of_a_stage():
    """Inside a stage, modules form a tree too: a circle (even through a function-local
    import) means two modules are one concept split in two, or a fact with two owners."""
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    stage_of = {m: m.split(".")[1] for m in paths if m.count(".") >= 1}  # __init__ too
    graph = {m: {d for d in _runtime_imports(p, set(paths))
                 if d in stage_of and stage_of[d] == stage_of.get(m) and d != m}
             for m, p in paths.items() if m in stage_of}
    circles: list[str] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                circles.append(" → ".join(path[path.index(d):] + [d]))
            elif d not in state:
                visit(d, path + [d])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert not circles, "import circles inside a stage:\n" + "\n".join(circles)
