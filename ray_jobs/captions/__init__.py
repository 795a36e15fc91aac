"""Captions: subcaption splitting, panel pairing, token accounting."""
