"""The ordered key-value layer: key layout, LMDB (and its pages read directly), PostgreSQL.

Knows bytes and keys, not memories' meaning. Imports only cortex.model and the base modules.
"""
