"""The inverse questions: ε for a target δ, σ for a target (ε, δ), and the root search under them.

May import everything below it (ground floor, montecarlo, bounds, analytic, results); never the entry points.
"""
