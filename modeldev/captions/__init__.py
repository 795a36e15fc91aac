"""Subcaption development: the gold sets' scoring and the plain-regex baseline the product's
splitter is measured against."""
