"""The indexes: the tokenizer, lexical postings and BM25, episode evidence, embedders, vectors, ANN.

Each answers questions over its own records (see each module's public functions); written inside
the engine's transactions, so a committed memory is searchable at once.
"""
