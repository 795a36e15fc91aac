"""Synthetic compound figures with exact panel and label boxes, for training the detector."""
