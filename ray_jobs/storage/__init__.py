"""Generic output I/O that every layer uses: object storage (a folder or an S3 prefix), Parquet
tables on it, and the lease that keeps one run at a time on an output. It knows nothing of
articles, shards or captions, so ``pmc/``, ``shards/`` and ``longcap/`` depend on it and not on
each other."""
