"""The package's shape: layers whose imports point one way, only the CLI talks to the world."""

from __future__ import annotations

import ast
import importlib
import re
import types
from pathlib import Path

import pytest

import cortex

PACKAGE = Path(cortex.__file__).resolve().parent

# The layers of cortex/, bottom to top (README "Architecture"). A module may import the modules
# to its left only: those of lower layers, and those placed before it in its own layer. A new
# module must be placed here (an unknown module fails the test). The layer packages'
# ``__init__.py`` are docstrings only: import a module by its full name.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # the base: the C accelerator (its interface: _speedups.pyi), the version, the errors, and the
    # argument checks of the public boundary (types, ranges, valid Unicode)
    ("", ("_speedups", "_version", "errors", "argcheck")),
    # records and their encoding; pure
    (
        "model",
        (
            "enums",
            "ids",
            "records",
            "jsonmap",  # the JSON form of records (spec names, enum labels, ISO-8601 times)
            "codec",
            "hashing",
            "forms",
            "validate",
            "schema",  # the nine types as JSON Schemas; from_json for tool calls
            "chunk",  # long verbatim text cut into overlapping, markdown-aware chunks
            "episode",  # the verbatim source of memories as records: build, encode, check
        ),
    ),
    # the ordered key-value layer: bytes and keys
    (
        "storage",
        (
            "keys",
            "pages",  # the LMDB data file read directly: meta pages, page structure, records
            "scrub",  # the unused bytes of an LMDB data file, read from its pages and zeroed
            "kv",  # the KV interface and LMDB behind it
            "pgkv",  # PostgreSQL behind the same interface (psycopg, imported lazily)
            "engines",  # a path or a URL to its engine; copying a store between engines
        ),
    ),
    # the indexes, each answering questions over its own records
    (
        "index",
        (
            "text",  # the tokenizer (pure)
            "postings",  # the lexical index's posting blocks
            "segments",  # its posting segments (format 10)
            "lexical",  # BM25 over the postings, written inside the store's transactions
            "evidence",  # episode chunks by BM25, beside the memories
            "embed_onnx",  # MiniLM's encoder as an onnx graph run by onnxruntime (lazy imports)
            "embed",  # embedders: text to vectors
            "ann",  # the vector index over hnswlib
            "vectors",  # the stored vector records (vec/, meta/vectors)
        ),
    ),
    # the rules of meaning and access
    (
        "rules",
        (
            "claims",  # pure: whether two memories state the same claim (the guard of dedupe)
            "chains",  # pure: claim keys and which of two competing memories is current
            "salience",  # pure: decay and the salience formula, and the use-counter record
            "scope",  # pure: readers, scopes and the visibility rules
            "sensitivity",  # sensitivity labels (sens/) and what a clearance lets through
            "aliases",  # entity aliases (ent/a/): other names of an entity
        ),
    ),
    # the engine: heads, versions, edges, the journal, purge; the vector cache beside it
    (
        "engine",
        (
            "values",  # the engine's records (edges, format) and the values its API returns
            "journal",  # the hash-chained journal: entries, their codec, one transaction's writer
            "erasure",  # what a purge erased, as needles an audit searches the files for
            "heads",  # what a head implies: index keys, pin, claims, superseder
            "verify",  # the whole store checked in one snapshot
            "hooks",  # what the layer above decides for the engine: vectors, access, erasure
            "importer",  # memories, edges, episodes and aliases brought in as they were
            "purge",  # a memory's or an episode's erasure, and the audit of every erasure
            "store",
            "sidecar",  # the vector index cache beside a store, caught up from its journal
        ),
    ),
    # the query layer
    (
        "query",
        (
            "language",  # Query, predicates, windows, results
            "where",  # pure: the readable where syntax, parsed to and printed from predicates
            "router",  # pure: a question's type, entities, attribute and time window (no LLM)
            "rerank",  # pure: a text query's context (neighbours) and named-entity terms
            "planner",  # the executor: index scans, filters, ordering, budgets
            "context",  # the tiered working set built on the executor
            "search",  # search(question): the router's handlers over find, about and facets
        ),
    ),
    # the agent-facing layer
    (
        "agent",
        (
            "extract",  # extraction behind a protocol: typed memories from content (no model calls)
            "core",  # core memory: the user and agent key-value blocks
            "ingest",  # content -> an episode and the memories drawn from it, in one transaction
            "api",  # Cortex: the public entry point
            "aio",  # AsyncCortex: every call in a worker thread
            "quick",  # the five-line quickstart (mem0 / Letta flows) on the typed API
        ),
    ),
    # moving stores
    (
        "transfer",
        (
            "bundle",  # export and import bundles
            "migrate",  # format migrations: below the CLI, which runs them
            "salvage",  # a damaged store's checked records copied into a new store, losses named
        ),
    ),
    # the package itself (the public surface: importing names from ``cortex`` counts as importing
    # it), then the shells on top: the MCP server and the CLI (a sub-package counts as one unit)
    ("", ("__init__", "serve", "cli", "__main__")),
)
PACKAGES = {layer for layer, _ in LAYERS if layer}
ORDER = tuple(f"{layer}.{m}" if layer else m for layer, mods in LAYERS for m in mods)
RANK = {name: i for i, name in enumerate(ORDER)}

