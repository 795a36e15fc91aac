"""A second family of compound figures, written independently of ``modeldev/synth``.

It exists to measure, never to train: its layouts (recursive guillotine cuts, gutterless and
uneven), its panel content (wide-gap bar charts, stripes, gradients, tables, sparse drawings,
insets) and its label fonts share no code with the training generator, so a score on it says
how a detector does on figures unlike the ones it learnt from. No training command imports it.
"""
