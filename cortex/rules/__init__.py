"""The rules of meaning and access: claim keys and chains, salience, scopes, sensitivity, aliases.

Mostly pure; the few records they own (use counters, ent/a/) go through
cortex.storage. Imports nothing above the indexes.
"""
