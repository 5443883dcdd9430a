"""What the write rules of issue 14 cost on a single durable write.

With them on, against the same write with them off and against the code before them (another
checkout, same run).

On a store of N memories (a mix of Facts over 2,000 subjects and Events), one durable write per
transaction, in interleaved blocks so the machine's load falls on every variant alike:

- ``event``: an Event (no claim key: what any write paid before the rules);
- ``fact, rules off``: a Fact written with ``supersede=False`` (indexed, never compared);
- ``fact, new subject``: a Fact whose subject no memory holds (the lookup finds nothing);
- ``fact, supersedes``: a Fact of a subject and single-valued predicate already held: the rules
  run, link the two and end the older one's time;
- ``fact, supersedes a long chain``: the same, always for one subject (its chain grows by one
  with every write of the run);
- ``fact, dedupe``: the same with ``dedupe=True`` (no embedder: the exact match, checked in
  the write transaction); the code before the rules had ``dedupe`` too (checked in a read
  transaction before the write), so its dedupe write is timed as well and compared line by line.

With ``--baseline DIR`` (a checkout of the code before the rules) the ``event`` and plain
``fact`` writes are also timed on that code (``baseline: ...``; a checkout with the rules: every
variant), in a child process on a store built the same way;
its blocks alternate with this side's (each goes first every other block), so the note can say
what the rules cost over yesterday's write. The child must import DIR's ``cortex`` with its C
accelerator (the run stops otherwise: a pure-Python baseline would flatter the rules). The code
before the rules is 2a5fba8, whose pyproject asks for a newer setuptools than some machines have;
its extension builds by hand with the interpreter's own flags:

    git worktree add /tmp/base 2a5fba8 && cd /tmp/base && python - <<'PY'
    import shlex, subprocess, sysconfig as s
    v = s.get_config_var
    subprocess.run([*shlex.split(v("CC")), *shlex.split(v("CFLAGS")), *shlex.split(v("CCSHARED")),
                    "-I", s.get_paths()["include"], "-c", "cortex/_speedups.c", "-o", "/tmp/sp.o"],
                   check=True)
    subprocess.run([*shlex.split(v("LDSHARED")), "/tmp/sp.o", "-o",
                    "cortex/_speedups" + v("EXT_SUFFIX")], check=True)
    PY

Per variant: the median over ``--repeat`` runs of the p50 wall time (and of the median CPU time
per write over blocks: less noisy on a loaded machine), writes/s as 1/p50, and both as ratios
to the plain Fact write before the rules (without ``--baseline``: to ``fact, rules off``); and
the CPU time over the same side's Event write (on a loaded machine two processes running the
same code differ by up to ~10% in CPU per write; an Event, which has no claim key, is the
anchor of each side).

    python tools/bench_semantics.py [--size 10000] [--repeat 3] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def build(path: Path, n: int) -> None:
    from cortex import Cortex, Event, Fact, NewMemory

    items: list[Any] = []
    for i in range(n):
        if i % 2:
            items.append(NewMemory(data=Event(kind="note", summary=f"event {i} of the log")))
        else:
            s = f"person{i % 2000}"
            items.append(
                NewMemory(
                    data=Fact(
                        statement=f"{s} likes thing {i}",
                        subject=s,
                        predicate="likes",
                        object=f"thing {i}",
                    )
                )
            )
    with Cortex.open(path, actor="bench") as cx:
        for k in range(0, n, 1000):
            cx.write_many(items[k : k + 1000])


def timed(fn: Any, count: int) -> tuple[list[float], float]:
    """The wall time of each of ``count`` calls, and the process CPU time of all of them."""
    out = []
    cpu = time.process_time()
    for i in range(count):
        t = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - t)
    return out, time.process_time() - cpu


def make_variants(cx: Any, new_api: bool) -> dict[str, Any]:
    """The writes to time on the open store ``cx`` (the code before the rules: two)."""
    from cortex import Event, Fact

    counter = [0]

    def fresh() -> int:
        counter[0] += 1
        return counter[0]

    variants: dict[str, Any] = {}
    variants["event"] = lambda i: cx.write(Event(kind="note", summary=f"timed {fresh()}"))
    if not new_api:
        variants["fact"] = lambda i: cx.write(
            Fact(statement="x", subject=f"new{fresh()}", predicate="home_city")
        )
        _people(cx)
        variants["fact, dedupe"] = lambda i: cx.write(
            Fact(statement=f"lives in {fresh()}", subject="person8", predicate="home_city"),
            dedupe=True,
        )
        return variants
    variants["fact, rules off"] = lambda i: cx.write(
        Fact(statement="x", subject=f"new{fresh()}", predicate="home_city"),
        supersede=False,
    )
    variants["fact, new subject"] = lambda i: cx.write(
        Fact(statement="x", subject=f"new{fresh()}", predicate="home_city")
    )
    _people(cx)
    variants["fact, supersedes"] = lambda i: cx.write(
        Fact(
            statement=f"lives in {fresh()}",
            subject=f"person{counter[0] % 2000}",
            predicate="home_city",
        )
    )
    variants["fact, supersedes a long chain"] = lambda i: cx.write(
        Fact(statement=f"lives in {fresh()}", subject="person7", predicate="home_city")
    )
    variants["fact, dedupe"] = lambda i: cx.write(
        Fact(statement=f"lives in {fresh()}", subject="person8", predicate="home_city"),
        dedupe=True,
    )
    return variants


def _people(cx: Any) -> None:
    """Every one of 2,000 subjects gets a home city (to supersede; the same on both sides)."""
    from cortex import Fact

    cx.write_many(
        [
            Fact(statement="lives in A", subject=f"person{k}", predicate="home_city")
            for k in range(2000)
        ]
    )


def run_block(variants: dict[str, Any], per: int) -> dict[str, tuple[list[float], float]]:
    """``per`` writes of each variant in turn: their wall times and CPU time per write."""
    out = {}
    for name, fn in variants.items():
        walls, cpu = timed(fn, per)
        out[name] = (walls, cpu / per)
    return out


def accelerated() -> dict[str, Any]:
    """Where ``cortex`` was imported from and whether its C accelerator runs the write path.

    The baseline child may be a checkout from before the layout move (flat modules).
    """
    import importlib

    import cortex

    # by the files: an editable install's import hook may map a missing module to another tree
    layered = (Path(cortex.__file__).parent / "model").is_dir()
    mods = [
        importlib.import_module(new if layered else old)
        for new, old in (
            ("cortex.model.codec", "cortex.codec"),
            ("cortex.index.lexical", "cortex.lexical"),
            ("cortex.engine.store", "cortex.store"),
        )
    ]
    return {
        "cortex": str(Path(cortex.__file__).resolve().parent),
        "accelerated": all(getattr(m, "_USE_SPEEDUPS", False) for m in mods),
    }


def child_old(size: int, per: int) -> int:
    """The baseline's side: build, say ``ready``, then time one block per ``block`` line.

    A baseline that has the rules (``cortex.WriteResult``) times every variant.
    """
    import cortex
    from cortex import Cortex

    with tempfile.TemporaryDirectory(prefix="cortex-bench-sem-old-") as tmp:
        path = Path(tmp) / "s"
        build(path, size)
        with Cortex.open(path, actor="bench") as cx:
            variants = make_variants(cx, new_api=hasattr(cortex, "WriteResult"))
            print(json.dumps(accelerated()), flush=True)
            for line in sys.stdin:
                if line.strip() != "block":
                    break
                print(json.dumps(run_block(variants, per)), flush=True)
    return 0


Samples = dict[str, tuple[list[float], list[float]]]


def _child_line(child: subprocess.Popen[str]) -> Any:
    assert child.stdout is not None
    line = child.stdout.readline()
    if not line:
        raise SystemExit("the baseline's child stopped (its error is above)")
    return json.loads(line)


def _child_block(child: subprocess.Popen[str]) -> Any:
    assert child.stdin is not None
    child.stdin.write("block\n")
    child.stdin.flush()
    return _child_line(child)


def one_run(size: int, blocks: int, per: int, baseline: str | None) -> Samples:
    """One store per side; their blocks alternate, so the load falls on both alike."""
    from cortex import Cortex

    child = None
    if baseline is not None:
        env = {**os.environ, "PYTHONPATH": str(Path(baseline).resolve())}
        env.pop("CORTEX_NO_SPEEDUPS", None)
        child = subprocess.Popen(
            [sys.executable, __file__, "--child-old", "--size", str(size), "--per", str(per)],
            env=env, cwd=baseline, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
    samples: Samples = {}

    def add(prefix: str, got: dict[str, Any]) -> None:
        for name, (walls, cpu) in got.items():
            w, c = samples.setdefault(prefix + name, ([], []))
            w += walls
            c.append(cpu)

    try:
        with tempfile.TemporaryDirectory(prefix="cortex-bench-sem-") as tmp:
            path = Path(tmp) / "s"
            build(path, size)
            with Cortex.open(path, actor="bench") as cx:
                variants = make_variants(cx, new_api=True)
                if child is not None:
                    assert child.stdin is not None and child.stdout is not None
                    ready = _child_line(child)
                    want = str((Path(baseline or "") / "cortex").resolve())
                    if ready["cortex"] != want or not ready["accelerated"]:
                        raise SystemExit(
                            f"the baseline ran {ready['cortex']} (accelerated: "
                            f"{ready['accelerated']}), not {want} with its C accelerator: build "
                            "its extension in place (see the module's docstring)"
                        )
                for b in range(blocks):  # the two sides take turns at going first
                    if child is not None and b % 2:
                        add("baseline: ", _child_block(child))
                    add("", run_block(variants, per))
                    if child is not None and not b % 2:
                        add("baseline: ", _child_block(child))
    finally:
        if child is not None:
            assert child.stdin is not None
            child.stdin.close()
            if child.wait(timeout=600) != 0:
                raise SystemExit("the baseline's child failed")
    return samples


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=10_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--blocks", type=int, default=6)
    p.add_argument("--per", type=int, default=25)
    p.add_argument("--baseline", help="a checkout of the code before the rules")
    p.add_argument("--child-old", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child_old:
        return child_old(args.size, args.per)
    sys.path.insert(0, str(ROOT))
    me = accelerated()
    wall: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    for _ in range(args.repeat):
        for k, (walls, cpus) in one_run(args.size, args.blocks, args.per, args.baseline).items():
            wall.setdefault(k, []).append(statistics.median(walls))
            cpu.setdefault(k, []).append(statistics.median(cpus))
    med = {k: statistics.median(v) for k, v in wall.items()}
    cmed = {k: statistics.median(v) for k, v in cpu.items()}
    print(
        f"single durable write at {args.size:,} memories: p50 wall and CPU per write (median "
        f"of {args.repeat} runs; {'' if me['accelerated'] else 'NOT '}accelerated)"
    )
    ref = "baseline: fact" if "baseline: fact" in med else "fact, rules off"
    print(f"  {'':<36} {'p50':>9} {'writes/s':>9} {'CPU':>9}   vs {ref}    CPU vs own event")
    for k, v in med.items():
        # each side's CPU over its own Event write: the two processes differ by some percent
        # on a loaded machine even on the same code, an Event costs the same on both
        own = cmed["baseline: event" if k.startswith("baseline: ") else "event"]
        print(
            f"  {k:<36} {v * 1e3:6.3f} ms {1 / v:9.0f} {cmed[k] * 1e3:6.3f} ms"
            f"   {v / med[ref]:5.3f}x p50  {cmed[k] / cmed[ref]:5.3f}x CPU   {cmed[k] / own:5.3f}x"
        )
    old = "baseline: fact, dedupe"
    if old in med:  # the baseline had dedupe too: the same write on both sides
        print(
            f"  fact, dedupe vs {old}: {med['fact, dedupe'] / med[old]:5.3f}x p50  "
            f"{cmed['fact, dedupe'] / cmed[old]:5.3f}x CPU"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
