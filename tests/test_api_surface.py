# ruff: noqa: E501 - the pinned signatures are one line each
"""Cortex composes the engine: its public surface is what it was when it extended ``Store``.

``SURFACE`` is every public name of ``Cortex`` (and its context-manager methods and constructor)
with its kind and ``inspect.signature``, taken from the commit before the change (14c234b,
when ``class Cortex(Store)``). The names it took from ``Store`` unchanged keep the store's
docstrings. A deliberate change of the surface updates ``SURFACE`` (and the changelog).
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from cortex import Cortex, Fact
from cortex.engine.store import Store

SURFACE: tuple[tuple[str, str, str | None], ...] = (
    ("__enter__", "function", "(self) -> 'Self'"),
    (
        "__exit__",
        "function",
        "(self, exc_type: 'type[BaseException] | None', exc: 'BaseException | None', tb: 'TracebackType | None') -> 'None'",
    ),
    (
        "__init__",
        "function",
        "(self, kv: 'KV', actor: 'str | None', *, clock: 'Callable[[], datetime] | None' = None, decay: 'Mapping[MemoryType | str, DecayClass | str] | None' = None, weights: 'Weights | None' = None, salience_blend: 'float' = 0.2, fusion: 'Fusion | str' = 'convex', embedder: \"Embedder | Literal['auto'] | None\" = None, reembed: 'bool' = False, progress: 'Callable[[int, int], None] | None' = None, dedupe: 'bool' = False, vector_ef: 'int' = 64, vector_precision: \"Literal['float16', 'float32'] | None\" = None, as_owner: 'bool' = False, scopes: 'Sequence[Scope]' = (), clearance: 'Sensitivity | str | None' = None) -> 'None'",
    ),
    (
        "about",
        "function",
        "(self, subject: 'str', attribute: 'str | None' = None, *, types: 'Sequence[MemoryType | str] | None' = None, limit: 'int' = 100, reader: 'Reader | None' = None, as_of: 'datetime | None' = None) -> 'Result'",
    ),
    (
        "add_edge",
        "function",
        "(self, src: 'Uri | MemoryId | str', type: 'EdgeType | str', dst: 'Uri | MemoryId | str', **options: 'Any') -> 'Edge'",
    ),
    ("alias", "function", "(self, name: 'str', alias: 'str') -> 'AliasChange'"),
    ("aliases", "function", "(self, name: 'str | None' = None) -> 'dict[str, tuple[str, ...]]'"),
    (
        "attest",
        "function",
        "(self, uris: 'Iterable[Uri | MemoryId | str]', outcome: 'Outcome | str' = <Outcome.SUCCESS: 1>) -> 'None'",
    ),
    ("backup", "function", "(self, dest: 'str | os.PathLike[str]') -> 'VerifyReport'"),
    (
        "chain",
        "function",
        "(self, ref: 'Uri | MemoryId | str', *, reader: 'Reader | None' = None, as_of: 'datetime | None' = None) -> 'list[ChainLink]'",
    ),
    ("close", "function", "(self) -> 'None'"),
    ("conflicts", "function", "(self, *, reader: 'Reader | None' = None) -> 'list[Conflict]'"),
    (
        "context",
        "function",
        "(self, verb: 'Verb | str', objects: 'Sequence[Any] | str' = (), budget_tokens: 'int' = 3000, *, query: 'str | None' = None, reader: 'Reader | None' = None, form: 'Form' = 'medium', outcomes_per_object: 'int' = 3, recall_limit: 'int' = 10, evidence: 'int' = 0) -> 'Bundle'",
    ),
    ("core_delete", "function", "(self, section: 'str', key: 'str') -> 'Uri'"),
    (
        "core_get",
        "function",
        "(self, section: 'str | None' = None, *, as_of: 'datetime | None' = None) -> 'dict[str, Any]'",
    ),
    ("core_history", "function", "(self, section: 'str', key: 'str') -> 'list[CoreChange]'"),
    ("core_update", "function", "(self, section: 'str', key: 'str', value: 'str') -> 'Uri'"),
    ("core_yaml", "function", "(self, *, as_of: 'datetime | None' = None) -> 'str'"),
    ("edges", "function", "(self, ref: 'Uri | MemoryId | str', **options: 'Any') -> 'list[Edge]'"),
    ("embed_pending", "function", "(self) -> 'int'"),
    (
        "episode",
        "function",
        "(self, ref: 'MemoryId | str', *, reader: 'Reader | None' = None) -> 'Episode'",
    ),
    (
        "episode_of",
        "function",
        "(self, ref: 'Uri | MemoryId | str', *, reader: 'Reader | None' = None) -> 'EpisodeLink'",
    ),
    (
        "episode_sensitivity",
        "function",
        "(self, ref: 'MemoryId | str', *, reader: 'Reader | None' = None) -> 'Sensitivity'",
    ),
    (
        "episodes",
        "function",
        "(self, *, limit: 'int' = 50, source: 'str | None' = None, channel: 'str | None' = None, label: 'str | None' = None, reader: 'Reader | None' = None) -> 'list[Episode]'",
    ),
    (
        "facets",
        "function",
        "(self, window: 'Window | None' = None, by: \"Literal['type', 'tag', 'subject', 'counterparty']\" = 'type', *, types: 'Sequence[MemoryType | str]' = (), reader: 'Reader | None' = None) -> 'dict[str, int]'",
    ),
    ("find", "function", "(self, query: 'Query') -> 'Result'"),
    (
        "history",
        "function",
        "(self, ref: 'Uri | MemoryId | str', *, reader: 'Reader | None' = None) -> 'list[Memory]'",
    ),
    (
        "import_records",
        "function",
        "(self, memories: 'Iterable[tuple[Head, Sequence[Version]]]', edges: 'Iterable[Edge]' = (), episodes: 'Iterable[Episode]' = (), *, sensitivity: 'Mapping[MemoryId, Sensitivity] | None' = None, episode_sensitivity: 'Mapping[MemoryId, Sensitivity] | None' = None, aliases: 'Mapping[str, AliasRecord] | None' = None) -> 'ImportReport'",
    ),
    (
        "ingest",
        "function",
        "(self, content: 'str', *, occurred_at: 'datetime | None' = None, source: 'str' = 'api', channel: 'str | None' = None, labels: 'Sequence[str]' = (), visibility: 'Visibility | str' = <Visibility.PRIVATE: 1>, media_type: 'str | None' = None, extractor: 'Extractor | None' = None, id: 'MemoryId | None' = None, sensitivity: 'Sensitivity | str | None' = None) -> 'IngestResult'",
    ),
    (
        "journal",
        "function",
        "(self, start: 'int | None' = None, *, reverse: 'bool' = False, limit: 'int | None' = None) -> 'Iterator[JournalEntry]'",
    ),
    (
        "memories_from",
        "function",
        "(self, ref: 'MemoryId | str', *, reader: 'Reader | None' = None) -> 'list[Uri]'",
    ),
    (
        "open",
        "classmethod",
        "(path: 'str | os.PathLike[str]', *, actor: 'str | None', create: 'bool' = True, readonly: 'bool' = False, metasync: 'bool' = True, map_size: 'int' = 67108864, clock: 'Callable[[], datetime] | None' = None, check_pages: 'bool' = True, **options: 'Any') -> 'Self'",
    ),
    ("owner", "property", None),
    ("path", "property", None),
    (
        "purge",
        "function",
        "(self, ref: 'Uri | MemoryId | str', reason: 'str', by: 'str | None' = None, *, scrub: 'bool' = True, wait: 'float' = 30.0) -> 'Tombstone'",
    ),
    (
        "purge_episode",
        "function",
        "(self, ref: 'MemoryId | str', reason: 'str', by: 'str | None' = None, *, scrub: 'bool' = True, wait: 'float' = 30.0) -> 'Episode'",
    ),
    (
        "merge_lexical",
        "function",
        "(self) -> 'int'",
    ),
    (
        "reindex_lexical",
        "function",
        "(self, progress: 'Callable[[int, int], None] | None' = None) -> 'int'",
    ),
    (
        "reindex_vectors",
        "function",
        "(self, progress: 'Callable[[int, int], None] | None' = None) -> 'int'",
    ),
    (
        "remove_edge",
        "function",
        "(self, src: 'Uri | MemoryId | str', type: 'EdgeType | str', dst: 'Uri | MemoryId | str', **options: 'Any') -> 'Edge'",
    ),
    (
        "resolve",
        "function",
        "(self, uri: 'Uri | str', *, reader: 'Reader | None' = None) -> 'Memory'",
    ),
    (
        "resolve_as_of",
        "function",
        "(self, ref: 'Uri | MemoryId | str', when: 'datetime', *, known_at: 'datetime | None' = None, reader: 'Reader | None' = None) -> 'Memory'",
    ),
    (
        "resolve_conflict",
        "function",
        "(self, winner: 'Uri | MemoryId | str', loser: 'Uri | MemoryId | str', *, reason: 'str') -> 'Edge'",
    ),
    (
        "resolve_latest",
        "function",
        "(self, ref: 'Uri | MemoryId | str', *, reader: 'Reader | None' = None) -> 'Memory'",
    ),
    ("salience_state", "function", "(self, ref: 'Uri | MemoryId | str') -> 'SalienceState'"),
    ("save_vectors", "function", "(self) -> 'None'"),
    ("scrub", "function", "(self, *, wait: 'float' = 30.0) -> 'ScrubReport'"),
    (
        "search",
        "function",
        "(self, question: 'str', *, limit: 'int' = 10, reader: 'Reader | None' = None) -> 'SearchResult'",
    ),
    (
        "sensitivity",
        "function",
        "(self, ref: 'Uri | MemoryId | str', *, reader: 'Reader | None' = None) -> 'Sensitivity'",
    ),
    (
        "set_episode_sensitivity",
        "function",
        "(self, ref: 'MemoryId | str', sensitivity: 'Sensitivity | str') -> 'Episode'",
    ),
    ("stats", "function", "(self) -> 'dict[str, Any]'"),
    (
        "suggest_aliases",
        "function",
        "(self, *, threshold: 'float' = 0.8, limit: 'int' = 20, reader: 'Reader | None' = None) -> 'list[AliasSuggestion]'",
    ),
    ("task", "function", "(self, task_id: 'str', *, limit: 'int' = 50) -> 'Iterator[None]'"),
    ("task_usage", "function", "(self, task_id: 'str') -> 'int'"),
    (
        "tombstone",
        "function",
        "(self, ref: 'Uri | MemoryId | str', reason: 'str', by: 'str | None' = None, *, erase: 'bool' = False, wait: 'float' = 30.0) -> 'Tombstone'",
    ),
    ("unalias", "function", "(self, alias: 'str') -> 'AliasChange'"),
    (
        "update",
        "function",
        "(self, ref: 'Uri | MemoryId | str', data: 'Data', **options: 'Any') -> 'WriteResult'",
    ),
    ("update_head", "function", "(self, ref: 'Uri | MemoryId | str', **patch: 'Any') -> 'Head'"),
    ("vector_info", "function", "(self) -> 'dict[str, Any] | None'"),
    ("vector_state", "function", "(self) -> 'str'"),
    (
        "verify",
        "function",
        "(self, progress: 'Callable[[int, int], None] | None' = None) -> 'VerifyReport'",
    ),
    ("verify_erasure", "function", "(self) -> 'ErasureReport'"),
    ("view", "function", "(self, reader: 'Reader') -> 'ReaderView'"),
    (
        "write",
        "function",
        "(self, data: 'Data', *, dedupe: 'bool | None' = None, **options: 'Any') -> 'WriteResult'",
    ),
    (
        "write_many",
        "function",
        "(self, items: 'Iterable[NewMemory | Data]') -> 'list[WriteResult]'",
    ),
)

# what Cortex took from Store without redefining it (when it extended it): same docstrings
INHERITED = (
    "backup",
    "import_records",
    "open",
    "owner",
    "merge_lexical",
    "path",
    "reindex_lexical",
    "scrub",
    "stats",
    "task",
    "task_usage",
    "verify",
    "verify_erasure",
)

# instance attributes every handle has
ATTRIBUTES = (
    "actor",
    "format",
    "decay",
    "weights",
    "salience_blend",
    "fusion",
    "dedupe",
    "embedder",
    "reembedded",
)


def _kind(name: str) -> str:
    return type(inspect.getattr_static(Cortex, name)).__name__


def _signature(name: str) -> str | None:
    try:
        return str(inspect.signature(getattr(Cortex, name)))
    except (TypeError, ValueError):
        return None


@pytest.mark.parametrize(("name", "kind", "signature"), SURFACE, ids=[s[0] for s in SURFACE])
def test_every_public_name_keeps_its_signature(name: str, kind: str, signature: str | None) -> None:
    assert hasattr(Cortex, name), f"Cortex.{name} is gone"
    assert _kind(name) == kind, f"Cortex.{name} was a {kind}"
    assert _signature(name) == signature


def test_no_public_name_is_gone_and_the_new_ones_are_known() -> None:
    now = {n for n in dir(Cortex) if not n.startswith("_")}
    before = {name for name, _, _ in SURFACE if not name.startswith("_")}
    # the handle's actor and format were instance attributes (now properties of the engine's);
    # engine and reads_as are what transfer and tools use of the engine it composes
    assert now - before == {"actor", "engine", "format", "reads_as"}


@pytest.mark.parametrize("name", INHERITED)
def test_what_came_from_the_store_keeps_its_docstring(name: str) -> None:
    doc = inspect.getdoc(getattr(Cortex, name))
    assert doc, name
    assert doc == inspect.getdoc(getattr(Store, name))


def test_every_public_method_is_documented() -> None:
    missing = [
        name
        for name, _, _ in SURFACE
        if not name.startswith("_") and not inspect.getdoc(getattr(Cortex, name))
    ]
    assert not missing


def test_a_handle_holds_an_engine_and_its_attributes(tmp_path: Path) -> None:
    with Cortex.open(tmp_path / "s", actor="agent") as cx:
        assert not isinstance(cx, Store)
        assert isinstance(cx.engine, Store)
        assert cx.engine.kv is cx._kv  # the spelling tests use
        for name in ATTRIBUTES:
            assert hasattr(cx, name), name
        assert (cx.actor, cx.owner, cx.format.owner) == ("agent", "agent", "agent")
        assert cx.path == cx.engine.path
        uri = cx.write(Fact(statement="s", subject="user", predicate="p"))
        assert cx.resolve(uri).head.id == cx.engine.resolve(uri).head.id
        with cx.task("t"):
            cx.write(Fact(statement="t", subject="user", predicate="q"))
        assert cx.task_usage("t") == 1


def test_store_alone_is_still_the_engine(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s", actor="agent") as st:
        uri = st.write(Fact(statement="s", subject="user", predicate="p"))
        assert st.resolve(uri).head.id == uri.id
        assert st.verify().ok
    with Cortex.open(tmp_path / "s", actor="agent") as cx:
        assert cx.resolve(uri).head.id == uri.id
