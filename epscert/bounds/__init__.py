"""Confidence bounds on the mean of i.i.d. values from their sums (one bound per module).

May import numpy and scipy only; it knows nothing of samplers or configurations.
"""
