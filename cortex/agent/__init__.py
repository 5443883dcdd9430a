"""The agent-facing layer: the Cortex API, core memory, ingest, extraction, async, quickstart."""
