"""Adapters for the benchmark suite (``tools/bench_suite.py``): one module per system.

Each adapter module defines ``System``, a class built from a store directory and the shared
data set (``dataset.py``); ``harness.run`` drives it through the workloads in a subprocess of
its own, so imports and peak memory do not interfere between systems.
"""

SYSTEMS = ("cortex", "floor", "cortex-pg", "sqlite", "chroma", "mem0")
