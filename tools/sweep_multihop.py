"""Second hop, diversity, expansion, sentence vectors and fusion depth, through ``find``.

Issue 19's round 2 measured these ranking ideas on the LoCoMo development split; none is in
``cortex`` (the first three gained nothing beyond the noise, the last needs a vocabulary index
the store does not have): this tool keeps them, as a subclass of the query executor that it
installs for the stores it opens, so the README's tables can be reproduced. Each is off unless
its knob is set; with every knob off the ranking is ``find``'s.

- ``feedback=M, feedback_weight=B`` (Rocchio on the vector side): after the first pass, the
  query vector ``q`` (unit) plus ``B`` times the unit mean of the vectors of the first pass's
  best ``M`` (by fused score plus the entity term, the memories context is lent from), searched
  again; ``mode=replace`` puts that list in place of the vector list, ``mode=vector`` fuses it
  as a third list, also of weight ``B`` (the first vector list stays), and
  ``mode=lexical`` fuses, with weight ``B``, a BM25 search for the ``terms`` best expansion
  terms of those ``M`` memories (RM3's weights: a term's share of each memory's terms times the
  memory's score, summed, times its idf; terms of the query left out). The second pass is
  fused and re-ranked (context, entity) like the first.
- ``diversity=L`` (MMR over hit vectors): the first ``depth`` results are re-ordered greedily by
  ``relevance - L * max cosine to a result already taken``.
- ``named_pass=G``: when the query names an entity field (the names ``unnamed`` cuts), the
  lexical and vector searches are run again over the memories that have a named entity only,
  fused and re-ranked; a memory's relevance is the greater of its first-pass one and ``G``
  times its named-pass one.
- ``vector_text=content|mean``: the vector side embeds the (unnamed) question without its stop
  words, or the mean of that and the question as it is.
- ``expand=E, expand_min=T, expand_weight=W`` (expansion by word neighbours): each content word
  of the question (3 letters or more, not a stop word, names cut) is embedded on its own and
  the ``E`` words of the store's vocabulary nearest it by cosine, at least ``T``, other than the
  question's own words and stems, are searched by BM25 as a third list of weight ``W``, fused
  and re-ranked with the first two. The vocabulary (every distinct word of the conversation's
  turns, embedded once) is built here in memory: the store keeps none (``vocab=stems`` uses
  the stems the lexical index holds instead of words). The expansion needs no first pass, so
  it is fused in the first one; it is not meant to be combined with ``feedback``.
- ``wordvec=W`` (the question's words, each embedded alone): the mean of the unit vectors of
  its content words (3 letters or more, not stop words, names cut) is searched in the vector
  index as a third list of weight ``W``, fused and re-ranked with the first two.
- ``cap=C`` (session diversity): in the first ``depth`` results, a session's hits past its first
  ``C`` go after every other session's (multi-hop evidence spans sessions: 70 of 74 questions).
- ``depth=D, norm=minmax|dbsf|mean`` (fusion depth and score normalisation): each list counts
  with its first ``D`` results (and is fetched at least that deep); ``dbsf`` maps a list's
  counted scores by their mean and standard deviation (``mu - 3 sd`` to 0, ``mu + 3 sd`` to 1,
  clipped), ``mean`` maps the mean to 0 and the best to 1; ``minmax`` is ``fuse`` as it is.
- ``sent=replace|third`` (sentence vectors): each turn's summary is split into sentences (after
  ``.``, ``!`` or ``?`` and a space), each embedded alone (in memory here: the store keeps one
  vector a memory); a memory scores by its best sentence's cosine (``sent_agg=max``), the mean
  of its sentences' (``mean``) or the average of the two (``maxmean``). ``replace`` ranks by
  that instead of the stored vector; ``third`` fuses it as a third list of weight
  ``sent_weight``. ``sent_text=s+whole`` also counts the memory's stored vector as one of its
  sentences; ``sent_split=none`` embeds the whole summary as one (what the split adds over
  embedding the summary without the medium form's prefix), ``prefixed`` puts the speaker's
  name before each sentence; ``sent_min=N`` joins short sentences until each piece has N
  words, ``sent_max=P`` joins them into at most P pieces of about equal word counts.
- ``lexical_weight=W``, ``context_weight=C``: the store's ``Fusion`` with these instead.

    python tools/sweep_multihop.py [--dir DIR] [--embedder cortex.index.embed:MiniLM] [--json F]
        "" "feedback=3,feedback_weight=0.5" "diversity=0.2" "named_pass=0.9" ...

Each argument is one configuration (``key=value`` pairs; the empty one is ``find`` as it is);
the output is the table of ``tools/sweep_retrieval.py`` (recall@10 and @5 pooled, recall@10 by
category), one line per configuration as it is measured.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import bench_retrieval as br  # noqa: E402
import sweep_retrieval as sw  # noqa: E402

from cortex import Fusion  # noqa: E402
from cortex.agent import api  # noqa: E402
from cortex.index import lexical  # noqa: E402
from cortex.index.text import STOP_WORDS, fold, query_terms, tokenize  # noqa: E402
from cortex.query.language import fuse  # noqa: E402
from cortex.query.planner import Candidate, Executor  # noqa: E402
from cortex.query.rerank import entity_names, names_any  # noqa: E402


@dataclass(frozen=True)
class Knobs:
    """One configuration (see the module's docstring); every knob off is ``find``."""

    feedback: int = 0
    feedback_weight: float = 0.0
    mode: str = "replace"
    terms: int = 10
    diversity: float = 0.0
    named_pass: float = 0.0
    vector_text: str = "as-is"
    expand: int = 0
    expand_min: float = 0.6
    expand_weight: float = 0.0
    vocab: str = "words"
    cap: int = 0
    wordvec: float = 0.0
    depth: int = 0
    norm: str = "minmax"
    sent: str = ""
    sent_agg: str = "max"
    sent_weight: float = 0.5
    sent_text: str = "summary"
    sent_split: str = "sentences"
    sent_min: int = 0
    sent_max: int = 0
    lexical_weight: float = -1.0
    context_weight: float = -1.0


VOCAB: dict[str, Any] = {}
"""The words of the store being measured and their unit vectors (``expand``): set per store."""

SESSION: dict[str, str] = {}
"""Each turn's session (``cap``), by memory id: set per store."""

SENTS: dict[str, Any] = {}
"""The sentences of the store's turns and their unit vectors (``sent``): set per store."""

SENTENCE = re.compile(r"(?<=[.!?])\s+")


KNOBS = Knobs()


class Sweep(Executor):
    """The store's executor with the knobs above (text queries with an embedder only)."""

    sidecar: Any = None
    _names: tuple[str, ...] = ()
    _vec_text: str = ""

    def _unnamed(self, text, lexical_list):  # type: ignore[no-untyped-def]
        out = super()._unnamed(text, lexical_list)
        q = tokenize(fold(text))
        names = {}
        for mid, _ in lexical_list[: self.fusion.depth]:
            row = self._seen_row(mid)
            if row is not None:
                for n in entity_names(row.data):
                    if names_any(q, (n,)):
                        names[n] = None
        self._names, self._vec_text = tuple(names), out
        return out

    def _own(self, ranked, fused):  # type: ignore[no-untyped-def]
        """Fused score plus the entity term, of each list's first ``depth`` (``_rerank``'s)."""
        f = self.fusion
        within = {m for r in ranked.values() for m, _ in r[: f.depth]}
        q = tokenize(fold(self.plan.text or ""))
        own = {}
        for mid, score, _, _ in fused:
            row = self._seen_row(mid) if mid in within else None
            if row is None:
                continue
            b = min(1.0, max(0.0, score))
            named = f.entity_weight > 0 and b > 0 and names_any(q, entity_names(row.data))
            own[mid] = b + (f.entity_weight if named else 0.0)
        return own

    def _one(self, lists, want):  # type: ignore[no-untyped-def]
        """One pass: fetch, fuse, accept, then the context and entity terms."""
        n = max(32, self.fusion.depth, 4 * (want or 0))
        while True:
            ranked = {name: fn(n) for name, fn in lists.items()}
            exhausted = all(len(r) < n for r in ranked.values())
            fused = _fuse(ranked, self.fusion)
            out = []
            self.preload([m for m, _, _, _ in fused])
            for mid, score, ranks, scores in fused:
                row = self.accept(mid)
                if row is None:
                    continue
                c = Candidate(row)
                c.ranks, c.scores = dict(ranks), dict(scores)
                vec = scores.get("vector") if ranks.get("vector", 0) <= self.fusion.depth else None
                c.salience = self.salience_of(row, vector=vec)
                c.relevance = self._blend(score, c.salience, len(ranked))
                c.ranks["fused"] = 0
                c.scores["fused"] = score
                out.append(c)
            if exhausted or (want is not None and len(out) >= want):
                break
            n *= 4
        return self._rerank(out, ranked, fused), ranked, fused

    def _from_search(self, want):  # type: ignore[no-untyped-def]
        p, k = self.plan, KNOBS
        if p.text is None or self.vector_search is None or self.sidecar is None:
            return super()._from_search(want)
        text = p.text
        vs, txn = self.vector_search, self.txn
        if k.depth:
            self.fusion = replace(self.fusion, depth=k.depth)
        for name in ("lexical_weight", "context_weight"):
            if getattr(k, name) >= 0:
                self.fusion = replace(self.fusion, **{name: getattr(k, name)})
        first = {"lexical": lambda n: self.text_search(txn, text, n)}
        vt = self._unnamed(text, first["lexical"](self.fusion.depth))
        if k.vector_text != "as-is":
            words = [w for w in re.findall(r"[^\W_]+", vt) if fold(w) not in STOP_WORDS]
            content = " ".join(words) or vt
            if k.vector_text == "content":
                vt = content
            else:  # "mean": the mean of the two unit vectors
                a = np.asarray(self.sidecar.query_vector(vt), dtype=np.float32)
                b = np.asarray(self.sidecar.query_vector(content), dtype=np.float32)
                mixed = (a / np.linalg.norm(a) + b / np.linalg.norm(b)).astype(np.float32)
                lists0 = {**first, "vector": lambda n: vs(txn, mixed, n)}
        lists = {**first, "vector": lambda n: vs(txn, vt, n)}
        if k.vector_text == "mean":
            lists = lists0
        saved = self.fusion
        if k.sent and SENTS:
            qv = np.asarray(self.sidecar.query_vector(vt), dtype=np.float32)
            qv = qv / np.linalg.norm(qv)
            index = self.sidecar.ready(txn)
            scored = self._sentence_scores(qv, index)
            ordered = sorted(scored, key=lambda m: (-scored[m], m.bytes))
            slist = lambda n: [(m, scored[m]) for m in ordered[:n]]  # noqa: E731
            if k.sent == "replace":
                lists["vector"] = slist
            else:  # "third"
                lists["sentences"] = slist
                self.fusion = _Weighted(self.fusion, k.sent_weight, "sentences")
        if k.expand > 0 and k.expand_weight > 0 and VOCAB:
            # depends on the question (and the names cut) only: one pass with three lists
            words = self._neighbour_words(vt)
            if words:
                terms = words if k.vocab == "stems" else query_terms(" ".join(words))
                lists["expansion"] = lambda n: lexical.search_terms(txn, terms, limit=n)
                self.fusion = _Weighted(self.fusion, k.expand_weight, "expansion")
        if k.wordvec > 0 and not (k.expand > 0 and k.expand_weight > 0):
            words = [w for w in dict.fromkeys(fold(x) for x in re.findall(r"[^\W_]+", vt))
                     if len(w) >= 3 and w not in STOP_WORDS]  # fmt: skip
            if words:
                ws = np.stack([np.asarray(self.sidecar.query_vector(w), dtype=np.float32)
                               for w in words])  # fmt: skip
                ws /= np.linalg.norm(ws, axis=1, keepdims=True)
                wq = ws.mean(axis=0).astype(np.float32)
                lists["words"] = lambda n: vs(txn, wq, n)
                self.fusion = _Weighted(saved, k.wordvec, "words")
        try:
            out, ranked, fused = self._one(lists, want)
        finally:
            self.fusion = saved
        if k.feedback > 0 and k.feedback_weight > 0:
            own = self._own(ranked, fused)
            top = sorted(own, key=lambda m: (-own[m], m.bytes))[: k.feedback]
            if k.mode == "lexical":
                terms = self._expansion(top, own)
                if terms:
                    lists["feedback"] = lambda n: lexical.search_terms(txn, terms, limit=n)
            else:
                index = self.sidecar.ready(txn)
                vecs = [v for v in (index.vector(m) for m in top) if v is not None]
                if vecs:
                    q = np.asarray(self.sidecar.query_vector(vt), dtype=np.float32)
                    c = np.mean(np.stack(vecs), axis=0)
                    w = k.feedback_weight
                    q2 = (q / np.linalg.norm(q) + w * c / np.linalg.norm(c)).astype(np.float32)
                    lists["feedback" if k.mode == "vector" else "vector"] = lambda n: vs(txn, q2, n)
            if len(lists) > 2 or k.mode == "replace":
                saved = self.fusion
                self.fusion = _Weighted(saved, k.feedback_weight)
                try:
                    out, ranked, fused = self._one(lists, want)
                finally:
                    self.fusion = saved
        if k.named_pass > 0 and self._names:
            out = self._named(out, want, vt)
        out.sort(key=lambda c: (-c.relevance, c.id.bytes))
        if k.diversity > 0:
            out = self._mmr(out)
        if k.cap > 0:
            out = self._capped(out)
        for i, c in enumerate(out, start=1):
            c.ranks["fused"] = i
        return out

    def _sentence_scores(self, qv, index):  # type: ignore[no-untyped-def]
        """Each memory's score by its sentences' cosines (``sent_agg``), with its own vector."""
        k = KNOBS
        sims = SENTS["matrix"] @ qv
        owner, mids = SENTS["owner"], SENTS["mids"]
        best = np.full(len(mids), -1.0, dtype=np.float32)
        np.maximum.at(best, owner, sims)
        if k.sent_agg in ("maxmean", "mean"):
            total = np.zeros(len(mids), dtype=np.float32)
            np.add.at(total, owner, sims)
            mean = total / SENTS["count"]
            best = mean if k.sent_agg == "mean" else 0.5 * (best + mean)
        if "memvec" not in SENTS:
            SENTS["memvec"] = np.stack([index.vector(m) for m in mids]).astype(np.float32)
        whole = SENTS["memvec"] @ qv
        if k.sent_text.endswith("+whole"):
            best = np.maximum(best, whole)
        return {m: float(v) for m, v in zip(mids, best, strict=True)}

    def _neighbour_words(self, text):  # type: ignore[no-untyped-def]
        """For each content word of ``text`` in order, the store's ``expand`` words nearest it."""
        k = KNOBS
        words, matrix = VOCAB["words"], VOCAB["matrix"]
        own = list(dict.fromkeys(fold(w) for w in re.findall(r"[^\W_]+", text)))
        stems = set(query_terms(text))
        out: dict[str, None] = {}
        for w in own:
            if w in STOP_WORDS or len(w) < 3:
                continue
            v = np.asarray(self.sidecar.query_vector(w), dtype=np.float32)
            sims = matrix @ (v / np.linalg.norm(v))
            taken = 0
            for i in np.argsort(-sims, kind="stable"):
                if taken == k.expand or sims[i] < k.expand_min:
                    break
                cand = words[i]
                same = {cand} if k.vocab == "stems" else set(query_terms(cand))
                if cand in own or same & stems:
                    continue
                out[cand] = None
                taken += 1
        return list(out)

    def _expansion(self, top, own):  # type: ignore[no-untyped-def]
        q = set(query_terms(self.plan.text or ""))
        w: dict[str, float] = {}
        for m in top:
            row = self._seen_row(m)
            terms = [t for t in lexical.analyze(row.data) if t.isalpha()] if row else []
            for t in set(terms):
                w[t] = w.get(t, 0.0) + own[m] * terms.count(t) / len(terms)
        n, dfs = lexical.document_frequencies(self.txn, w)
        scored = {t: v * lexical.idf(n, dfs[t]) for t, v in w.items() if t not in q and dfs[t]}
        return sorted(scored, key=lambda t: (-scored[t], t))[: KNOBS.terms]

    def _named(self, out, want, vt):  # type: ignore[no-untyped-def]
        names, txn = self._names, self.txn

        def ok(mid):  # type: ignore[no-untyped-def]
            row = self._seen_row(mid)
            return row is not None and any(n in names for n in entity_names(row.data))

        index = self.sidecar.ready(txn)
        qv = self.sidecar.query_vector(vt)
        lists = {
            "lexical": lambda n: lexical.search(txn, self.plan.text or "", limit=n, allow=ok),
            "vector": lambda n: index.search(qv, n, allow=ok),
        }
        second, _, _ = self._one(lists, want)
        by = {c.id: c for c in out}
        for c in second:
            r = c.relevance * KNOBS.named_pass
            if c.id not in by:
                c.relevance = r
                by[c.id] = c
            elif r > by[c.id].relevance:
                by[c.id].relevance = r
        return list(by.values())

    def _capped(self, out):  # type: ignore[no-untyped-def]
        head, rest = out[: self.fusion.depth], out[self.fusion.depth :]
        seen: dict[str, int] = {}
        first, later = [], []
        for c in head:  # in relevance order: a session's hits past the cap go after the others
            s = SESSION.get(str(c.id), "")
            seen[s] = seen.get(s, 0) + 1
            (first if seen[s] <= KNOBS.cap else later).append(c)
        chosen = first + later
        top = (chosen[0].relevance if chosen else 0.0) + 1.0
        for i, c in enumerate(chosen):  # the executor sorts by relevance: keep this order
            c.relevance = top - i * 1e-6
        return chosen + rest

    def _mmr(self, out):  # type: ignore[no-untyped-def]
        head, rest = out[: self.fusion.depth], out[self.fusion.depth :]
        index = self.sidecar.ready(self.txn)
        vecs = {c.id: v for c in head if (v := index.vector(c.id)) is not None}
        chosen: list[Candidate] = []
        while head:

            def mmr(c: Candidate) -> float:
                v = vecs.get(c.id)
                sim = max((float(v @ vecs[o.id]) for o in chosen if v is not None and o.id in vecs),
                          default=0.0)  # fmt: skip
                return c.relevance - KNOBS.diversity * sim

            best = max(head, key=mmr)  # the first of equals: head is in relevance order
            chosen.append(best)
            head.remove(best)
        top = (chosen[0].relevance if chosen else 0.0) + 1.0
        for i, c in enumerate(chosen):  # the executor sorts by relevance: keep this order
            c.relevance = top - i * 1e-6
        return chosen + rest


class _Weighted(Fusion):
    """``Fusion`` whose extra lists (``"feedback"`` by default) have their own weights."""

    __slots__ = ("extras",)

    def __init__(self, base: Fusion, weight: float, name: str = "feedback") -> None:
        for f in base.__dataclass_fields__:
            object.__setattr__(self, f, getattr(base, f))
        extras = dict(getattr(base, "extras", {}))
        extras[name] = weight
        object.__setattr__(self, "extras", extras)

    def weight(self, name: str) -> float:
        """An extra list's own weight, or ``Fusion.weight``."""
        return self.extras[name] if name in self.extras else Fusion.weight(self, name)


def _fuse(ranked, f):  # type: ignore[no-untyped-def]
    """``fuse``, or the lists' first ``depth`` scores normalised as ``norm`` says.

    ``dbsf``: by their mean and standard deviation (``(s - (mu - 3 sd)) / 6 sd``, clipped to
    [0, 1]); ``mean``: the list's mean to 0 and its best to 1.
    """
    norm = KNOBS.norm
    if norm == "minmax" or f.method != "convex":
        return fuse(ranked, f)
    fused, ranks, scores = {}, {}, {}
    best = sum(f.weight(name) for name in ranked) or 1.0
    for name, items in ranked.items():
        counted = items[: f.depth]
        w = f.weight(name)
        xs = np.array([s for _, s in counted], dtype=np.float64)
        if len(xs):
            mu, sd = float(xs.mean()), float(xs.std())
            if norm == "dbsf":
                lo, hi = mu - 3 * sd, mu + 3 * sd
            else:  # "mean"
                lo, hi = mu, float(xs[0])
        for rank, (mid, s) in enumerate(items, start=1):
            part = 0.0
            if rank <= len(counted):
                part = w * (min(1.0, max(0.0, (s - lo) / (hi - lo))) if hi > lo else 1.0)
            fused[mid] = fused.get(mid, 0.0) + part
            ranks.setdefault(mid, {})[name] = rank
            scores.setdefault(mid, {})[name] = s
    out = [(mid, s / best, ranks[mid], scores[mid]) for mid, s in fused.items()]
    out.sort(key=lambda t: (-t[1], t[0].bytes))
    return out


def _merged(parts: list[str], least: int) -> list[str]:
    """Sentences joined in order until each piece has ``least`` words.

    A short remainder joins the piece before it.
    """
    out: list[str] = []
    cur: list[str] = []
    for x in parts:
        cur.append(x)
        if sum(len(c.split()) for c in cur) >= least:
            out.append(" ".join(cur))
            cur = []
    if cur:
        if out:
            out[-1] = out[-1] + " " + " ".join(cur)
        else:
            out.append(" ".join(cur))
    return out


def _at_most(parts: list[str], pieces: int) -> list[str]:
    """Sentences joined in order into at most ``pieces`` pieces of about equal word counts."""
    if len(parts) <= pieces:
        return parts
    sizes = [len(x.split()) for x in parts]
    total, out, cur, done = sum(sizes), [], [], 0
    for x, n in zip(parts, sizes, strict=True):
        cur.append(x)
        done += n
        if len(out) < pieces - 1 and done >= total * (len(out) + 1) / pieces:
            out.append(" ".join(cur))
            cur = []
    if cur:
        out.append(" ".join(cur))
    return out


def sentences(store: Any, embedder: Any) -> dict[str, Any]:
    """Every turn's sentences (``sent``), embedded: the rows' owners index ``mids``."""
    from cortex import MemoryId

    _, _, dia, conv = store
    rows = br.turns(conv)
    ids = list(dia)
    texts, owner, count = [], [], []
    for i, (_, _, e) in enumerate(rows):
        if KNOBS.sent_split == "none":
            parts = [e.summary]
        elif KNOBS.sent_split == "prefixed":
            parts = [
                f"{e.counterparty}: {x.strip()}" for x in SENTENCE.split(e.summary) if x.strip()
            ]
        else:
            parts = [x.strip() for x in SENTENCE.split(e.summary) if x.strip()] or [e.summary]
            if KNOBS.sent_min:
                parts = _merged(parts, KNOBS.sent_min)
            if KNOBS.sent_max:
                parts = _at_most(parts, KNOBS.sent_max)
        texts += parts
        owner += [i] * len(parts)
        count.append(len(parts))
    m = np.asarray(embedder.embed(texts), dtype=np.float32)
    print(f"  {store[0]}: {len(texts)} sentences for {len(rows)} turns", file=sys.stderr)
    return {
        "mids": [MemoryId.parse(x) for x in ids],
        "matrix": m / np.linalg.norm(m, axis=1, keepdims=True),
        "owner": np.array(owner),
        "count": np.array(count, dtype=np.float32),
        "texts": len(texts),
    }


def vocabulary(conv: dict[str, Any], embedder: Any) -> dict[str, Any]:
    """The distinct words (folded, 3 letters or more, not stop words) of a conversation's turns.

    With ``vocab=stems``, their stems instead (the lexical index's own terms).
    """
    words = sorted(
        {
            w
            for _, _, e in br.turns(conv)
            for w in (fold(x) for x in re.findall(r"[^\W_]+", e.summary))
            if len(w) >= 3 and w.isalpha() and w not in STOP_WORDS
        }
    )
    if KNOBS.vocab == "stems":
        words = sorted({t for w in words for t in query_terms(w)})
    m = np.asarray(embedder.embed(words), dtype=np.float32)
    return {"words": words, "matrix": m / np.linalg.norm(m, axis=1, keepdims=True)}


def measure(stores: list[Any], embedder: Any) -> dict[str, sw.Rows]:
    """``sweep_retrieval.measure`` with the store's vocabulary set for ``expand``."""
    out: dict[str, sw.Rows] = {}
    for store in stores:
        SESSION.clear()
        SESSION.update({i: d.split(":")[0] for i, d in store[2].items()})
        VOCAB.clear()
        if KNOBS.expand > 0:
            VOCAB.update(vocabulary(store[3], embedder))
        SENTS.clear()
        if KNOBS.sent:
            SENTS.update(sentences(store, embedder))
        out.update(sw.measure([store], embedder, Fusion()))
    return out


def install() -> None:
    """Make ``Cortex`` run its queries with ``Sweep``."""

    def executor(self, txn, plan, reader, now):  # type: ignore[no-untyped-def]
        ex = Sweep(
            self._engine, txn, plan, now, reader=reader, decay=self.decay, weights=self.weights,
            text_search=self._text_search(), vector_search=self._vector_search(plan),
            salience_blend=self.salience_blend, fusion=self.fusion,
        )  # fmt: skip
        ex.sidecar = self._sidecar
        return ex

    api.Cortex._executor = executor


def main() -> int:
    global KNOBS  # noqa: PLW0603 - the executor reads the configuration being measured
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "bench" / "locomo"))
    ap.add_argument("--embedder", default="cortex.index.embed:MiniLM")
    ap.add_argument("--dir", help="keep the built stores here (reused when present)")
    ap.add_argument("--json", help="write every configuration's rows here")
    ap.add_argument("configs", nargs="*", default=[""])
    args = ap.parse_args()
    data, embedder = sw.inputs(args.data, args.embedder)
    install()
    grid: dict[str, dict[str, sw.Rows]] = {}
    with tempfile.TemporaryDirectory(prefix="cortex-sweep-") as tmp:
        where = Path(args.dir) if args.dir else Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        stores = sw.build(data, where, embedder)
        for spec in args.configs:
            pairs = [p.split("=", 1) for p in spec.split(",") if p]
            KNOBS = replace(Knobs(), **{k: type(getattr(Knobs(), k))(v) for k, v in pairs})
            t = time.process_time()
            grid[spec or "find"] = measure(stores, embedder)
            rows = [r for by in grid[spec or "find"].values() for r in by]
            cats = " ".join(f"{br.CATEGORIES[c]} {sw.mean(rows, 10, c):.3f}" for c in br.CATEGORIES)
            print(
                f"{spec or 'find':45s} r@10 {sw.mean(rows):.3f} r@5 {sw.mean(rows, 5):.3f} {cats}"
                f" (cpu {time.process_time() - t:.1f} s)",
                flush=True,
            )
    print()
    print(sw.report(grid))
    if args.json:
        Path(args.json).write_text(json.dumps(grid))
    return 0


if __name__ == "__main__":
    sys.exit(main())
