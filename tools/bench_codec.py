"""Codec benchmark: encode+hash+validate and decode per type, beside the cbor2 floor.

The floor is plain ``cbor2.dumps(canonical=True)`` / ``cbor2.loads`` of the same builtin
values in the same run. Times are medians of repeated runs, in microseconds per record.

    python tools/bench_codec.py [--repeat 9] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import timeit
from datetime import UTC, datetime

import cbor2

from cortex import (
    Belief,
    Capability,
    Constraint,
    Cost,
    Event,
    Fact,
    Goal,
    Identity,
    Pattern,
    Preference,
    content_hash,
    decode_data,
    encode_data,
)
from cortex.model.codec import decode_data_trusted
from cortex.model.records import Data

WHEN = datetime(2026, 11, 22, 9, 30, 15, 250000, tzinfo=UTC)
URI = "cortex://Fact/01K9ZJ0Q5W3X4Y5Z6A7B8C9D0E#1"

SAMPLES: list[Data] = [
    Identity(
        name="Ada Lovelace",
        did="did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK",
        roles=("researcher", "operator"),
        profile={"lang": "en", "tz": "Europe/London"},
    ),
    Fact(
        statement="The user's primary editor is Neovim with a dark theme",
        subject="user",
        predicate="primary_editor",
        object="neovim",
        source="user_input",
        observed_at=WHEN,
        confidence=0.9,
    ),
    Preference(topic="dark mode", polarity="prefer", strength=0.8, rationale="less eye strain"),
    Belief(
        statement="the staging cluster is under-provisioned",
        subject="staging",
        stance="suspect",
        confidence=0.6,
        evidence_for=(URI,),
    ),
    Event(
        kind="purchase",
        outcome="success",
        counterparty="gpu-vendor",
        cost=Cost(asset="USD", amount="1299.99"),
        duration_us=1_500_000,
        occurred_at=WHEN,
        summary="bought a GPU for the lab after comparing three offers",
        artifacts=("invoice-2291.pdf",),
    ),
    Goal(
        statement="ship the memory layer",
        status="active",
        horizon=WHEN,
        success_criteria=("p50 find under 1 ms", "no lost writes"),
    ),
    Constraint(
        statement="spend more than 2000 USD without asking",
        polarity="dont",
        strength="hard",
        source="user_declared",
        trigger="any purchase",
    ),
    Capability(
        subject="agent",
        capability="run SQL queries against the warehouse",
        verified=True,
        parameters={"dialect": "postgres"},
        last_observed=WHEN,
    ),
    Pattern(
        statement="retry flaky network calls with exponential backoff",
        strength=0.7,
        coverage=12,
        derived_from=(URI,),
    ),
]


def _median_us(fn: object, repeat: int) -> float:
    timer = timeit.Timer(fn)  # type: ignore[arg-type]
    number, _ = timer.autorange()
    number = max(number, 1)
    runs = timer.repeat(repeat=repeat, number=number)
    return statistics.median(runs) / number * 1e6


def measure(repeat: int) -> list[dict[str, object]]:
    rows = []
    for data in SAMPLES:
        t = data.TYPE
        encoded = encode_data(data)
        builtin = cbor2.loads(encoded)
        assert cbor2.dumps(builtin, canonical=True) == encoded

        def ours_enc(data: Data = data) -> bytes:
            return content_hash(data.TYPE, encode_data(data))

        def floor_enc(builtin: object = builtin) -> bytes:
            return cbor2.dumps(builtin, canonical=True)

        rows.append(
            {
                "type": t.type_name,
                "bytes": len(encoded),
                "encode_us": _median_us(ours_enc, repeat),
                "floor_encode_us": _median_us(floor_enc, repeat),
                "decode_us": _median_us(lambda t=t, b=encoded: decode_data(t, b), repeat),
                "decode_trusted_us": _median_us(
                    lambda t=t, b=encoded: decode_data_trusted(t, b), repeat
                ),
                "floor_decode_us": _median_us(lambda b=encoded: cbor2.loads(b), repeat),
            }
        )
    return rows


def table(rows: list[dict[str, object]]) -> str:
    head = (
        "| type | bytes | encode+hash+validate µs | floor dumps µs | ratio "
        "| strict decode µs | trusted decode µs | floor loads µs | strict ratio | trusted ratio |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    )
    lines = []
    for r in rows:
        e, fe = float(r["encode_us"]), float(r["floor_encode_us"])  # type: ignore[arg-type]
        d, dt, fd = (
            float(r["decode_us"]),  # type: ignore[arg-type]
            float(r["decode_trusted_us"]),  # type: ignore[arg-type]
            float(r["floor_decode_us"]),  # type: ignore[arg-type]
        )
        lines.append(
            f"| {r['type']} | {r['bytes']} | {e:.2f} | {fe:.2f} | {e / fe:.2f}× "
            f"| {d:.2f} | {dt:.2f} | {fd:.2f} | {d / fd:.2f}× | {dt / fd:.2f}× |"
        )
    ratios_e = [float(r["encode_us"]) / float(r["floor_encode_us"]) for r in rows]  # type: ignore[arg-type]
    ratios_d = [float(r["decode_us"]) / float(r["floor_decode_us"]) for r in rows]  # type: ignore[arg-type]
    ratios_t = [float(r["decode_trusted_us"]) / float(r["floor_decode_us"]) for r in rows]  # type: ignore[arg-type]
    lines.append(
        f"| **median** | | | | **{statistics.median(ratios_e):.2f}×** | | | | "
        f"**{statistics.median(ratios_d):.2f}×** | **{statistics.median(ratios_t):.2f}×** |"
    )
    return head + "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--json", help="also write the rows to this JSON file")
    args = ap.parse_args()
    rows = measure(args.repeat)
    print(table(rows))
    print(f"\npython {sys.version.split()[0]}, cbor2 {cbor2.__name__}, repeat={args.repeat}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
