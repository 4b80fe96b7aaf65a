"""The package layout is the architecture (ARCHITECTURE.md): each folder imports only from the stages
before it, so reading never depends on analysis, analysis never on rendering, and the library never
on the command line."""
import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "diagnose"
# lower layers first; a module may import from its own layer and the layers before it
LAYERS = ["model", "cache", "patterns", "read", "analyze", "pipeline", "render", "slurm", "fleet", "cli"]
# integrations stand beside each other: neither the fleet nor SLURM imports the other
APART = {("fleet", "slurm"), ("slurm", "fleet")}


def _layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "pipeline"  # the package's __init__ is the public entry
    return "cli" if parts[1] == "__main__" else parts[1]


def _imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("diagnose"):
            mods = [node.module + "." + a.name for a in node.names] if node.module == "diagnose" else [node.module]
            yield from ((node.lineno, m) for m in mods)
        elif isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names if a.name.startswith("diagnose"))


def test_imports_only_run_down_the_pipeline():
    wrong = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).with_suffix("")
        mod = ".".join(rel.parts).removesuffix(".__init__")
        here = _layer(mod)
        for line, target in _imports(path):
            there = _layer(target)
            if there == "__version__":
                continue
            if LAYERS.index(there) > LAYERS.index(here) or (here, there) in APART:
                wrong.append(f"{rel}.py:{line} ({here}) imports {target} ({there})")
    assert wrong == []


def test_every_folder_says_what_it_offers():
    for init in PKG.rglob("__init__.py"):
        assert ast.get_docstring(ast.parse(init.read_text())), init


def test_only_the_command_line_uses_click():
    """The library raises and returns; parsing options and printing belong to diagnose/cli/."""
    wrong = []
    for path in sorted(PKG.rglob("*.py")):
        if path.relative_to(PKG).parts[0] == "cli":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            wrong += [f"{path.relative_to(PKG.parent)}:{node.lineno}" for n in names if n.split(".")[0] == "click"]
    assert wrong == []


def test_no_module_grows_past_a_screenful_of_screens():
    """Small modules named for what they do: a file past 400 lines is two concerns."""
    big = [f"{p.relative_to(PKG.parent)}: {n}" for p in sorted(PKG.rglob("*.py"))
           if (n := len(p.read_text().splitlines())) > 400]
    assert big == []
