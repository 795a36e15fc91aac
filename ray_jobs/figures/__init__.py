"""Figures: synthetic compound figures, the panel detector, panel extraction."""
