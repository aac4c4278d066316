"""The deterministic Balls-and-Bins PLD bracket: certified upper and lower bounds on δ(ε) (one epoch, E epochs).
May import numpy, scipy, the ground floor (epscert.names, epscert.checks), epscert.fft, epscert.analytic; never Beam, never montecarlo."""

from epscert.allocation.bracket import AllocationBracket, bracket_for

__all__ = ["AllocationBracket", "bracket_for"]
