"""The package's shape: imports point one way, only the CLI talks to the world, a sorted API."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import cortex

PACKAGE = Path(cortex.__file__).resolve().parent

# Every module of cortex/, left to right. A module may import only modules to its left.
# A new module must be placed here (unknown modules fail the test):
#   - "api" is the public entry point built on the store;
#   - "__init__" is the package itself (the public surface, re-exporting everything but the CLI);
#     importing names from ``cortex`` counts as importing it;
#   - "cli" and "__main__" are the shell on top.
ORDER = (
    "_speedups",  # the optional C extension (its interface: _speedups.pyi); imports nothing
    "_version",
    "errors",
    "argcheck",  # argument checks at the public boundary (types, ranges, valid Unicode)
    "enums",
    "ids",
    "records",
    "jsonmap",  # the JSON form of records (spec names, enum labels, ISO-8601 times)
    "codec",
    "hashing",
    "forms",
    "validate",
    "schema",  # the nine types as JSON Schemas, and from_json for tool calls and extractions
    "keys",
    "pages",  # the LMDB data file read directly: meta pages, page structure, salvageable records
    "scrub",  # the unused bytes of an LMDB data file, read from its pages and zeroed
    "kv",
    "pgkv",  # the PostgreSQL engine behind the same interface (psycopg, imported lazily)
    "engines",  # a path or a URL to its engine; copying a store between engines
    "text",  # the tokenizer of the lexical index (pure)
    "chunk",  # pure: long verbatim text cut into overlapping, markdown-aware chunks
    "episode",  # the verbatim source of memories as records: build, encode, check
    "claims",  # pure: whether two memories state the same claim (the guard of dedupe)
    "chains",  # pure: claim keys and which of two competing memories is the current truth
    "router",  # pure: a question's type, entities, attribute and time window (no LLM)
    "rerank",  # pure: a text query's context (neighbours) and named-entity terms
    "postings",  # the lexical index's posting blocks
    "lexical",  # the lexical index, written inside the store's transactions
    "evidence",  # episode chunks by BM25, beside the memories (format 7)
    "salience",  # pure: decay and the salience formula, and the use-counter record
    "scope",  # pure: readers, scopes and the visibility rules
    "sensitivity",  # sensitivity labels (sens/) and what a reader's clearance lets through
    "aliases",  # entity aliases (ent/a/): other names of an entity, for claims and about
    "embed_onnx",  # MiniLM's encoder as an onnx graph run by onnxruntime (lazy imports)
    "embed",  # embedders: text to vectors (imports no storage)
    "ann",  # the vector index cache over hnswlib (imports no storage)
    "vectors",  # the stored vector records (vec/, meta/vectors)
    "erasure",  # what a purge erased, as needles an audit searches the store's files for
    "store",
    "sidecar",  # the vector index cache beside a store, caught up from its journal
    "extract",  # extraction behind a protocol: typed memories from content (no model calls)
    "query",  # the query language: Query, predicates, windows, results
    "where",  # pure: the readable where syntax, parsed to and printed from predicates
    "planner",  # the executor: index scans, filters, ordering, budgets
    "context",  # the tiered working set built on the executor
    "core",  # core memory: the user and agent key-value blocks, one Identity each
    "ingest",  # content -> an episode and the memories drawn from it, in one transaction
    "search",  # search(question): the router's handlers over find, about and facets
    "api",
    "aio",  # AsyncCortex: the API for asyncio runtimes, every call in a worker thread
    "quick",  # the five-line quickstart (mem0 / Letta flows) on the typed API
    "transfer",  # export and import bundles, over the store's internals
    "migrate",  # format migrations: below the CLI, which runs them
    "salvage",  # a damaged store's checked records copied into a new store, losses named
    "__init__",
    "serve",  # cortex serve: the MCP tools, the token file, the stdio and HTTP transports
    "cli",
    "__main__",
)
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


def _top(name: str) -> str:
    """The placed unit of a module: its first part (a sub-package counts as one module)."""
    return name.split(".", maxsplit=1)[0]


def _imports(module: str, tree: ast.Module) -> list[tuple[int, str]]:
    """``(line, target)`` for every import of a cortex module (``__init__`` for the package)."""
    out: list[tuple[int, str]] = []
    package_parts = module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "cortex":
                    out.append((node.lineno, parts[1] if len(parts) > 1 else "__init__"))
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
            if len(parts) > 1:
                out.append((node.lineno, parts[1]))
                continue
            # ``from cortex import x``: a submodule if x names one, else the package itself
            for alias in node.names:
                out.append((node.lineno, alias.name if alias.name in RANK else "__init__"))
    return out


def test_every_module_is_placed() -> None:
    unknown = sorted({_top(m) for m in MODULES} - set(ORDER))
    assert not unknown, f"place these modules in ORDER in {__file__}: {unknown}"


def test_the_order_names_only_existing_modules() -> None:
    missing = sorted(set(ORDER) - {_top(m) for m in MODULES})
    assert not missing, f"ORDER names modules that do not exist: {missing}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_left(module: str) -> None:
    here = RANK.get(_top(module))
    if here is None:
        pytest.fail(f"{module} is not placed in ORDER")
    bad = [
        f"line {line}: {module} imports {target}"
        for line, target in _imports(module, MODULES[module])
        if target != _top(module) and (target not in RANK or RANK[target] >= here)
    ]
    assert not bad, "imports must point left in ORDER:\n" + "\n".join(bad)


def test_the_checker_sees_imports() -> None:
    tree = ast.parse(
        "import cortex.store\nfrom cortex import errors, Fact\nfrom cortex.codec import x\n"
        "from . import kv\nfrom .records import Head\nimport os\n"
    )
    assert _imports("forms", tree) == [
        (1, "store"),
        (2, "errors"),
        (2, "__init__"),
        (3, "codec"),
        (4, "kv"),
        (5, "records"),
    ]
    assert "__init__" in {target for _, target in _imports("cli", MODULES["cli"])}


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
    if _top(module) in WORLD:
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
    assert _world_access(MODULES["cli"])  # the CLI does print


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
