"""What the ``resolution`` column of an analytic row states (issues 12 and 24).

Every certified analytic value is outward: value = estimate ± (a relative allowance, which scales
with δ) ± (an absolute one, which does not). The absolute part is the floor below which the value
says nothing; rows report it as ``resolution``.

Issue 12 composed dp_accounting's PMFs by one untilted FFT power, whose round-off is absolute
against the largest entry of the distribution: a worst-case budget of 1.2e-10 (T·E = 10^3) to
1.8e-9 (10^4), so every smaller δ was reported at that floor (or by RDP). Issue 24 composes by the
tilted FFT of :mod:`epscert.fft.tilt`, whose round-off bound is relative to the tilted mass near
the ε read; what remains absolute is, for an upper value, the +∞ mass of the per-step tail cut
(:mod:`epscert.analytic.poisson`: at most a 1e-4 share of the δ asked for) and the Chernoff tail
beyond the FFT window, and for a lower value the wrap-around term (:meth:`Composition.absolute
<epscert.fft.tilt.Composition.absolute>`). Those are the resolutions the rows now carry, one per ε.
"""

from __future__ import annotations

import numpy as np

#: Smallest positive value an upper bound may report: below it, float underflow (never 0).
UNDERFLOW_FLOOR = np.finfo(np.float64).tiny
