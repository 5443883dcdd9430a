"""The engine: heads, versions, edges, the journal, purge and erasure, import, the vector cache.

store.Store is the transactional core every layer above uses; it maintains the indexes inside
its write transactions. hooks.Hooks are the decisions it leaves to the layer that composes it
(cortex.agent.api.Cortex): vectors, a reader's checks, the vector cache's erasure step.
"""
