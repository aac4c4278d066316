"""House rules of the tree, checked on the source (see the README's Layout section).

- ``epscert/`` (the numerical core) never imports Apache Beam, anywhere in a module.
- No module imports a name starting with ``_`` from another module.
- No room of ``epscert/`` imports a room above its own: data flows one way; and the import drawing of
  ``epscert/`` (module-level and lazy imports alike) has no circle.
- The Monte Carlo engine (``epscert/montecarlo/``) imports no mechanism (``epscert.dpsgd``,
  ``epscert.matrix``), no configuration and nothing above its floor: a mechanism plugs in through the
  sampler protocol of its package docstring. The matrix mechanism's code is in one folder.
- ``epscert/`` has at most 10 top-level modules, and no module is a giant (STYLE.md: ~600 lines).
- Training frameworks are imported only lazily, and only by ``epscert/integrations/`` and the
  JAX kernel modules (the engine's ``montecarlo/backends/jax_*`` and the rooms' ``jax_*``);
  ``import epscert`` loads none of them.
"""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("epscert", "transforms", "pipelines")

#: The rank of each room of epscert/; a module may import its own room or a lower rank.
RANKS = {
    "epscert._version": 0, "epscert.names": 0, "epscert.checks": 0, "epscert.support": 0, "epscert.schema": 0,
    "epscert.rng": 0, "epscert.progress": 0,
    "epscert.bounds": 1, "epscert.fft": 1,
    "epscert.analytic": 2, "epscert.montecarlo": 2, "epscert.batching": 2,
    "epscert.allocation": 3, "epscert.dpsgd": 3,
    "epscert.matrix": 4,
    "epscert.config": 5,
    "epscert.results": 6,
    "epscert.inverse": 7,
    "epscert.api": 8, "epscert.accountant": 8, "epscert.compare": 8,
    "epscert": 9, "epscert.integrations": 9,
}
#: The mechanisms' rooms, which the engine never imports.
MECHANISM_ROOMS = ("epscert.dpsgd", "epscert.matrix")
#: The ground floor: names and checks (and the schema, randomness and progress every floor reads).
GROUND = [k for k, v in RANKS.items() if v == 0]
MAX_TOP_LEVEL_MODULES = 10
MAX_MODULE_LINES = 600
FRAMEWORKS = ("torch", "opacus", "jax", "jaxlib", "jax_privacy")


