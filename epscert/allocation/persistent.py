"""Mid-run brackets for persistent Balls-and-Bins: one bin per record, reused every cycle.

**The pair.** With one assignment kept for all cycles (JAX Privacy's ``BallsInBinsSampling``), the
record's bin j is uniform on [T] and the same in every cycle. After E' >= 1 whole cycles and r more
steps (0 < r < T), bin t has been released c_t = E' + 1 times if t <= r and c_t = E' times otherwise.
As for a whole persistent run (SPEC §1), the c_t releases of bin t add up to one Gaussian
participation with sensitivity 1 at noise σ/√c_t (their sum is sufficient for the record's
contribution: N(c_t, c_t σ²) scaled by 1/c_t is N(1, σ²/c_t)). So the pair is

    P = (1/T) Σ_t N(e_t, diag(σ_s²)),   Q = N(0, diag(σ_s²)),   σ_s = σ/√c_s,

    dP/dQ = (1/T) Σ_t W_t,   W_t = exp(Z_t/σ_t − 1/(2σ_t²)) i.i.d. across t under Q, E_Q[W_t] = 1:

the mean of r lognormal factors at σ_a = σ/√(E' + 1) and T − r at σ_b = σ/√E', that is
S = (r/T)·M_r(σ_a) + ((T − r)/T)·M_{T−r}(σ_b), a mean with nonnegative weights of two independent
means. At r = 0 it is the E'-cycle run (one epoch at σ_b), at r = T the (E' + 1)-cycle run.

**The bracket.** Each mean comes from the convex-order chains of its own σ
(:class:`~epscert.allocation.prefix.ChainCache` of the run (σ_x, T, 1), shared with every other
bracket of that run), and the two are combined by :func:`~epscert.allocation.epoch.mean_combine`
(convex order is kept by a mean of independent laws with nonnegative weights;
:mod:`epscert.allocation.cells`). The cap event G is that every W_t is below its own law's cap c_t;
as in :mod:`epscert.allocation.tails`, with f <= S for remove and f <= 1 for add,

    E_Q[f 1_{G^c}] <= Σ_t E_Q[S 1{W_t > c_t}] = Σ_t (E_Q[W_t 1{W_t > c_t}] + (T − 1) P(W_t > c_t))/T
                   = (r/T)·R_a + ((T − r)/T)·R_b       (remove),
    E_Q[f 1_{G^c}] <= Σ_t P(W_t > c_t) = (r/T)·A_a + ((T − r)/T)·A_b        (add),

with R_x = E_Q[W 1{W > c}] + (T − 1) P(W > c) and A_x = T·P(W > c) the one-epoch cap terms of the
run (σ_x, T, 1) (:func:`~epscert.allocation.tails.cap_terms`, each within its budget, so the mixture
is too). The three extra roundings (the weights, the products, the sum; nonnegative terms) are
covered by the factor 1 + 4u. Everything else (floating point, evaluation, ε(δ)) is
:class:`~epscert.allocation.bracket.AllocationBracket`'s.
"""

from __future__ import annotations

import math
from functools import lru_cache

from epscert.allocation.bracket import AllocationBracket, default_base_cells, default_cells, default_shape
from epscert.allocation.cells import UNIT_ROUNDOFF
from epscert.allocation.epoch import ChainLaw, mean_combine
from epscert.allocation.prefix import run_laws
from epscert.allocation.tails import cap_terms

#: Relative allowance of the three roundings that mix the two runs' cap terms.
_MIX_ROUNDING = 4.0 * UNIT_ROUNDOFF


class PersistentPrefixBracket(AllocationBracket):
    """Certified bounds on δ(ε) after ``cycles`` >= 1 whole cycles and ``prefix_steps`` r in [1, T)
    more steps of persistent Balls-and-Bins at noise σ (module docstring); accuracy settings are the
    defaults of σ_a = σ/√(cycles + 1) (the smaller noise) and of σ_b for its own chains."""

    def __init__(self, sigma: float, steps: int, cycles: int, prefix_steps: int):
        if isinstance(cycles, bool) or not isinstance(cycles, int) or cycles < 1:
            raise ValueError(f"cycles must be an integer >= 1, got cycles={cycles!r}")
        if isinstance(prefix_steps, bool) or not isinstance(prefix_steps, int) or not 1 <= prefix_steps < steps:
            raise ValueError(f"prefix_steps must be an integer in [1, steps), got prefix_steps={prefix_steps!r}")
        super().__init__(float(sigma) / math.sqrt(cycles + 1), steps, 1)
        self.run_sigma = float(sigma)
        self.sigma_b = self.run_sigma / math.sqrt(cycles)
        self.epochs = cycles + 1
        self.steps_done = cycles * steps + prefix_steps
        self.full_epochs, self.prefix_steps = cycles, prefix_steps
        a, b = self._run("a"), self._run("b")
        whole_a = cap_terms(self.sigma, steps, 1, a.log_c)
        whole_b = cap_terms(self.sigma_b, steps, 1, b.log_c)
        wa, wb = prefix_steps / steps, (steps - prefix_steps) / steps
        self.caps = {k: (wa * whole_a[k] + wb * whole_b[k]) * (1.0 + _MIX_ROUNDING) for k in ("remove", "add")}

    def __repr__(self) -> str:
        return (f"PersistentPrefixBracket(sigma={self.run_sigma}, steps={self.steps}, cycles={self.full_epochs}, "
                f"prefix_steps={self.prefix_steps})")

    def _run(self, part: str):
        """The shared laws of the one-epoch run at σ_a (this bracket's settings) or σ_b (its defaults)."""
        if part == "a":
            st = self.settings
            return run_laws(self.sigma, self.steps, 1, st["cells"], st["base_cells"], st["tau"], st["cap_budget"],
                            st["shape"])
        sigma = self.sigma_b
        return run_laws(sigma, self.steps, 1, default_cells(sigma), default_base_cells(sigma),
                        self.settings["tau"], self.settings["cap_budget"], default_shape(sigma))

    def law(self, chain: str) -> ChainLaw:
        """(r/T)·M_r(σ_a) + ((T − r)/T)·M_{T−r}(σ_b) in ``chain`` (module docstring)."""
        r, T = self.prefix_steps, self.steps
        st = self.settings
        ma = self._run("a").chain(chain).prefix_mean(r)
        mb = self._run("b").chain(chain).prefix_mean(T - r)
        return mean_combine(ma, mb, chain, st["cells"], st["tau"], (r / T, (T - r) / T), st["shape"])


@lru_cache(maxsize=32)
def persistent_bracket_for(sigma: float, steps: int, cycles: int, prefix_steps: int) -> PersistentPrefixBracket:
    """The persistent mid-run bracket at the default settings, built once per (σ, T, E', r) in a process."""
    return PersistentPrefixBracket(float(sigma), int(steps), int(cycles), int(prefix_steps))
