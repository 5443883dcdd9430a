"""Records and their encoding: the nine types, ids, canonical CBOR, content hashes, forms, episodes.

Pure: nothing here touches storage. Everything above builds on these records.
"""