# Only these modules may print or read the environment.
WORLD = {"cli"}


def _modules() -> dict[str, ast.Module]:
    out = {}
    # a compiled module is read through its stub: the .pyi beside no .py
    stubs = [p for p in PACKAGE.rglob("*.pyi") if not p.with_suffix(".py").exists()]
    for path in sorted([*PACKAGE.rglob("*.py"), *stubs]):
        rel = path.relative_to(PACKAGE).with_suffix("")
        name = ".".join(rel.parts)
        out[name] = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return out


MODULES = _modules()


def _unit(name: str) -> str:
    """The placed unit of a dotted module name below ``cortex``.

    ``layer.module`` in a layer package (``layer.__init__`` for the package file itself), else the
    first part (a shell sub-package such as ``serve`` counts as one unit).
    """
    parts = name.split(".")
    if parts[0] in PACKAGES:
        return ".".join(parts[:2]) if len(parts) > 1 else f"{parts[0]}.__init__"
    return parts[0]


def _imports(module: str, tree: ast.Module) -> list[tuple[int, str]]:
    """``(line, unit)`` for every import of a cortex module (``__init__`` for the package)."""
    out: list[tuple[int, str]] = []
    package_parts = module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "cortex":
                    out.append(
                        (node.lineno, _unit(".".join(parts[1:])) if parts[1:] else "__init__")
                    )
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package_parts[: len(package_parts) - (node.level - 1)]
                parts = ["cortex", *base, *(node.module.split(".") if node.module else [])]
            elif node.module is not None:
                parts = node.module.split(".")
            else:  # pragma: no cover - "from . import" without level does not parse
                continue
            if parts[0] != "cortex":
                continue
            rest = parts[1:]
            if rest and (rest[0] not in PACKAGES or len(rest) > 1):
                out.append((node.lineno, _unit(".".join(rest))))
                continue
            # ``from cortex import x``: a module if x names one, else the package itself;
            # ``from cortex.layer import x``: the module x (a layer package exports nothing)
            for alias in node.names:
                name = ".".join([*rest, alias.name])
                out.append((node.lineno, name if rest or name in RANK else "__init__"))
    return out


def test_every_module_is_placed() -> None:
    unknown = sorted({_unit(m) for m in MODULES} - set(ORDER) - {f"{p}.__init__" for p in PACKAGES})
    assert not unknown, f"place these modules in LAYERS in {__file__}: {unknown}"


def test_the_order_names_only_existing_modules() -> None:
    placed = {_unit(m) for m in MODULES}
    stale = [name for name in ORDER if name not in placed]
    assert not stale, f"LAYERS names modules that do not exist: {stale}"


