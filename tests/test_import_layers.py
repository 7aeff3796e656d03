"""The package's one direction (docs/architecture.md): each module imports only from its own layer
and the layers below it, and no chain of imports comes back to where it started. The imports
are read with ``ast`` (those inside functions too), not run; the checker is itself tested on small
packages written for the purpose, with a wrong import and a cycle."""

import ast
from pathlib import Path

import pytest

import tree_fairseq

PACKAGE_DIR = Path(tree_fairseq.__file__).parent

# Lowest first. A module of the package belongs to the layer of its first name below the package
# (``tree_fairseq.models.common`` -> ``models``); the package's own __init__ (what --user-dir
# imports: it registers the tasks and models with fairseq) stands above them all, and only the
# layers that run fairseq's commands, from ROOT_FROM up, import it (``import tree_fairseq``).
LAYERS = [
    {"compat", "errors"},  # fairseq on today's torch; knows nothing of trees
    {"trees"},
    {"parsing"},
    {"data"},
    {"modules"},
    {"models"},
    {"tasks"},
    {"cli"},
    {"analysis", "synthetic"},
]
ROOT_FROM = "cli"


def unit_of(module: str, package: str) -> str:
    """``package.models.common`` -> ``models``; ``package`` -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def module_name(path: Path, package_dir: Path) -> str:
    parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path, package_dir: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of each import of the package's own modules in the file at ``path``
    (relative imports resolved; ``from package import name`` counts as ``package.name``)."""
    package = package_dir.name
    this = module_name(path, package_dir)
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = this.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            # the name may be a module (``from package.sub import module``): the cycles keep the
            # longest name that is one
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return [(line, module) for line, module in found if module == package or module.startswith(package + ".")]


def upward_imports(package_dir: Path, layers: list[set[str]], root_from: str) -> list[str]:
    """Each import of a module from a layer above its own, as ``file:line: A (layer i) imports B
    (layer j)``, and of the package itself below the layer ``root_from``; a first name below the
    package that no layer holds is reported too."""
    package = package_dir.name
    rank = {unit: i for i, units in enumerate(layers) for unit in units}
    rank["__init__"] = len(layers)
    problems = []
    for path in sorted(package_dir.rglob("*.py")):
        this = module_name(path, package_dir)
        unit = unit_of(this, package)
        if unit not in rank:
            problems.append(f"{path}: {unit} is in no layer")
            continue
        for line, module in imported_modules(path, package_dir):
            other = unit_of(module, package)
            if module == package and rank[unit] >= rank[root_from]:
                continue
            if other not in rank:
                problems.append(f"{path}:{line}: {this} imports {module}, in no layer")
            elif rank[other] > rank[unit]:
                problems.append(f"{path}:{line}: {this} (layer {unit}) imports {module} (layer {other}, above it)")
    return problems


def import_cycles(package_dir: Path) -> list[list[str]]:
    """The cycles of the graph of the package's modules (an edge: one imports the other; a
    package's own ``__init__`` re-exporting its modules is no edge back to it), each as the path
    of modules around it."""
    graph = {}
    for path in sorted(package_dir.rglob("*.py")):
        this = module_name(path, package_dir)
        targets = set()
        for _, module in imported_modules(path, package_dir):
            # ``from package.sub import name`` may name a module: count the longest that exists
            while module and not _exists(module, package_dir):
                module = module.rpartition(".")[0]
            if module and module != this and not this.startswith(module + ".") and not module.startswith(this + "."):
                targets.add(module)
        graph[this] = targets
    cycles, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == "open":
                cycles.append(stack[stack.index(target):] + [target])
            elif target not in state:
                visit(target, stack)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return cycles


def _exists(module: str, package_dir: Path) -> bool:
    path = package_dir.parent.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def test_every_module_imports_only_its_layer_and_those_below():
    assert upward_imports(PACKAGE_DIR, LAYERS, ROOT_FROM) == []


def test_no_chain_of_imports_comes_back():
    assert import_cycles(PACKAGE_DIR) == []


def test_every_part_of_the_package_has_a_layer():
    parts = {path.stem if path.is_file() else path.name for path in PACKAGE_DIR.iterdir()
             if (path.suffix == ".py" and path.stem != "__init__") or any(path.glob("*.py"))}
    assert parts == set().union(*LAYERS)


# The checker itself, on small packages written here.


def write_package(root: Path, files: dict[str, str]) -> Path:
    package_dir = root / "pkg"
    for name, text in {"__init__.py": "", **files}.items():
        path = package_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.parent / "__init__.py").touch()
        path.write_text(text, encoding="utf-8")
    return package_dir


SMALL_LAYERS = [{"trees"}, {"models"}]


def test_the_checker_accepts_downward_imports(tmp_path):
    package_dir = write_package(tmp_path, {
        "trees/tree.py": "import os\n",
        "models/model.py": "from pkg.trees.tree import Tree\nfrom . import other\nfrom .other import x\n",
        "models/other.py": "from pkg import trees\nimport pkg\n",
    })
    assert upward_imports(package_dir, SMALL_LAYERS, "models") == []
    assert import_cycles(package_dir) == []


@pytest.mark.parametrize("wrong", [
    "from pkg.models.model import Model\n",
    "import pkg.models.model\n",
    "from pkg import models\n",
    "from ..models import model\n",
    "def late():\n    from pkg.models import model\n",
    "import pkg\n",
])
def test_the_checker_sees_an_upward_import(tmp_path, wrong):
    package_dir = write_package(tmp_path, {"trees/tree.py": wrong, "models/model.py": ""})
    problems = upward_imports(package_dir, SMALL_LAYERS, "models")
    assert len(problems) == 1 and "pkg.trees.tree (layer trees) imports pkg" in problems[0]


def test_the_checker_sees_a_part_in_no_layer(tmp_path):
    package_dir = write_package(tmp_path, {"loose.py": "", "trees/tree.py": ""})
    assert upward_imports(package_dir, SMALL_LAYERS, "models") == [f"{package_dir / 'loose.py'}: loose is in no layer"]


def test_the_checker_sees_a_cycle(tmp_path):
    package_dir = write_package(tmp_path, {
        "trees/a.py": "from pkg.trees import b\n",
        "trees/b.py": "from pkg.trees.c import x\n",
        "trees/c.py": "def f():\n    from pkg.trees.a import y\n",
    })
    assert import_cycles(package_dir) == [["pkg.trees.a", "pkg.trees.b", "pkg.trees.c", "pkg.trees.a"]]
