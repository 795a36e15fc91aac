"""The dataset-building pipeline: pure stage functions over rows, and the thin Ray layer."""
