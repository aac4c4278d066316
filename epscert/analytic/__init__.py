"""Closed forms and deterministic baselines: deterministic pair, Poisson PLD/RDP, cube and sliced lower bounds, truncation penalty.

May import numpy, scipy, dp_accounting and the ground floor (epscert.names, epscert.checks); never montecarlo or above.
"""