def test_layer_packages_are_docstrings_only() -> None:
    for layer in sorted(PACKAGES):
        tree = MODULES[f"{layer}.__init__"]
        assert ast.get_docstring(tree), f"cortex/{layer}/__init__.py: say what the layer holds"
        assert len(tree.body) == 1, f"cortex/{layer}/__init__.py must hold only its docstring"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_left(module: str) -> None:
    unit = _unit(module)
    if unit.endswith(".__init__"):
        return  # docstrings only (test_layer_packages_are_docstrings_only)
    here = RANK.get(unit)
    if here is None:
        pytest.fail(f"{module} is not placed in LAYERS")
    bad = [
        f"line {line}: {module} imports {target}"
        for line, target in _imports(module, MODULES[module])
        if target != unit and (target not in RANK or RANK[target] >= here)
    ]
    assert not bad, "imports must point left (down the layers):\n" + "\n".join(bad)


def test_the_checker_sees_imports() -> None:
    tree = ast.parse(
        "import cortex.engine.store\nfrom cortex import errors, Fact\n"
        "from cortex.model.codec import x\nfrom cortex.index import lexical\n"
        "from . import kv\nfrom .records import Head\nimport os\nfrom cortex.serve.tools import y\n"
    )
    assert _imports("model.forms", tree) == [
        (1, "engine.store"),
        (2, "errors"),
        (2, "__init__"),
        (3, "model.codec"),
        (4, "index.lexical"),
        (5, "model.kv"),
        (6, "model.records"),
        (8, "serve"),
    ]
    assert "__init__" in {target for _, target in _imports("cli.common", MODULES["cli.common"])}


def _cli_module() -> str:
    return "cli.app"  # the CLI's parser and runner (it prints)


_ENV = ("environ", "environb", "getenv", "putenv", "unsetenv")


def _world_access(tree: ast.Module) -> list[str]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in ("print", "input", "breakpoint"):
                found.append((node.lineno, f"{node.func.id}()"))
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "os" and node.attr in _ENV:
                found.append((node.lineno, f"os.{node.attr}"))
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            for alias in node.names:
                if alias.name in _ENV:
                    found.append((node.lineno, f"from os import {alias.name}"))
    return [f"line {line}: {what}" for line, what in sorted(found)]


@pytest.mark.parametrize("module", sorted(MODULES))
def test_only_the_cli_prints_or_reads_the_environment(module: str) -> None:
    if _unit(module) in WORLD:
        return
    found = _world_access(MODULES[module])
    assert not found, f"{module} must not print or read the environment:\n" + "\n".join(found)


def test_the_world_checker_sees_access() -> None:
    tree = ast.parse(
        "import os\nprint(1)\nos.environ['x']\nos.getenv('y')\nfrom os import environ\n"
        "os.getpid()\nself.print()\n"
    )
    assert _world_access(tree) == [
        "line 2: print()",
        "line 3: os.environ",
        "line 4: os.getenv",
        "line 5: from os import environ",
    ]
    assert _world_access(MODULES[_cli_module()])  # the CLI does print


def _all_order(name: str) -> tuple[int, list[int | str]]:
    """The order ruff (RUF022) keeps ``__all__`` in: CONSTANTS, then Classes, then the rest."""
    if len(name) > 1 and name.isupper():
        group = 0
    elif name[:1].isupper():
        group = 1
    else:
        group = 2
    natural = [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]
    return group, natural


