"""Exact and near duplicate panels across the whole dataset, spread over the cluster.

``hashes`` makes a panel's sha256 and pHash; ``groups`` judges one bucket of hash rows (pure
Arrow and numpy); ``shuffle`` routes hash rows to buckets and resolves the verdicts with Ray
tasks, so no process holds more than one bucket, whatever the size of the dataset.
"""
