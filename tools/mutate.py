"""Mutation testing of the modules that guard access and meaning (``make mutate``).

Each mutant is one small change to one module's Python source (an operator or a constant
swapped, ``and``/``or`` exchanged, a ``not`` dropped, a condition forced ``True`` or ``False``,
a ``raise`` or a call statement turned into ``pass``). It is written into a private copy of the
tree and the module's own test files run against it (``pytest -x``); a mutant they miss runs
against a wider set. A mutant no test kills survives, and is kept only with a reason in
``tools/mutate_equivalent.toml`` (``equivalent``, ``text-only`` or ``unreachable``), keyed by
its description.

The Python path is the one mutated: every run imports ``cortex._speedups`` as absent, so the
C accelerator (which shadows several functions of codec, keys and the write path) never runs.

Not mutated: docstrings, annotations, f-strings and the strings of ``raise`` statements
(messages), ``__all__``. A module listed with ``functions`` is mutated only there (transfer:
the verification of bundles; access, identity, budgets: the functions of api.py, server.py and
store.py that hold those rules).

Sampling (the default run; ``--full`` runs every mutant). The access-control targets (scope,
sensitivity, access, identity, budgets) run whole. A target with a ``count`` is sampled to that
many mutants, evenly through the file: its mutants, in source order, are cut into ``count``
runs of equal length, and from each run the one mutant with the smallest
``sha256(SEED | module | description)`` is taken. So the sample covers the whole file, the same
source gives the same sample, and an edit moves only the runs around it. The functions named in
``focus`` are mutated whole on top of the count. The counts are in ``TARGETS`` below (and in
the README's section on mutation testing); they are chosen so the default run takes about 20
minutes with 2 jobs on a quiet 2-core machine.

Each mutant runs only the tests that reach it: one traced run of each test set records which
lines of the module every test executes, and a mutant runs the tests that execute its line
(every test, for code that runs on import), the fastest first. The wider set is traced only
when some mutant survives the own tests.

Usage: ``python tools/mutate.py [--module NAME ...] [--full] [--jobs N] [--out DIR] [--list]
[--match TEXT ...] [--rescore]`` (``--full``: no sampling; ``--match``: only the mutants whose
description contains TEXT; ``--rescore``: judge the last report's survivors again with today's
reasons).
Writes ``DIR/report.md`` and ``DIR/report.json``; exits 1 when a module misses its target.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import dataclasses
import hashlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
REASONS = ROOT / "tools" / "mutate_equivalent.toml"
IMPORT = "<import>"  # the traced lines of the module's import (and what it calls then)
SEED = "cortex-mutate-1"  # the sample's seed: change it only to draw a different sample
KINDS = ("equivalent", "text-only", "unreachable")


@dataclass(frozen=True)
class Target:
    """One module under mutation and the tests that guard it."""

    name: str
    path: str
    own: tuple[str, ...]
    wider: tuple[str, ...]
    goal: float = 0.95
    functions: tuple[str, ...] = ()
    count: int = 0  # 0: every mutant; else a sample of this many, evenly through the file
    focus: tuple[str, ...] = ()  # functions mutated whole on top of the count


TARGETS = (
    Target(
        "scope",
        "cortex/rules/scope.py",
        ("tests/test_scope.py",),
        ("tests/test_query.py", "tests/test_context.py"),
        goal=1.0,
    ),
    Target(
        "keys",
        "cortex/storage/keys.py",
        ("tests/test_keys.py",),
        ("tests/test_store.py", "tests/test_postings.py", "tests/test_lexical.py"),
        count=30,
        focus=("parse_posting_key", "parse_lex_term_key", "show_key"),
    ),
    Target(
        "codec",
        "cortex/model/codec.py",
        ("tests/test_codec.py",),
        (
            "tests/test_given_vectors.py",
            "tests/test_validation.py",
            "tests/test_episode.py",
            "tests/test_schema.py",
            "tests/test_boundary.py",
            "tests/test_store.py",
        ),
        count=40,
    ),
    Target(
        "forms",
        "cortex/model/forms.py",
        ("tests/test_forms.py",),
        ("tests/test_given_vectors.py", "tests/test_validation.py"),
        count=30,
        focus=("render_with_short", "truncate"),
    ),
    Target(
        "salience",
        "cortex/rules/salience.py",
        ("tests/test_salience.py",),
        ("tests/test_query.py", "tests/test_context.py", "tests/test_store.py"),
        count=46,
    ),
    Target(
        "where",
        "cortex/query/where.py",
        ("tests/test_where.py",),
        ("tests/test_query.py", "tests/test_cli.py"),
        count=30,
    ),
    Target(
        "sensitivity",
        "cortex/rules/sensitivity.py",
        ("tests/test_sensitivity.py",),
        ("tests/test_handles.py", "tests/test_transfer.py", "tests/test_damaged_files.py"),
        goal=1.0,
    ),
    Target(
        "access",  # the restricted handle's rules in the API (visibility, clearance, writes)
        "cortex/agent/api.py",
        ("tests/test_handles.py", "tests/test_sensitivity.py"),
        ("tests/test_scope.py", "tests/test_query.py", "tests/test_core.py"),
        goal=1.0,
        functions=(
            "Cortex._check_visible",
            "Cortex._cleared",
            "Cortex._sees",
            "Cortex._sees_episode",
            "Cortex._check_level",
            "Cortex._may_change",
            "Cortex._guard_change",
            "Cortex._guard_see",
            "Cortex._visible_to",
            "Cortex._visible_entries",
            "Cortex._acting_for",
        ),
    ),
    Target(
        "tokens",  # the MCP identity binding: token file, scopes from JSON
        "cortex/serve/tokens.py",
        ("tests/test_tokens.py",),  # in process: test_serve's servers run in child processes
        ("tests/test_serve.py", "tests/test_sensitivity.py"),
        goal=1.0,
        count=40,
    ),
    Target(
        "identity",  # the HTTP server's binding of a request to its token's identity and task
        "cortex/serve/server.py",
        ("tests/test_tokens.py",),
        ("tests/test_serve.py",),
        goal=1.0,
        functions=("_Verifier", "http_app"),
    ),
    Target(
        "budgets",  # the write budget of a task (seed 003)
        "cortex/engine/store.py",
        ("tests/test_budgets.py",),
        ("tests/test_serve.py", "tests/test_aio.py"),
        functions=("Store.task", "Store.task_usage", "Store._charge", "Store._budgeted"),
    ),
    Target(
        "chains",  # claim keys and which memory is the current truth
        "cortex/rules/chains.py",
        ("tests/test_chains.py",),
        ("tests/test_claims.py", "tests/test_dedupe_pairs.py", "tests/test_aliases.py"),
        count=30,
        focus=("winner",),
    ),
    Target(
        "transfer",
        "cortex/transfer/bundle.py",
        ("tests/test_transfer.py",),
        # bundles with episodes, aliases and sensitivity labels are tested with those features
        (
            "tests/test_cli.py",
            "tests/test_corruption.py",
            "tests/test_ingest.py",
            "tests/test_aliases.py",
            "tests/test_sensitivity.py",
        ),
        functions=(
            "_check_header",
            "_check_trailer",
            "_memory_from_json",
            "_read_jsonl",
            "_read_cbor",
            "_bytes",
            "read_bundle",
        ),
        count=30,
    ),
)


# ---------------------------------------------------------------------------------------------
# Mutants


@dataclass
class Mutant:
    """One change to one module; ``key`` is its stable description."""

    module: str
    key: str
    line: int
    original: str
    replacement: str
    status: str = "pending"  # killed-own, killed-wider, survived, timeout-*, skipped
    detail: str = ""
    seconds: float = 0.0
    reason: dict[str, str] = field(default_factory=dict)
    lines: tuple[int, int] = (0, 0)  # the lines a test must run to reach the mutant
    in_function: bool = True


_BINOPS: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mult,
    ast.Mod: ast.FloorDiv,
    ast.Pow: ast.Mult,
    ast.LShift: ast.RShift,
    ast.RShift: ast.LShift,
    ast.BitAnd: ast.BitOr,
    ast.BitOr: ast.BitAnd,
    ast.BitXor: ast.BitAnd,
}
_CMPOPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}

Path_ = tuple[tuple[str, int | None], ...]


@dataclass
class _Candidate:
    path: Path_
    kind: str
    node: ast.AST
    new: ast.AST
    qualname: str
    statement: bool = False
    stmt_line: int = 0
    in_function: bool = False


def _is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


def _candidates(tree: ast.Module) -> Iterator[_Candidate]:
    """Every mutation of ``tree``, in source order."""

    def walk(  # noqa: PLR0917
        node: ast.AST, path: Path_, qual: str, in_raise: bool, line: int, in_fn: bool
    ) -> Iterator[_Candidate]:
        if isinstance(node, ast.JoinedStr):
            return  # f-strings: text
        if isinstance(node, ast.stmt):
            line = node.lineno
        for cand in _here(node, path, qual, in_raise):
            cand.stmt_line, cand.in_function = line, in_fn
            yield cand
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            qual = f"{qual}.{node.name}" if qual != "<module>" else node.name
        # a function's body runs when it is called; its defaults when it is defined
        body_fn = in_fn or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        for name, value in ast.iter_fields(node):
            if name in ("annotation", "returns", "decorator_list", "type_comment"):
                continue
            if isinstance(node, ast.ClassDef) and name in ("bases", "keywords"):
                continue  # frozen=True and friends: the struct's declaration
            if isinstance(value, list):
                for i, child in enumerate(value):
                    if isinstance(child, ast.AST):
                        if isinstance(child, ast.stmt) and _skip_stmt(child):
                            continue
                        yield from walk(
                            child,
                            (*path, (name, i)),
                            qual,
                            in_raise or isinstance(child, ast.Raise),
                            line,
                            body_fn if name == "body" else in_fn,
                        )
            elif isinstance(value, ast.AST):
                yield from walk(value, (*path, (name, None)), qual, in_raise, line, in_fn)

    yield from walk(tree, (), "<module>", False, 1, False)


def _skip_stmt(stmt: ast.stmt) -> bool:
    if _is_docstring(stmt):
        return True
    if isinstance(stmt, ast.Assign | ast.AnnAssign):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            return True
    if isinstance(stmt, ast.ImportFrom | ast.Import):
        return True
    return isinstance(stmt, ast.If) and "TYPE_CHECKING" in ast.unparse(stmt.test)


def _here(node: ast.AST, path: Path_, qual: str, in_raise: bool) -> Iterator[_Candidate]:
    def c(kind: str, new: ast.AST, statement: bool = False) -> _Candidate:
        return _Candidate(path, kind, node, new, qual, statement)

    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        new = copy.deepcopy(node)
        new.op = _BINOPS[type(node.op)]()
        yield c("binop", new)
    elif isinstance(node, ast.AugAssign) and type(node.op) in _BINOPS:
        new = copy.deepcopy(node)
        new.op = _BINOPS[type(node.op)]()
        yield c("augassign", new, statement=True)
    elif isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in _CMPOPS:
                new = copy.deepcopy(node)
                new.ops[i] = _CMPOPS[type(op)]()
                yield c("compare", new)
    elif isinstance(node, ast.BoolOp):
        new = copy.deepcopy(node)
        new.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        yield c("boolop", new)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not | ast.USub):
        yield c("unary-drop", copy.deepcopy(node.operand))
    elif isinstance(node, ast.Constant) and not in_raise:
        v = node.value
        if isinstance(v, bool):
            yield c("const", ast.Constant(not v))
        elif isinstance(v, int | float):
            yield c("const", ast.Constant(v + 1))
        elif isinstance(v, str | bytes) and v:
            yield c("const", ast.Constant(("XX" + v + "XX") if isinstance(v, str) else b"X" + v))
    elif isinstance(node, ast.Raise):
        yield c("raise-pass", ast.Pass(), statement=True)
    elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        yield c("call-pass", ast.Pass(), statement=True)
    # conditions forced either way (the test of if/while/ternary/comprehension filter)
    tests: list[tuple[str, int | None, ast.AST]] = []
    if isinstance(node, ast.If | ast.While | ast.IfExp | ast.Assert):
        tests.append(("test", None, node.test))
    elif isinstance(node, ast.comprehension):
        tests += [("ifs", i, t) for i, t in enumerate(node.ifs)]
    for fname, idx, test in tests:
        if isinstance(test, ast.Constant):
            continue
        for forced in (True, False):
            yield _Candidate(
                (*path, (fname, idx)),
                f"cond-{str(forced).lower()}",
                test,
                ast.Constant(forced),
                qual,
            )


def _set_at(tree: ast.AST, path: Path_, new: ast.AST) -> None:
    parent = tree
    for name, idx in path[:-1]:
        child = getattr(parent, name)
        parent = child[idx] if idx is not None else child
    name, idx = path[-1]
    if idx is None:
        setattr(parent, name, new)
    else:
        getattr(parent, name)[idx] = new


def _offsets(source: bytes) -> list[int]:
    starts, pos = [], 0
    for line in source.splitlines(keepends=True):
        starts.append(pos)
        pos += len(line)
    starts.append(pos)
    return starts


def _one_line(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _within(qualname: str, names: tuple[str, ...]) -> bool:
    """Whether ``qualname`` is one of ``names`` (a function, or ``Class.method``) or in one."""
    return any(qualname == n or qualname.startswith(n + ".") for n in names)


def _keyed(target: Target) -> tuple[bytes, ast.Module, list[tuple[str, _Candidate]]]:
    """``target``'s source, its tree, and every mutation of it with its description (its key)."""
    source = (ROOT / target.path).read_bytes()
    tree = ast.parse(source)
    seen: dict[str, int] = {}
    keyed: list[tuple[str, _Candidate]] = []
    for cand in _candidates(tree):
        if target.functions and not _within(cand.qualname, target.functions):
            continue
        base = (
            f"{cand.qualname}: {cand.kind}: {_one_line(ast.unparse(cand.node))} "
            f"=> {_one_line(ast.unparse(cand.new))}"
        )
        seen[base] = seen.get(base, 0) + 1
        keyed.append((base if seen[base] == 1 else f"{base} #{seen[base]}", cand))
    return source, tree, keyed