def modules(package: str):
    for path in sorted((ROOT / package).rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        yield ".".join(parts), path, ast.parse(path.read_text(encoding="utf-8"), str(path))


def imports(tree: ast.AST, module: str, is_package: bool):
    """(imported module, names, node) for every import statement, relative ones resolved."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, (), node
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            yield base, tuple(a.name for a in node.names), node


def room(name: str) -> str | None:
    best = None
    for key in RANKS:
        if name == key or name.startswith(key + "."):
            if best is None or len(key) > len(best):
                best = key
    return best


ALL = [(pkg, mod, path, tree) for pkg in PACKAGES for mod, path, tree in modules(pkg)]


def test_the_tree_is_found():
    names = {mod for _, mod, _, _ in ALL}
    assert {"epscert.names", "epscert.config", "epscert.montecarlo.shard", "epscert.inverse.calibrate",
            "transforms.shards", "pipelines.cli"} <= names


@pytest.mark.parametrize("mod,path,tree", [(m, p, t) for pkg, m, p, t in ALL if pkg == "epscert"],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_core_never_imports_beam(mod, path, tree):
    bad = [n.lineno for target, _, n in imports(tree, mod, path.name == "__init__.py")
           if target == "apache_beam" or target.startswith("apache_beam.")]
    assert not bad, f"{path} imports apache_beam at line(s) {bad}"


@pytest.mark.parametrize("mod,path,tree", [(m, p, t) for _, m, p, t in ALL],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_no_private_name_crosses_a_module_border(mod, path, tree):
    bad = []
    for target, names, node in imports(tree, mod, path.name == "__init__.py"):
        if target == "__future__":
            continue
        private = [n for n in names if n.startswith("_") and not n.startswith("__")]
        private += [p for p in target.split(".") if p.startswith("_") and p != "_version"
                    and not p.startswith("__")]
        if private:
            bad.append((node.lineno, target, private))
    assert not bad, f"{path} imports private names from other modules: {bad}"


@pytest.mark.parametrize("mod,path,tree", [(m, p, t) for pkg, m, p, t in ALL if pkg == "epscert"],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_no_room_imports_a_room_above_it(mod, path, tree):
    own = room(mod)
    assert own is not None, f"{mod} belongs to no room: add it to RANKS and to the README layout"
    bad = []
    for target, names, node in imports(tree, mod, path.name == "__init__.py"):
        candidates = [target] + [f"{target}.{n}" for n in names] if target == "epscert" else [target]
        for cand in candidates:
            other = room(cand)
            if other is None or other == own or cand == "epscert":
                continue
            if RANKS[other] > RANKS[own]:
                bad.append((node.lineno, cand, other))
    assert not bad, f"{mod} (room {own}, rank {RANKS[own]}) imports higher rooms: {bad}"


@pytest.mark.parametrize("mod,path,tree", [(m, p, t) for pkg, m, p, t in ALL if pkg == "epscert"],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_frameworks_only_lazily_and_only_in_their_rooms(mod, path, tree):
    leaf = mod.rpartition(".")[2]
    allowed = mod.startswith("epscert.integrations") or (
        leaf.startswith("jax") and (mod.startswith("epscert.montecarlo.backends.") or mod.startswith(MECHANISM_ROOMS)))
    top_level = {id(n) for n in tree.body}
    for target, _, node in imports(tree, mod, path.name == "__init__.py"):
        if target.split(".")[0] in FRAMEWORKS:
            assert allowed, f"{path}:{node.lineno} imports {target} outside integrations/ and the JAX backend"
            assert id(node) not in top_level, f"{path}:{node.lineno} imports {target} at module level"


def test_import_epscert_loads_no_framework():
    code = ("import sys, epscert; bad = [m for m in sys.modules if m.split('.')[0] in %r]; "
            "print(','.join(sorted(bad)))" % (FRAMEWORKS + ("apache_beam",),))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "", f"import epscert loaded {out.stdout.strip()}"


def test_old_import_paths_shown_in_the_readme_keep_working():
    code = ("from epscert.fft_accountant import Gaussian, Grid, Schedule, SubsampledGaussian, fft_bounds, "
            "running_bounds\nfrom epscert.analytic.hidden_state import HiddenStateConfig, compare_at_delta\n"
            "from epscert.epsilon_at_delta import epsilon_report\nfrom epscert.calibrate import calibrate_sigma\n"
            "import epscert\nassert epscert.fft_accountant.Grid is Grid\nprint('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def module_of(name: str, known: set[str]) -> str | None:
    """The longest known module that ``name`` (a module, or module.attribute) lies in."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def import_drawing() -> dict[str, set[str]]:
    """module -> the epscert modules it imports (module-level and lazy), relative imports resolved."""
    core = [(m, p, t) for pkg, m, p, t in ALL if pkg == "epscert"]
    known = {m for m, _, _ in core}
    edges = {}
    for mod, path, tree in core:
        out = set()
        for target, names, _ in imports(tree, mod, path.name == "__init__.py"):
            if not target.startswith("epscert"):
                continue
            for cand in [f"{target}.{n}" for n in names] or [target]:
                hit = module_of(cand, known)
                if hit and hit != mod:
                    out.add(hit)
        edges[mod] = out
    return edges


def test_the_import_drawing_has_no_circle():
    edges = import_drawing()
    index, low, stack, on, circles = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                circles.append(sorted(part))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    assert not circles, f"import circles in epscert/: {circles}"


def test_a_circle_would_be_seen():
    """The circle finder is not vacuous: the landed main's params <-> strategies circle, drawn by hand."""
    edges = {"a.params": {"a.strategies"}, "a.strategies": {"a.params"}, "a.rng": set()}
    seen = [v for v in edges if any(v in edges[w] for w in edges[v])]
    assert sorted(seen) == ["a.params", "a.strategies"]


def test_the_engine_imports_no_mechanism_and_nothing_above_it():
    edges = import_drawing()
    engine = [m for m in edges if m == "epscert.montecarlo" or m.startswith("epscert.montecarlo.")]
    assert "epscert.montecarlo.shard" in engine and "epscert.montecarlo.protocol" in engine
    bad = {}
    for mod in engine:
        for other in edges[mod]:
            r = room(other)
            if other.startswith(MECHANISM_ROOMS) or RANKS[r] > RANKS["epscert.montecarlo"]:
                bad.setdefault(mod, []).append(other)
    assert not bad, f"the Monte Carlo engine imports mechanisms or higher floors: {bad}"


def test_the_ground_floor_imports_only_the_ground_floor():
    edges = import_drawing()
    bad = {m: sorted(o for o in out if RANKS[room(o)] > 0) for m, out in edges.items() if room(m) in GROUND}
    assert not any(bad.values()), f"ground-floor modules import rooms above them: {bad}"


def test_the_matrix_mechanism_lives_in_one_folder():
    names = {mod for pkg, mod, _, _ in ALL if pkg == "epscert"}
    strays = sorted(m for m in names if "matrix" in m.rpartition(".")[2] and not m.startswith("epscert.matrix"))
    assert not strays, f"matrix-mechanism modules outside epscert/matrix/: {strays}"
    assert not list((ROOT / "epscert" / "montecarlo").rglob("matrix_*.py"))
    assert {"epscert.matrix.strategies", "epscert.matrix.pair", "epscert.matrix.values", "epscert.matrix.loss_tilt",
            "epscert.matrix.bracket", "epscert.matrix.jax_kernels"} <= names


def test_few_top_level_modules_and_no_giant():
    top = sorted(p.name for p in (ROOT / "epscert").glob("*.py") if p.name != "__init__.py")
    assert len(top) <= MAX_TOP_LEVEL_MODULES, f"{len(top)} top-level modules in epscert/: {top}"
    giants = {str(p.relative_to(ROOT)): n for p in (ROOT / "epscert").rglob("*.py")
              if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert not giants, f"modules over {MAX_MODULE_LINES} lines: {giants}"
    for name in ("names.py", "config/certify.py"):  # what replaced the 596-line params.py
        assert len((ROOT / "epscert" / name).read_text(encoding="utf-8").splitlines()) <= 350, name
