"""A held-out long-caption retrieval benchmark, and the evaluation of CLIP checkpoints on it.

``select`` picks one pair per recent article, ``build`` writes the benchmark and the articles
training must leave out, ``data`` reads it back, ``retrieval`` and ``zeroshot`` hold the metric
code (pure, on embeddings), ``evaluate`` embeds with an open_clip checkpoint and scores it.
"""
