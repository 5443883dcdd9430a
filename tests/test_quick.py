"""The five-line quickstart (issue 13 item 6): add, search, get_all, get, update, delete,
history, on the typed API underneath."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cortex import (
    Fact,
    LLMExtractor,
    Memories,
    NotFoundError,
    Preference,
    Query,
    ValidationError,
)

ANSWER = [
    {
        "type": "Fact",
        "data": {"statement": "Sam lives in Lisbon", "subject": "sam", "predicate": "home_city"},
        "quote": "I moved to Lisbon",
    },
    {
        "type": "Preference",
        "data": {"topic": "cilantro", "polarity": "avoid"},
        "quote": "I can't stand cilantro",
    },
]


def model(prompt: str) -> str:
    return json.dumps(ANSWER)


@pytest.fixture
def m(tmp_path: Path) -> Any:
    with Memories(tmp_path / "s", extractor=LLMExtractor(model)) as memories:
        yield memories


def test_the_quickstart(m: Memories) -> None:
    added = m.add("I moved to Lisbon and I can't stand cilantro", user_id="sam")
    assert len(added.memories) == 2 and added.episode.labels == ("user:sam",)
    found = m.search("moved to lisbon", user_id="sam")
    assert found[0].kind == "memory" and "Lisbon" in found[0].text
    assert any(f.kind == "episode" and f.episode == added.episode.id for f in found)
    assert {x.uri for x in m.get_all(user_id="sam")} == set(added.memories)
    assert m.get_all(user_id="ana") == [] and m.search("lisbon", user_id="ana") == []
    fact = added.memories[0]
    assert isinstance(m.get(fact.id).data, Fact)
    v2 = m.update(fact.id, "Sam lives in Porto")
    assert m.get(fact.id).data.statement == "Sam lives in Porto"  # type: ignore[union-attr]
    assert [x.uri.version for x in m.history(fact.id)] == [1, 2] and v2.version == 2
    m.delete(fact.id)
    assert fact.id not in [x.uri.id for x in m.get_all(user_id="sam")]
    assert m.cx.resolve_latest(fact.id).head.tombstone is not None  # still there for audit
    assert m.cx.episode_of(added.memories[1]).quote == "I can't stand cilantro"
    assert m.cx.verify().ok


def test_messages_and_scopes(m: Memories) -> None:
    added = m.add(
        [{"role": "user", "content": "I moved to Lisbon"}, {"role": "assistant", "content": "ok"}],
        user_id="sam",
        agent_id="travel",
        run_id="r1",
    )
    assert m.cx.episode(added.episode.id).content == b"user: I moved to Lisbon\nassistant: ok"
    tags = m.get(added.memories[0].id).head.tags
    assert set(tags) == {"user:sam", "agent:travel", "run:r1"}
    assert len(m.get_all(agent_id="travel")) == 2 and m.get_all(run_id="r2") == []


def test_without_an_extractor_the_text_is_still_found(tmp_path: Path) -> None:
    with Memories(tmp_path / "s") as m:
        added = m.add("the harbour closes at noon on sundays", user_id="sam")
        assert added.memories == ()
        [hit] = m.search("when does the harbour close", user_id="sam")
        assert hit.kind == "episode" and hit.span == (
            0,
            len("the harbour closes at noon on sundays"),
        )
        assert m.get_all() == []


def test_update_with_typed_data_and_errors(m: Memories) -> None:
    added = m.add("I moved to Lisbon and I can't stand cilantro")
    pref = added.memories[1]
    m.update(pref.id, Preference(topic="cilantro", polarity="prefer"))
    assert m.get(pref.id).data.polarity.label == "prefer"  # type: ignore[union-attr]
    for bad in ({"user_id": ""}, {"agent_id": 5}):
        with pytest.raises(ValidationError):
            m.add("x", **bad)
    with pytest.raises(ValidationError):
        m.add([{"role": "user"}])
    with pytest.raises(NotFoundError):
        m.get("01JD2R7X4E0000000000000001")
    assert m.cx.find(Query(types=("Fact", "Preference"), limit=10)).hits
