"""Real article figures with hand-made panel truth: the truth files and their checks
(``truth``), and the product's panel detector scored on them (``evaluate``).

The figures are those of five real article packages in ``../shared/data/real_articles``. Two
of the articles are kept out (``truth.KEPT_OUT``): nothing is tuned on them, and they are
reported apart from the three tuning articles."""
