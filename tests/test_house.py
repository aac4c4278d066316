"""House rules of the tree, checked on the source (see the README's Layout section).

- ``epscert/`` (the numerical core) never imports Apache Beam, anywhere in a module.
- No module imports a name starting with ``_`` from another module.
- No room of ``epscert/`` imports a room above its own: data flows one way.
- Training frameworks are imported only lazily, and only by ``epscert/integrations/`` and the
  JAX sampling backend; ``import epscert`` loads none of them.
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
    "epscert._version": 0, "epscert.params": 0, "epscert.schema": 0, "epscert.rng": 0, "epscert.progress": 0,
    "epscert.strategies": 0, "epscert.mechanism": 0, "epscert.support": 0, "epscert.checks": 0,
    "epscert.bounds": 1, "epscert.fft": 1, "epscert.hidden_state": 1,
    "epscert.analytic": 2, "epscert.montecarlo": 2, "epscert.batching": 2,
    "epscert.allocation": 3,
    "epscert.results": 4,
    "epscert.inverse": 5,
    "epscert.api": 6, "epscert.accountant": 6, "epscert.compare": 6,
    "epscert": 7, "epscert.integrations": 7,
}
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
    assert {"epscert.params", "epscert.montecarlo.shard", "epscert.inverse.calibrate",
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
    allowed = mod.startswith("epscert.integrations") or mod.startswith("epscert.montecarlo.backends.jax")
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
            "running_bounds\nfrom epscert.hidden_state import HiddenStateConfig, compare_at_delta\n"
            "from epscert.epsilon_at_delta import epsilon_report\nfrom epscert.calibrate import calibrate_sigma\n"
            "import epscert\nassert epscert.fft_accountant.Grid is Grid\nprint('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
