"""Model development: generators, held-out families, protocols, training and evaluation.

The product (``ray_jobs``, ``operators``) never imports this package, and the runtime images do
not contain it: the build context is an allow-list (``.dockerignore`` at the repository root)
that does not list ``modeldev/``. What model development shares with inference (the crop a
model is shown, fonts, box geometry) lives in the product and is imported from there, one copy.
``tests/test_product_imports.py`` fails when the product reaches in here.
"""
