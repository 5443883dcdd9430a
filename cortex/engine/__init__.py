"""The engine: heads, versions, edges, the journal, purge and erasure, the vector cache.

store.Store is the transactional core every layer above uses; it maintains the indexes inside
its write transactions.
"""
