import os
import sys

from hypothesis import HealthCheck, settings

# CORTEX_NO_SPEEDUPS=1 runs the tests on the pure-Python path: the optional C accelerator
# cortex._speedups imports as absent, as in an install without a C compiler (tools/mutate.py
# mutates that path). It must act before anything imports cortex.
if os.environ.get("CORTEX_NO_SPEEDUPS"):
    sys.modules["cortex._speedups"] = None  # type: ignore[assignment]

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    max_examples=100,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, max_examples=300)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


# --- engines: LMDB and PostgreSQL -----------------------------------------------------------
#
# ``store_path`` is where a test's store lives: a directory (LMDB) or a postgresql:// URL naming
# a fresh table in a private cluster (tests/pgserver.py), by the ``engine`` parameter. A module
# runs on both engines by taking its ``path`` from ``store_path``; a test about LMDB's files is
# marked ``lmdb_only`` and its PostgreSQL variant is not collected (deselected, never skipped).
# The PostgreSQL tests never skip in CI (CI=1) or with CORTEX_PG_REQUIRED=1: a missing server or
# psycopg fails them. CORTEX_PG_URL=postgresql:///db?host=... uses a running server instead.

import contextlib  # noqa: E402
import itertools  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

from tests import pgserver  # noqa: E402

ENGINES = ["lmdb", "postgres"]
_names = itertools.count(1)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "lmdb_only: a behaviour of LMDB's files; not run on PG")
    config.addinivalue_line("markers", "postgres: needs the PostgreSQL server")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep, drop = [], []
    for item in items:
        params = getattr(item, "callspec", None)
        engine = params.params.get("engine") if params is not None else None
        if engine == "postgres" and item.get_closest_marker("lmdb_only") is not None:
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


class _Server:
    """A PostgreSQL server for the tests: a private cluster or CORTEX_PG_URL's."""

    def __init__(self) -> None:
        self.cluster: pgserver.PgCluster | None = None
        self.base = os.environ.get("CORTEX_PG_URL", "")

    def url(self, store: str) -> str:
        if self.cluster is not None:
            return self.cluster.url(store)
        sep = "&" if "?" in self.base else "?"
        return f"{self.base}{sep}store={store}"

    def drop(self, store: str) -> None:
        import psycopg

        from cortex.storage.pgkv import parse_url

        with psycopg.connect(parse_url(self.url(store)).conninfo, autocommit=True) as conn:
            conn.execute(f'DROP TABLE IF EXISTS "cortex_{store}"')
            conn.execute(f'DROP FUNCTION IF EXISTS "cortex_{store}_v"()')  # the version trigger's


@pytest.fixture(scope="session")
def pg_server() -> Iterator[_Server]:
    """The session's PostgreSQL server (started once, stopped at the end)."""
    why = None
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        why = "psycopg / psycopg_pool are not installed (pip install -e '.[dev]')"
    server = _Server()
    if why is None and not server.base:
        bindir = pgserver.find_bin()
        if bindir is None:
            why = "no PostgreSQL server binaries (apt-get install -y postgresql)"
        else:
            server.cluster = pgserver.PgCluster(bindir)
    if why is not None:
        if pgserver.required():
            pytest.fail(f"the PostgreSQL tests are required here (CI) but cannot run: {why}")
        pytest.skip(f"PostgreSQL tests skipped: {why}")
    try:
        if server.cluster is not None:
            server.cluster.start()
        yield server
    finally:
        if server.cluster is not None:
            server.cluster.stop()


@pytest.fixture
def pg_url(pg_server: _Server) -> Iterator[Callable[[], str]]:
    """Make URLs of fresh stores (tables dropped after the test)."""
    made: list[str] = []

    def make() -> str:
        name = f"t{os.getpid()}_{next(_names)}"
        made.append(name)
        return pg_server.url(name)

    yield make
    for name in made:
        # a dead server (a crash test) leaves the table to the cluster's removal
        with contextlib.suppress(Exception):
            pg_server.drop(name)


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    """The engine a parametrised test runs on."""
    name: str = request.param
    return name


@pytest.fixture
def store_path(engine: str, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    """Where the test's store lives: a directory (LMDB) or a URL (PostgreSQL)."""
    if engine == "lmdb":
        return tmp_path / "store"
    make: Callable[[], str] = request.getfixturevalue("pg_url")
    return make()


@pytest.fixture
def place(engine: str, tmp_path: Path, request: pytest.FixtureRequest) -> Callable[[str], Any]:
    """``place(name)``: the location of the test's store ``name`` on its engine (the same name
    gives the same place)."""
    made: dict[str, Any] = {}

    def where(name: str) -> Any:
        if name not in made:
            if engine == "lmdb":
                made[name] = tmp_path / name
            else:
                made[name] = request.getfixturevalue("pg_url")()
        return made[name]

    return where
