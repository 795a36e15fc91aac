"""Panel detector development: the synthetic data it trains on are in ``modeldev.synth``; here
its training (``train``), its scoring on annotated sets (``metrics``, ``evaluate``), the held-out
protocol (``protocol``), the proposal ceiling (``proposals``) and the measured separator cut
(``separators``, ``second_opinion``). The stage that runs it is ``ray_jobs.figures.panels``."""