def _dunder_all(tree: ast.Module) -> list[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            value = ast.literal_eval(node.value)
            assert isinstance(value, list | tuple)
            return list(value)
    raise AssertionError("no __all__")


def test_public_surface_is_sorted_and_exists() -> None:
    shuffled = ["content_hash", "__version__", "Visibility", "FORMAT_VERSION", "Belief"]
    assert sorted(shuffled, key=_all_order) == [
        "FORMAT_VERSION",
        "Belief",
        "Visibility",
        "__version__",
        "content_hash",
    ]
    names = _dunder_all(MODULES["__init__"])
    assert names == sorted(names, key=_all_order), "keep __all__ in cortex/__init__.py sorted"
    assert len(names) == len(set(names))
    missing = [n for n in names if not hasattr(cortex, n)]
    assert not missing, f"__all__ names that cortex does not define: {missing}"
    assert list(cortex.__all__) == names


@pytest.mark.parametrize("module", sorted(m for m in MODULES if not m.startswith("__")))
def test_modules_with_all_define_its_names(module: str) -> None:
    tree = MODULES[module]
    if not any(
        isinstance(n, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets)
        for n in tree.body
    ):
        return
    names = _dunder_all(tree)
    assert names == sorted(names, key=_all_order), f"keep __all__ in {module} sorted"
    mod = importlib.import_module(f"cortex.{module}")
    missing = [n for n in names if not hasattr(mod, n)]
    assert not missing, f"cortex.{module}.__all__ names missing objects: {missing}"


def test_package_ships_type_information() -> None:
    assert (PACKAGE / "py.typed").is_file()


def test_every_module_has_a_docstring() -> None:
    missing = [m for m, tree in MODULES.items() if not ast.get_docstring(tree)]
    assert not missing, f"modules without a one-line docstring: {missing}"


def _readme_layers() -> dict[str, list[str]]:
    """The layer folders of the README's Architecture block and the modules it lists for each."""
    text = (PACKAGE.parent / "README.md").read_text(encoding="utf-8")
    block = text.split("## Architecture", 1)[1].split("```text", 1)[1].split("```", 1)[0]
    shown: dict[str, list[str]] = {}
    for line in block.splitlines():
        m = re.match(r"\s+(\w+)/\s+(.*)$", line)
        if m and " · " in m.group(2):
            listed = re.split(r"\s{2,}", m.group(2).strip())[-1]
            shown[m.group(1)] = listed.split(" · ")
    return shown


def test_the_readme_shows_the_layers_as_they_are() -> None:
    shown = _readme_layers()
    for layer, modules in LAYERS:
        if layer:
            assert shown.get(layer) == list(modules), f"README Architecture: the {layer}/ line"
    cli = sorted(p.stem for p in (PACKAGE / "cli").glob("*.py") if p.stem != "__init__")
    assert sorted(shown["cli"]) == cli, "README Architecture: the cli/ line"
    assert set(shown) == PACKAGES | {"cli"}


MODULE_NAMES = {"_speedups", "_version"}


def _private_imports(tree: ast.Module) -> list[str]:
    """``line: module.name`` for every private name imported from a cortex module."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cortex"):
            for alias in node.names:
                name = alias.name
                if name.startswith("_") and not name.startswith("__") and name not in MODULE_NAMES:
                    found.append(f"line {node.lineno}: {node.module}.{name}")
    return found


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_imports_another_modules_private_names(module: str) -> None:
    """What one module needs of another is part of that module's interface: a public name."""
    found = _private_imports(MODULES[module])
    why = f"{module} reaches into another module's private names:\n"
    assert not found, why + "\n".join(found)


def test_the_private_import_checker_sees_them() -> None:
    tree = ast.parse(
        "from cortex.model.codec import _Hidden, Field\nfrom cortex import _speedups\n"
    )
    assert _private_imports(tree) == ["line 1: cortex.model.codec._Hidden"]


def _engine_bases(mod: types.ModuleType) -> list[str]:
    """``Class extends cortex.engine.x.Base`` for each class of ``mod`` built on an engine class."""
    return [
        f"{name} extends {base.__module__}.{base.__qualname__}"
        for name, obj in sorted(vars(mod).items())
        if isinstance(obj, type) and obj.__module__ == mod.__name__
        for base in obj.__mro__[1:]
        if base.__module__.startswith("cortex.engine.")
    ]


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("agent.")))
def test_the_agent_layer_composes_the_engine(module: str) -> None:
    """``Cortex`` holds a ``Store`` and calls its interface; no agent class extends the engine's."""
    found = _engine_bases(importlib.import_module(f"cortex.{module}"))
    assert not found, f"{module}: compose the engine instead of extending it:\n" + "\n".join(found)


def test_the_engine_base_checker_sees_them() -> None:
    from cortex.engine.store import Store

    probe = types.ModuleType("probe")
    probe.Inherits = type("Inherits", (Store,), {"__module__": "probe"})  # type: ignore[attr-defined]
    probe.Holds = type("Holds", (), {"__module__": "probe"})  # type: ignore[attr-defined]
    probe.Store = Store  # type: ignore[attr-defined]  # imported, not defined here: not counted
    assert _engine_bases(probe) == ["Inherits extends cortex.engine.store.Store"]
