"""The package's layering (docs/architecture.md): imports run only downward, and
there is no import circle, lazy (function-level) imports included."""

from __future__ import annotations

import ast
from pathlib import Path

import cqb

SRC = Path(cqb.__file__).parent

# Bottom to top; a module may import from its own layer's modules and from
# lower layers only (within a layer, the circle check below
# keeps the packages in an order). The root package holds only the version.
LAYERS = {
    "cqb": 0, "cqb.errors": 0,
    "cqb.sim": 1,
    "cqb.snakemake_patches": 1,  # Snakemake and the standard library only
    "cqb.datasets": 2,  # the dataset registry: names its transforms, imports none
    "cqb.io": 2,  # output writing: above the simulation's atomic_write, below all that writes
    # how figures and listings show policies; run files → tables; datasets → pools; the public
    # policy API for plugins (a re-export); `cqb run` and the run server that forks it
    "cqb.presentation": 3, "cqb.analysis": 3, "cqb.data": 3, "cqb.policies": 3, "cqb.jobs": 3,
    "cqb.config": 4,  # the config model and the plan
    "cqb.studies": 5,  # the studies the config asks for, on the plan
    "cqb.publishing": 6,
    "cqb.figures": 7,  # drawn for the pipeline and for what is published
    "cqb.cli": 8,
}


def module_name(path: Path, root: Path = SRC) -> str:
    parts = ("cqb",) + path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def group(module: str) -> str:
    """The layer entry a module belongs to: its longest listed prefix."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in LAYERS:
            return ".".join(parts[:end])
    raise AssertionError(f"{module} belongs to no layer: add it to LAYERS")


def imports(root: Path = SRC) -> dict[str, set[str]]:
    """module → the cqb modules it imports (at any depth of its code)."""
    modules = {module_name(path, root): path for path in root.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names if alias.name.split(".")[0] == "cqb")
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                if source.split(".")[0] != "cqb":
                    continue
                for alias in node.names:  # `from pkg import module` imports the module
                    submodule = f"{source}.{alias.name}"
                    targets.add(submodule if submodule in modules else source)
        graph[name] = {target for target in targets if target != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def upward_arrows(graph: dict[str, set[str]]) -> list[str]:
    arrows = []
    for source, targets in graph.items():
        for target in targets:
            if group(source) != group(target) and LAYERS[group(target)] > LAYERS[group(source)]:
                arrows.append(f"{source} → {target}")
    return sorted(arrows)


def test_the_import_graph_sees_every_module_and_its_lazy_imports():
    graph = imports()
    assert "cqb.sim.policies.registry" in graph["cqb.sim.policies.baselines"]
    assert "cqb.sim.simulate" in graph["cqb.jobs.run_command"]  # imported inside a function
    assert "cqb.publishing.timing" in graph["cqb.cli"]  # imported inside a function
    assert all(group(module) for module in graph)


def test_each_package_sits_whole_on_one_integer_layer():
    """No module of a package is set apart on a layer of its own, between two others."""
    assert all(isinstance(layer, int) for layer in LAYERS.values()), LAYERS
    assert [name for name in LAYERS if name.count(".") > 1] == []


def test_there_is_no_import_circle():
    assert circles(imports()) == []


def test_imports_only_run_downward():
    assert upward_arrows(imports()) == []


def test_the_simulation_core_imports_nothing_outside_it():
    # what the code hash covers must be all a run executes (the version aside)
    for source, targets in imports().items():
        if source.startswith("cqb.sim"):
            assert all(target.startswith("cqb.sim") or target == "cqb" for target in targets), (source, targets)


def imported_top_names(root: Path = SRC) -> set[str]:
    """The top-level names every module under ``root`` imports (absolute imports)."""
    names = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names.add(node.module.split(".")[0])
    return names


def test_the_package_does_not_import_the_measurement_tools():
    """bench/ (a checkout's top-level folder, not installed) times the package;
    an import of it from src/ would work in a checkout and fail when installed."""
    names = imported_top_names()
    assert "numpy" in names and "cqb" in names  # the scan sees absolute imports
    assert "bench" not in names


def test_the_root_package_imports_nothing():
    assert imports()["cqb"] == set()


def test_the_checks_catch_a_circle_and_an_upward_arrow():
    graph = {"cqb.analysis.a": {"cqb.analysis.b"}, "cqb.analysis.b": {"cqb.analysis.a"},
             "cqb.sim.x": {"cqb.studies.y"}, "cqb.studies.y": set()}
    assert circles(graph) == [["cqb.analysis.a", "cqb.analysis.b"]]
    assert upward_arrows(graph) == ["cqb.sim.x → cqb.studies.y"]


# The package's face: the command line, the error type, the plugin shim
# (cqb.policies) and the version. Everything else lives in a subpackage.
ROOT_MODULES = {"__init__.py", "cli.py", "errors.py", "policies.py"}


def test_the_package_root_keeps_only_its_four_modules():
    loose = sorted(path.name for path in SRC.iterdir()
                   if path.is_file() and path.suffix in (".py", ".c", ".pyx", ".so") and path.name not in ROOT_MODULES)
    assert loose == [], f"give these a subpackage: {loose}"
