"""Closed forms and deterministic baselines: deterministic pair, Poisson PLD/RDP, cube and sliced lower bounds, truncation penalty.

May import numpy, scipy, dp_accounting and the ground floor (epscert.params); never montecarlo or above.
"""
