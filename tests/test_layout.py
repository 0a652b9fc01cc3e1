"""The layout's rules, checked from the source: no import cycle, each layer imports only what it may.

Every import counts, at the top of a module or inside a function (a lazy import is still a
dependency), except those under ``if TYPE_CHECKING:``, which never run.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, SIDE_SUFFIXES

pytestmark = pytest.mark.unit
PACKAGE = REPO / "vftui"


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def _runtime_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def imported_names(module: str) -> set[str]:
    """Every module name ``module`` imports at run time (absolute, as written or resolved)."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in _runtime_imports(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
            continue
        base = node.module or ""
        if node.level:
            base = ".".join(
                package.split(".")[: len(package.split(".")) - node.level + 1]
                + ([base] if base else [])
            )
        names.add(base)
        names.update(f"{base}.{alias.name}" for alias in node.names)  # ``from vftui import stats``
    return names


def internal_graph() -> dict[str, set[str]]:
    return {
        module: {name for name in imported_names(module) if name in MODULES and name != module}
        for module in MODULES
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph[node]:
            if other not in index:
                connect(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
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

    for node in graph:
        if node not in index:
            connect(node)
    return found


def test_no_module_imports_itself_through_others():
    assert cycles(internal_graph()) == []


def test_no_circle_of_types_either():
    """A ``TYPE_CHECKING`` import is still a dependency of the design: counted too, no circle either."""
    graph = {
        module: {name for name in _every_import(module) if name in MODULES and name != module}
        for module in MODULES
    }
    assert cycles(graph) == []


def package_of(module: str) -> str:
    """``vftui.run_files.results`` -> ``vftui.run_files``; a module at the root is a package of its own."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The modules' graph folded into packages: an arrow between two packages for any import between them."""
    folded: dict[str, set[str]] = {package_of(m): set() for m in graph}
    for module, imported in graph.items():
        folded[package_of(module)] |= {package_of(i) for i in imported} - {package_of(module)}
    return folded


def test_no_package_imports_itself_through_others():
    """The layers stack: a package that imports another is never imported by it, even through a third
    (``events`` -> ``figures`` -> ``events`` was one such loop; each module alone had none)."""
    assert cycles(package_graph(internal_graph())) == []


def test_the_package_check_finds_a_loop_no_module_has():
    """Two modules of each package, no module in a cycle, and yet the packages import each other."""
    graph = {"vftui.a.one": {"vftui.b.one"}, "vftui.b.two": {"vftui.a.two"}}
    graph |= {"vftui.a.two": set(), "vftui.b.one": set()}
    assert cycles(graph) == []
    assert cycles(package_graph(graph)) == [["vftui.a", "vftui.b"]]


LIVE_MAY_IMPORT = {
    "vftui",
    "vftui.events",
    "vftui.run_controls",
    "vftui.group_format",
    "vftui.errors",
    "vftui.safe_files",
    "vftui.stats",
    "vftui.figures.run_tally",
}
"""What ``live/`` (the socket every run listens on, and its clients) may import beyond the standard library:
the contract, the errors, safe files, and the tally its replay folds. An allowlist: a new import is a decision."""


def _beyond_live_allowlist(names: set[str]) -> list[str]:
    """The names an import in ``live/`` reaches outside the standard library, ``live/`` and its allowlist
    (``vftui.events.Event``, a name in an allowed module, is allowed; ``vftui.collector``, a module, is not)."""

    def allowed(name: str) -> bool:
        if name.split(".")[0] in sys.stdlib_module_names or name.startswith("vftui.live"):
            return True
        if name in MODULES:
            return name in LIVE_MAY_IMPORT
        return name.startswith("vftui.") and name.rpartition(".")[0] in LIVE_MAY_IMPORT

    return sorted(name for name in names if not allowed(name))


def test_live_imports_only_its_allowlist():
    beyond = {
        module: _beyond_live_allowlist(imported_names(module))
        for module in MODULES
        if module.startswith("vftui.live")
    }
    assert {m: names for m, names in beyond.items() if names} == {}


def test_the_live_allowlist_refuses_what_it_does_not_name():
    names = {
        "vftui.events.Event",
        "vftui.collector",
        "vftui.run_files.files.RunFiles",
        "httpx",
        "json",
    }
    assert _beyond_live_allowlist(names) == [
        "httpx",
        "vftui.collector",
        "vftui.run_files.files.RunFiles",
    ]


def test_the_cycle_check_finds_a_cycle():
    """The check itself: a graph with a loop through three modules is reported."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def _importers(prefix: str, forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    bad = {}
    for module in MODULES:
        if module == prefix or module.startswith(prefix + "."):
            names = sorted(
                n
                for n in imported_names(module)
                if n.split(".")[0] in forbidden or n.startswith(forbidden)
            )
            if names:
                bad[module] = names
    return bad


@pytest.mark.parametrize(
    ("layer", "forbidden"),
    [
        ("vftui.collector", ("textual", "rich", "vftui.ui", "vftui.commands")),
        (
            "vftui.ui",
            ("verifiers", "atroposlib", "vftui.collector"),
        ),  # transformers: the preview's decoder, lazily
        ("vftui.events", ("verifiers", "atroposlib", "textual", "vftui.collector", "vftui.ui")),
        (
            "vftui.training",
            (
                "verifiers",
                "atroposlib",
                "transformers",
                "textual",
                "rich",
                "vftui.collector",
                "vftui.ui",
                "vftui.commands",
                "vftui.run_files",
            ),
        ),  # a prime-rl run's readers: plain files in, figures out
        (
            "vftui.config",
            (
                "verifiers",
                "atroposlib",
                "transformers",
                "textual",
                "vftui.collector",
                "vftui.ui",
                "vftui.commands",
            ),
        ),  # settings and each mode's rules load before the collector's libraries (first frame)
    ],
)
def test_each_layer_imports_only_what_it_may(layer, forbidden):
    assert _importers(layer, forbidden) == {}


def _every_import(module: str) -> set[str]:
    """The modules ``module`` names in an import, ``TYPE_CHECKING`` ones included."""
    tree = ast.parse(MODULES[module].read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


SEAM = ("vftui.collector.verifiers_env", "atroposlib.envs.base")


def test_the_modes_see_the_env_only_through_the_seam():
    """The modes get a ``ModeContext`` and drive atroposlib through the ``modes`` drivers: no mode module
    imports ``VerifiersEnv`` or atroposlib's env module, ``TYPE_CHECKING`` imports included."""
    modes = [
        m
        for m in MODULES
        if m == "vftui.collector.modes"
        or m.startswith(("vftui.collector.sft.", "vftui.collector.eval."))
        or m
        in {
            f"vftui.collector.rl.{name}"
            for name in ("collection", "rollouts", "server_check", "server_watch")
        }
    ]
    assert len(modes) >= 14
    reaching = {m: sorted(n for n in _every_import(m) if n.startswith(SEAM)) for m in sorted(modes)}
    assert {m: names for m, names in reaching.items() if names} == {}


def _bases(module: str) -> dict[str, list[str]]:
    tree = ast.parse(MODULES[module].read_text())
    return {
        n.name: [ast.unparse(b) for b in n.bases] for n in tree.body if isinstance(n, ast.ClassDef)
    }


def test_eval_shares_the_groups_in_flight_rather_than_inheriting_sft():
    """sft and eval both are the groups in flight (``sft/in_flight.py``), each with its own items and end."""
    assert _bases("vftui.collector.eval.collection") == {"EvalCollection": ["InFlight"]}
    assert _bases("vftui.collector.sft.collection") == {"SftCollection": ["InFlight"]}


MODE_MODULES = [f"vftui.collector.{mode}.collection" for mode in ("sft", "eval", "rl")]


def _idle_or_handed_on(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A body that does nothing (``return None``, ``pass``), or only calls the same method of another object
    with the function's own arguments (``return self.in_flight.collect(context, driver)``)."""
    body = [
        s
        for s in function.body
        if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
    ]
    if not body:
        return True
    if len(body) != 1:
        return False
    (statement,) = body
    if isinstance(statement, ast.Pass) or (
        isinstance(statement, ast.Return)
        and (statement.value is None or ast.unparse(statement.value) == "None")
    ):
        return True
    value = getattr(statement, "value", None)
    value = value.value if isinstance(value, ast.Await) else value
    params = {a.arg for a in function.args.args}
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr == function.name
        and isinstance(value.func.value, ast.Attribute)
        and all(isinstance(a, ast.Name) and a.id in params for a in value.args)
    )


def test_a_mode_says_only_what_it_adds():
    """``modes.Collection`` holds the defaults (a mode with nothing to observe, start, finish or close leaves
    them out) and sft and eval share the groups in flight: no mode method that does nothing or only hands its
    call on to another object's same method."""
    idle = [
        f"{module}.{node.name}"
        for module in MODE_MODULES
        for node in ast.walk(ast.parse(MODULES[module].read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _idle_or_handed_on(node)
    ]
    assert idle == []


def test_only_the_run_hands_out_the_users_controls():
    """The env and the modes schedule groups through the gate and read a temperature; the user's
    controls (stop's grace, the refusals once the run ended) are the views' and the socket's."""
    users = {
        module
        for module in MODULES
        if module.startswith("vftui.collector.")
        and "vftui.collector.controls" in _every_import(module)
    }
    assert users == {"vftui.collector.run"}
    assert "vftui.collector.controls" not in _every_import("vftui.collector.gate")


@pytest.mark.parametrize("module", ["vftui.run_controls", "vftui.group_format"])
def test_the_contracts_small_halves_import_the_standard_library_only(module):
    """What a key may do and what a group line holds are read by every room, ``live/`` included."""
    outside = {
        name for name in imported_names(module) if name.split(".")[0] not in sys.stdlib_module_names
    }
    assert outside == set()


def test_events_holds_events_only():
    """No functions or protocols: the controls, formats and encodings live in their own modules."""
    tree = ast.parse(MODULES["vftui.events"].read_text())
    functions = [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    neither = [
        name
        for name, node in classes.items()
        if not any("dataclass" in ast.unparse(d) for d in node.decorator_list)
        and not any("Enum" in ast.unparse(b) for b in node.bases)
    ]
    assert (functions, neither) == ([], [])


def test_a_run_is_driven_in_one_place():
    """One lifecycle (prepare, the log, execute, close) for the dashboard's child and ``run --no-ui``: only
    ``collector.lifecycle`` builds a ``Run``; the tests that drive one by hand are outside the package."""
    drivers = {m for m in MODULES if "vftui.collector.run" in imported_names(m)}
    assert drivers == {"vftui.collector.lifecycle"}


def test_opening_the_dashboard_loads_no_collector_library():
    """The dashboard's first frame (and ``--no-ui``'s first line) comes before atroposlib, verifiers and
    transformers load (seconds): the collector's child, or ``lifecycle`` after that line, imports them."""
    code = (
        "import sys\n"
        "import vftui.cli, vftui.commands.dashboard, vftui.commands.attach, vftui.commands.view, vftui.ui.app\n"
        "import vftui.commands.headless\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules}"
        " & {'atroposlib', 'verifiers', 'transformers', 'torch'})\n"
        "print(','.join(heavy))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


@pytest.mark.unit
def test_the_suite_never_touches_the_users_own_folders(own_user_folders):
    from vftui import paths
    from vftui.run_files import index as run_index

    for folder in (paths.data_dir(), paths.config_dir(), run_index.index_dir()):
        assert folder.is_relative_to(own_user_folders), folder


SIDE_FILE_SUFFIXES = (*(s for s in SIDE_SUFFIXES if s != ".html"), ".eval")
"""The names a string may not end in outside RunFiles (``.html`` is any page's, ``.eval`` the eval folder's)."""


def _docstrings(tree: ast.AST) -> set[int]:
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, kinds)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def test_only_run_files_names_a_side_file():
    """A run's side files are named in ``run_files/files.py`` alone (``RunFiles``): elsewhere no string ends in
    one of their suffixes (prose may name one: help texts, docstrings) and no name of a suffix constant is used."""
    found = []
    for path in sorted([*PACKAGE.rglob("*.py"), *(REPO / "bench").rglob("*.py")]):
        if path == PACKAGE / "run_files" / "files.py":
            continue
        tree = ast.parse(path.read_text())
        docstrings = _docstrings(tree)
        for node in ast.walk(tree):
            name = node.id if isinstance(node, ast.Name) else getattr(node, "name", None)
            if isinstance(node, (ast.Name, ast.alias)) and str(name).endswith(
                ("_SUFFIX", "_SUFFIXES")
            ):
                found.append(f"{path.relative_to(REPO)}: {name}")
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and node.value.endswith(SIDE_FILE_SUFFIXES)
            ):
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value!r}")
    assert found == []


def _calls(module: str) -> set[str]:
    """The names ``module`` calls (``f(...)``, ``x.f(...)``)."""
    tree = ast.parse(MODULES[module].read_text())
    return {
        node.func.id if isinstance(node.func, ast.Name) else node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name | ast.Attribute)
    }


def test_a_runs_groups_are_folded_once_and_its_parts_join_one_bus():
    """The run's summary, an attaching dashboard's ``RunSoFar`` and ``vftui runs`` read one ``RunTally``: the
    run and the socket make no totals, drop counts or rate of their own; only the run joins parts to its bus."""
    folders = {"Accumulator", "Throughput", "Counter"}
    own_folds = {
        module: sorted(_calls(module) & folders)
        for module in MODULES
        if module in ("vftui.collector.run", "vftui.collector.bus")
        or module.startswith("vftui.live")
    }
    assert {m: f for m, f in own_folds.items() if f} == {}
    assert {"Accumulator", "Throughput"} <= _calls("vftui.figures.run_tally")
    joiners = {m for m in MODULES if "subscribe" in _calls(m)}
    assert joiners == {"vftui.collector.run"}


def _annotations(module: str, class_name: str) -> dict[str, str]:
    """The annotated attributes of ``class_name`` in ``module``: its fields and what its methods set."""
    tree = ast.parse(MODULES[module].read_text())
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name]
    return {
        ast.unparse(node.target): ast.unparse(node.annotation)
        for node in ast.walk(cls)
        if isinstance(node, ast.AnnAssign)
    }


def test_a_prepared_run_has_every_part_built():
    """``prepare`` returns a ``PreparedRun`` with nothing left to fill in: no attribute that may be None, and
    no ``assert`` in the collector or the commands about one of its parts (nothing to cover)."""
    fields = _annotations("vftui.collector.run", "PreparedRun")
    assert len(fields) >= 10
    optional = {name: kind for name, kind in fields.items() if "None" in kind or "Optional" in kind}
    assert optional == {}
    covering = []
    for module in MODULES:
        if not module.startswith(("vftui.collector.", "vftui.commands.")):
            continue
        for node in ast.walk(ast.parse(MODULES[module].read_text())):
            named = {
                n.id if isinstance(n, ast.Name) else n.attr
                for n in ast.walk(node.test if isinstance(node, ast.Assert) else ast.Pass())
                if isinstance(n, ast.Name | ast.Attribute)
            }
            if named & set(fields):
                covering.append(f"{module}:{node.lineno}")
    assert covering == []