def _sample(target: Target, keyed: list[tuple[str, _Candidate]]) -> set[str]:
    """The keys of ``target``'s sample: ``count`` mutants evenly through the file, ``focus`` whole.

    The mutants outside ``focus``, in source order, are cut into ``count`` runs of equal length;
    from each run the one with the smallest ``sha256(SEED|module|key)`` is taken.
    """
    focus = {k for k, c in keyed if _within(c.qualname, target.focus)}
    rest = [k for k, _ in keyed if k not in focus]
    if not target.count or target.count >= len(rest):
        return focus | set(rest)

    def h(key: str) -> bytes:
        return hashlib.sha256(f"{SEED}|{target.name}|{key}".encode()).digest()

    n = target.count
    chosen = {min(rest[i * len(rest) // n : (i + 1) * len(rest) // n], key=h) for i in range(n)}
    return focus | chosen


def mutants_of(target: Target, full: bool = False) -> tuple[list[Mutant], dict[str, str], int]:
    """The mutants of ``target`` (its sample unless ``full``).

    With them: their mutated sources by key, and how many mutants did not apply.
    """
    source, tree, keyed = _keyed(target)
    starts = _offsets(source)
    out: list[Mutant] = []
    sources: dict[str, str] = {}
    failed = 0
    keep = {k for k, _ in keyed} if full else _sample(target, keyed)
    for key, cand in keyed:
        if key not in keep:
            continue
        node = cand.node
        assert node.end_lineno is not None and node.end_col_offset is not None
        begin = starts[node.lineno - 1] + node.col_offset
        end = starts[node.end_lineno - 1] + node.end_col_offset
        original = source[begin:end].decode("utf-8")
        new_text = ast.unparse(cand.new)
        # the change made in the tree (undone below) is the one the text must parse to
        _set_at(tree, cand.path, cand.new)
        want = ast.dump(tree)
        _set_at(tree, cand.path, node)
        mutated = None
        for text in [new_text] if cand.statement else [f"({new_text})", new_text]:
            attempt = source[:begin] + text.encode("utf-8") + source[end:]
            try:
                if ast.dump(ast.parse(attempt)) == want:
                    mutated = attempt.decode("utf-8")
                    break
            except SyntaxError:
                continue
        if mutated is None:
            failed += 1
            continue
        m = Mutant(target.name, key, node.lineno, _one_line(original), new_text)
        m.lines = (min(cand.stmt_line, node.lineno), node.end_lineno)
        m.in_function = cand.in_function
        out.append(m)
        sources[key] = mutated
    return out, sources, failed


# ---------------------------------------------------------------------------------------------
# Running


class Plugin:
    """A pytest plugin for the runs: traces lines, or selects tests.

    With ``MUTATE_TRACE`` (the module's path) it records which lines of the module each test
    runs, written as JSON to ``MUTATE_TRACE_OUT``; with ``MUTATE_SELECT`` (a JSON file of node
    ids and seconds) it keeps only those tests, fastest first.
    """

    def __init__(self) -> None:
        self.trace = os.environ.get("MUTATE_TRACE")
        self.out = os.environ.get("MUTATE_TRACE_OUT")
        sel = os.environ.get("MUTATE_SELECT")
        self.select = json.loads(Path(sel).read_text()) if sel else None
        self.seen: dict[str, Any] = {}
        self.lines: set[int] = set()
        self.start = 0.0
        if self.trace:  # the lines run while the tests are collected: the module's import
            threading.settrace(self._global)
            sys.settrace(self._global)

    def _global(self, frame: Any, event: str, arg: Any) -> Any:
        if self.trace and frame.f_code.co_filename.endswith(self.trace):
            return self._local
        return None

    def _local(self, frame: Any, event: str, arg: Any) -> Any:
        if event == "line":
            self.lines.add(frame.f_lineno)
        return self._local

    def pytest_collection_modifyitems(self, session: Any, config: Any, items: list[Any]) -> None:
        """The pytest hook."""
        if self.select is None:
            return
        keep = [i for i in items if i.nodeid in self.select]
        config.hook.pytest_deselected(items=[i for i in items if i.nodeid not in self.select])
        items[:] = sorted(keep, key=lambda i: self.select[i.nodeid])

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        """The pytest hook."""
        if self.trace and IMPORT not in self.seen:
            self.seen[IMPORT] = [sorted(self.lines), 0.0]
        self.lines, self.start = set(), time.monotonic()
        if self.trace:
            threading.settrace(self._global)
            sys.settrace(self._global)

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        """The pytest hook."""
        if self.trace:
            sys.settrace(None)
            threading.settrace(None)  # type: ignore[arg-type]
            self.seen[nodeid] = [sorted(self.lines), time.monotonic() - self.start]

    def pytest_sessionfinish(self, session: Any, exitstatus: int) -> None:
        """The pytest hook."""
        if self.out:
            Path(self.out).write_text(json.dumps(self.seen))


_IGNORE = shutil.ignore_patterns(
    ".git", ".venv*", "build", "*.egg-info", "__pycache__", "*.so", "mutation-results",
    "bench-results", ".mypy_cache", ".ruff_cache", ".hypothesis",
)  # fmt: skip


_PRELOAD = (
    "pytest", "hypothesis", "numpy", "msgspec", "lmdb", "cbor2", "anyio", "jsonschema", "httpx2",
    "mcp", "mcp.client.streamable_http", "mcp.server", "starlette", "uvicorn", "psycopg",
    "tokenizers", "safetensors", "yaml",
)  # fmt: skip


def zygote() -> None:
    """Serve test runs in forked children, third-party modules imported once (``Workspace``).

    Reads one JSON request a line (``args``, ``env``, ``out``), forks, and the child runs
    pytest with its output in ``out``; answers ``{"pid": ...}`` at once, then ``{"code": ...}``.
    Nothing of ``cortex`` or ``tests`` is imported here: each child imports the mutated tree.
    """
    import importlib

    sys.modules["cortex._speedups"] = None  # type: ignore[assignment]
    for name in _PRELOAD:
        with contextlib.suppress(ImportError):  # optional: the children import what they need
            importlib.import_module(name)
    ours = [n for n in sys.modules if n.split(".")[0] in ("cortex", "tests")]
    assert ours == ["cortex._speedups"], ours
    for line in sys.stdin:
        req = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:  # the child: a test run of its own
            code = 3
            try:
                os.setsid()
                fd = os.open(req["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                null = os.open(os.devnull, os.O_RDONLY)
                os.dup2(null, 0)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                os.environ.update(req["env"])
                import pytest

                code = int(pytest.main(req["args"], plugins=[Plugin()]))
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"code": os.waitstatus_to_exitcode(status)}), flush=True)


def _children_cpu(pid: int) -> float:
    """CPU seconds (user + system) of the finished children of process ``pid`` (Linux)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")  # cutime, cstime


_ZYGOTE = "import sys; sys.path.insert(1, 'tools'); import mutate; mutate.zygote()"


class Workspace:
    """A private copy of the tree in which one mutant at a time is written and tested.

    Its test runs are children forked by one long-lived process of the copy (``zygote``), so
    pytest, hypothesis, numpy and the MCP SDK are imported once, not once a mutant.
    """

    def __init__(self, base: Path, n: int) -> None:
        self.root = base / f"w{n}"
        shutil.copytree(ROOT, self.root, ignore=_IGNORE)
        self.tick = 0
        self.cpu = 0.0  # CPU seconds of the finished test runs (user + system)
        env = dict(os.environ, CORTEX_NO_SPEEDUPS="1", HYPOTHESIS_PROFILE="ci")
        env.pop("PYTHONPATH", None)
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _ZYGOTE],
            cwd=self.root,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            self._lines.put(line)
        self._lines.put("")

    def _answer(self, timeout: float | None) -> dict[str, Any]:
        line = self._lines.get(timeout=timeout)
        if not line:
            raise SystemExit(f"the test runner of {self.root} ended")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        """End the test runner."""
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()

    def write(self, rel: str, text: str) -> None:
        """Write ``text`` as the module ``rel`` of this copy."""
        p = self.root / rel
        p.write_text(text, encoding="utf-8")
        # a unique mtime, so no cached bytecode of another mutant of the same size is reused
        self.tick += 1
        stamp = 1_000_000_000 + self.tick
        os.utime(p, (stamp, stamp))

    def pytest(
        self, files: tuple[str, ...], timeout: float, **env_extra: str
    ) -> tuple[int | None, float, str]:
        """Run pytest on ``files``; ``(exit code or None on timeout, seconds, last line)``."""
        args = ["-x", "-q", "--no-header", "-p", "no:cacheprovider", *files]
        # plugins the zygote imported (anyio's, through the MCP SDK) are not assert-rewritten
        args[:0] = ["-W", "ignore::pytest.PytestAssertRewriteWarning"]
        out = self.root / ".run.out"
        assert self._proc.stdin is not None
        start = time.monotonic()
        self._proc.stdin.write(json.dumps({"args": args, "env": env_extra, "out": str(out)}))
        self._proc.stdin.write("\n")
        self._proc.stdin.flush()
        pid = self._answer(60)["pid"]
        try:
            code: int | None = self._answer(timeout)["code"]
        except queue.Empty:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)  # the run and whatever it started
            self._answer(60)
            code = None
        self.cpu = _children_cpu(self._proc.pid)
        lines = [ln for ln in out.read_text(errors="replace").splitlines() if ln.strip()]
        last = "timeout" if code is None else (lines[-1] if lines else "")
        return code, time.monotonic() - start, last


def _reasons() -> dict[str, dict[str, dict[str, str]]]:
    if not REASONS.exists():
        return {}
    with open(REASONS, "rb") as f:
        data: dict[str, dict[str, dict[str, str]]] = tomllib.load(f)
    for module, entries in data.items():
        for key, r in entries.items():
            if r.get("kind") not in KINDS or not r.get("why"):
                raise SystemExit(f"{REASONS}: [{module}] {key!r}: kind must be {KINDS}, with a why")
    return data


def _selection(m: Mutant, traced: dict[str, Any]) -> dict[str, float]:
    """The tests that reach ``m`` with their seconds (they run fastest first)."""
    lo, hi = m.lines
    tests = {k: v for k, v in traced.items() if k != IMPORT}
    on_import = any(lo <= n <= hi for n in traced.get(IMPORT, ((), 0))[0])
    if not m.in_function or on_import:  # runs on import: every test reaches it
        return {nodeid: secs for nodeid, (_, secs) in tests.items()}
    return {
        nodeid: secs for nodeid, (lines, secs) in tests.items() if any(lo <= n <= hi for n in lines)
    }


def run_target(
    target: Target, spaces: list[Workspace], jobs: int, log: Any, match: tuple[str, ...] = ()
) -> tuple[list[Mutant], dict[str, Any]]:
    """Mutate one module and run the tests that reach each mutant against it.

    The own tests run against every mutant first; the wider set is traced, and run, only when
    some mutant survives them. With ``match``, only the mutants whose description contains one
    of its strings run.
    """
    mutants, sources, failed = mutants_of(target)
    if match:
        mutants = [m for m in mutants if any(s in m.key for s in match)]
    original = (ROOT / target.path).read_text(encoding="utf-8")
    base: dict[str, float] = {}
    done = 0

    def one(space: Workspace, m: Mutant, phase: str, files: tuple[str, ...], traced: Any) -> None:
        chosen = _selection(m, traced)
        if not chosen:
            return  # no test of this set runs the mutated line
        sel = space.root / ".select.json"
        sel.write_text(json.dumps(chosen))
        env = {"MUTATE_SELECT": str(sel)}
        budget = sum(chosen.values())
        space.write(target.path, sources[m.key])
        try:
            code, secs, last = space.pytest(files, 3 * budget + 30, **env)
        finally:
            space.write(target.path, original)
        m.seconds += secs
        if code is None:
            m.status, m.detail = f"timeout-{phase}", last
        elif code != 0:
            m.status, m.detail = f"killed-{phase}", last

    def run_phase(todo: list[Mutant], phase: str, files: tuple[str, ...], traced: Any) -> None:
        def worker(space: Workspace) -> None:
            nonlocal done
            while todo:
                m = todo.pop(0)
                one(space, m, phase, files, traced)
                if m.status == "pending" and phase == "own":
                    continue  # on to the wider set
                done += 1
                if m.status == "pending" or done % 25 == 0:
                    state = "survived" if m.status == "pending" else m.status
                    print(f"  [{target.name}] {done}/{len(mutants)} {state}: {m.key}", file=log)
                    log.flush()

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            list(pool.map(worker, spaces[:jobs]))

    for phase, files in (("own", target.own), ("wider", target.wider)):
        todo = [m for m in mutants if m.status == "pending"]
        if not todo or not files:
            continue
        out = spaces[0].root / f".trace-{phase}.json"
        env = {"MUTATE_TRACE": "/" + target.path, "MUTATE_TRACE_OUT": str(out)}
        code, secs, last = spaces[0].pytest(files, 1800, **env)
        if code != 0:
            raise SystemExit(f"{target.name}: the {phase} tests fail unmutated: {last}")
        traced, base[phase] = json.loads(out.read_text()), secs
        print(
            f"[{target.name}] {len(todo)} mutants against the {phase} tests "
            f"({failed} not applicable); traced them in {secs:.0f}s",
            file=log,
            flush=True,
        )

        run_phase(todo, phase, files, traced)
    for m in mutants:
        if m.status == "pending":
            m.status, m.detail = "survived", ""
    return mutants, {"not_applicable": failed, "traced_seconds": base}


def _score(mutants: list[Mutant], target: Target) -> dict[str, Any]:
    total = len(mutants)
    own = sum(m.status in ("killed-own", "timeout-own") for m in mutants)
    killed = sum(m.status.startswith(("killed", "timeout")) for m in mutants)
    kept = [m for m in mutants if m.status == "survived" and m.reason]
    unexplained = [m for m in mutants if m.status == "survived" and not m.reason]
    denominator = total - len(kept)
    score = killed / denominator if denominator else 1.0
    return {
        "module": target.name,
        "path": target.path,
        "sample": target.count,  # 0: whole
        "mutants": total,
        "killed_by_own_tests": own,
        "killed": killed,
        "equivalent": sum(m.reason.get("kind") == "equivalent" for m in kept),
        "text_only": sum(m.reason.get("kind") == "text-only" for m in kept),
        "unreachable": sum(m.reason.get("kind") == "unreachable" for m in kept),
        "unexplained_survivors": len(unexplained),
        "score": round(score, 4),
        "goal": target.goal,
        "met": score >= target.goal,
    }


def _markdown(scores: list[dict[str, Any]], mutants: list[Mutant], stale: list[str]) -> str:
    lines = [
        "# Mutation testing",
        "",
        "Score = killed / (mutants - kept survivors); kept = equivalent or text-only, with a "
        "reason in tools/mutate_equivalent.toml.",
        "",
        "| module | mutants | killed by own tests | killed | equivalent | text-only | unreachable "
        "| unexplained | score | goal |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in scores:
        rate = f" (sample of {s['sample']})" if s.get("sample") else ""
        lines.append(
            f"| {s['module']}{rate} | {s['mutants']} | {s['killed_by_own_tests']} | {s['killed']} "
            f"| {s['equivalent']} | {s['text_only']} | {s.get('unreachable', 0)} "
            f"| {s['unexplained_survivors']} "
            f"| {s['score']:.1%} | {s['goal']:.0%}{'' if s['met'] else ' **missed**'} |"
        )
    lines += ["", "## Survivors", ""]
    for m in mutants:
        if m.status != "survived":
            continue
        why = f"{m.reason['kind']}: {m.reason['why']}" if m.reason else "**no reason: a test gap**"
        path = next((t.path for t in TARGETS if t.name == m.module), m.module)
        lines.append(f"- `{path}:{m.line}` (`{m.module}`) `{m.key}`  \n  {why}")
    if stale:
        lines += ["", "## Reasons that match no survivor (remove them)", ""]
        lines += [f"- `{k}`" for k in stale]
    return "\n".join(lines) + "\n"


def _run(
    targets: list[Target], spaces: list[Workspace], args: argparse.Namespace, reasons: Any
) -> tuple[list[dict[str, Any]], list[Mutant], dict[str, Any], list[str]]:
    """Run every target; its scores, mutants, run details and stale reasons."""
    scores: list[dict[str, Any]] = []
    everything: list[Mutant] = []
    extra: dict[str, Any] = {}
    stale: list[str] = []
    for t in targets:
        mutants, info = run_target(t, spaces, max(1, args.jobs), sys.stdout, tuple(args.match))
        s, gone = _judge(t, mutants, reasons, partial=bool(args.match))
        scores.append(s)
        stale += gone
        everything += mutants
        extra[t.name] = info
    return scores, everything, extra, stale


def _judge(
    t: Target, mutants: list[Mutant], reasons: Any, partial: bool
) -> tuple[dict[str, Any], list[str]]:
    """Give the survivors of ``t`` their reasons; its score and its stale reasons."""
    given = reasons.get(t.name, {})
    for m in mutants:
        m.reason = dict(given[m.key]) if m.status == "survived" and m.key in given else {}
    survived = {m.key for m in mutants if m.status == "survived"}
    stale: list[str] = []
    if not partial:  # a partial run cannot tell a stale reason
        ran = {m.key for m in mutants}
        every = {k for k, _ in _keyed(t)[2]}
        # stale: its mutant ran and died, or no longer exists (not: left out of the sample)
        gone = [k for k in given if k not in survived and (k in ran or k not in every)]
        stale = [f"{t.name}: {k}" for k in gone]
    s = _score(mutants, t)
    print(
        f"[{t.name}] score {s['score']:.1%} (goal {t.goal:.0%}), "
        f"{s['unexplained_survivors']} unexplained",
        flush=True,
    )
    return s, stale


def _write_report(out: Path, report: dict[str, Any], mutants: list[Mutant]) -> str:
    (out / "report.json").write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    md = _markdown(report["scores"], mutants, report["stale_reasons"]) + (
        f"\nRun time: {report['seconds'] / 60:.1f} min with {report['jobs']} jobs; the test runs "
        f"took {report['cpu_seconds'] / 60:.1f} CPU minutes.\n"
    )
    (out / "report.md").write_text(md, encoding="utf-8")
    return md


def rescore(out: Path) -> int:
    """Judge the mutants of ``out/report.json`` again with today's reasons (nothing runs)."""
    report = json.loads((out / "report.json").read_text())
    mutants = [Mutant(**{**d, "lines": tuple(d["lines"])}) for d in report["mutants"]]
    reasons = _reasons()
    report["scores"], report["stale_reasons"] = [], []
    for t in TARGETS:
        mine = [m for m in mutants if m.module == t.name]
        if mine:
            s, gone = _judge(t, mine, reasons, partial=False)
            report["scores"].append(s)
            report["stale_reasons"] += gone
    report["mutants"] = [asdict(m) for m in mutants]
    print(_write_report(out, report, mutants))
    return 0 if all(s["met"] for s in report["scores"]) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--module", action="append", choices=[t.name for t in TARGETS])
    parser.add_argument("--full", action="store_true", help="every mutant (no sampling)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", default=str(ROOT / "mutation-results"))
    parser.add_argument("--list", action="store_true", help="print the mutants, run nothing")
    parser.add_argument(
        "--match",
        action="append",
        default=[],
        help="run only mutants whose description contains this text (a partial report)",
    )
    parser.add_argument(
        "--rescore",
        action="store_true",
        help="judge the mutants of --out's report.json again with today's reasons; run nothing",
    )
    args = parser.parse_args(argv)
    if args.rescore:
        return rescore(Path(args.out))
    targets = [t for t in TARGETS if not args.module or t.name in args.module]
    if args.full:
        targets = [dataclasses.replace(t, count=0) for t in targets]
    reasons = _reasons()
    if args.list:
        for t in targets:
            ms, _, failed = mutants_of(t)
            print(f"# {t.name}: {len(ms)} mutants ({failed} not applicable)")
            for m in ms:
                print(f"{t.path}:{m.line}: {m.key}")
        return 0
    started = time.monotonic()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cortex-mutate-") as tmp:
        spaces = [Workspace(Path(tmp), n) for n in range(max(1, args.jobs))]
        with contextlib.ExitStack() as stack:
            for space in spaces:
                stack.callback(space.close)
            scores, everything, extra, stale = _run(targets, spaces, args, reasons)
        cpu = sum(space.cpu for space in spaces)
    elapsed = time.monotonic() - started
    report = {
        "seconds": round(elapsed, 1),
        "cpu_seconds": round(cpu, 1),
        "jobs": args.jobs,
        "scores": scores,
        "modules": extra,
        "stale_reasons": stale,
        "mutants": [asdict(m) for m in everything],
    }
    print(_write_report(out, report, everything))
    return 0 if all(s["met"] for s in scores) else 1


if __name__ == "__main__":
    sys.exit(main())
