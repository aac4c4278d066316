"""Exponentially tilted FFT composition (the Esscher transform) with a relative error bound.

Factors j = 1..d: a sub-probability m_j on the grid ℓ = o_j + iΔ (:class:`~epscert.fft.pairs.GridMasses`,
already rounded outward) taken c_j times. The composition y = *_j m_j^{*c_j} lives on
ℓ = Σ_j c_j o_j + kΔ and δ(ε) = p∞ + Σ_{ℓ > ε} f_ε(ℓ) y(ℓ), f_ε(ℓ) = 1 - e^{ε-ℓ},
p∞ = 1 - Π_j (1 - m_{j,∞})^{c_j}.

Tilting. For λ >= 0 and any positive numbers M̃_j, x_j = m_j e^{λℓ}/M̃_j satisfies
*_j x_j^{*c_j} = y e^{λℓ} / Π M̃_j^{c_j} exactly (e^{λ(a+b)} = e^{λa}e^{λb}), so

    δ(ε) - p∞ = S · Σ_{ℓ > ε} f_ε(ℓ) e^{-λℓ} z(ℓ),      S = Π_j M̃_j^{c_j},  z = *_j x_j^{*c_j}.

M̃_j = Σ_i m_{j,i} e^{λℓ_i} (computed), so ‖x_j‖₁ ≈ 1 and z is a probability vector whose mass sits
where λ puts it: at the saddle point of Σ_j c_j log M_j(λ) - λε the tilted mass near ε is O(1), and
an error that is small against ‖z‖ is small against δ(ε). That is why the bound below is relative.

z is computed by FFT on N points over the window W = [m_lo, m_lo + N) of grid indices (circular:
index k stands for the k' ≡ k mod N in W). The error budget, as inequalities (u = 2^-53):

1. Tilting. x̃_j = x_j(1 + θ), |θ| <= r_x = c·u·(1 + |log m| + λ|ℓ| + |log M̃|) per entry; the
   composition has non-negative terms, so it is within a factor (1 + r_x)^{Σc} of the exact one.
2. FFT (a stated model, as in issue 11's bracket): each coefficient of rfft(x̃_j) is within
   τ_j = ``FFT_ROUNDOFF_UNITS``·u·log2(N)·‖x̃_j‖₁ of the exact DFT.
3. Product (telescoping |Π a_j^{c_j} - Π b_j^{c_j}| <= Σ_j c_j |a_j - b_j| M_j^{c_j-1} Π_{i≠j} M_i^{c_i},
   M_j >= |a_j|, |b_j|; plus the evaluation of exp(Σ c log X̃)): |Ã - A| <= E(ω) = Π_j M_j^{c_j}·Σ_j c_j τ_j/M_j
   + |Ã|·``EXP_ROUNDOFF_UNITS``·u·(1 + Σ_j c_j(1 + |log X̃_j|)), M_j = |X̃_j| + τ_j.
4. Inverse FFT, per output point: |z̃_k - z_k| <= E_pt = (1/N)Σ_ω [E(ω) + FFT_ROUNDOFF_UNITS·u·
   log2(N)·(|Ã(ω)| + E(ω))] (a DFT output moves by at most the mean modulus of its input's error).
5. Untilting and the sum: the upper value uses (z̃_k + E_pt)_+ and the lower (z̃_k - E_pt)_+ (so
   each point is bounded, not only the sum); logsumexp suffix sums and the final
   S·e^{A}(1 - e^{ε+B-A}) carry a relative allowance r_sum = c·u·(N + |log S| + |A| + |B| + |ε|)/
   min(1, |ε + B - A|) (the last factor is the expm1 of a small difference); grid losses are
   rounded (|ℓ̃ - ℓ| <= ξ), which f_{ε∓ξ} covers: f_ε(ℓ) <= f_{ε-ξ}(ℓ̃) (upper reads at ε - ξ,
   lower at ε + ξ), and e^{-λℓ} is off by at most e^{λξ}.

Wrap-around. The computed z̃ approximates wrap(z) >= z on W. Upper: δ(ε) <= S Σ_{W, ℓ>ε} f e^{-λℓ}
wrap(z) + Pr[S_ℓ > top of W] + p∞, and Pr[S_ℓ > t] <= min_s Π_j M_j(s)^{c_j} e^{-st} (Chernoff,
s > 0, untilted). Lower: the wrapped-in mass adds S·Σ_{ℓ>ε} f e^{-λℓ}(wrap z - z) <=
S e^{-λε}·Pr_λ[outside W] (f <= 1, e^{-λℓ} <= e^{-λε} for ℓ > ε and λ >= 0), with
S·Pr_λ[above t] <= min_s Π M_j(λ+s)^{c_j} e^{-st} and S·Pr_λ[below b] <= min_s Π M_j(λ-s)^{c_j} e^{sb}.
Every ε read must be >= the bottom of W (losses in (ε, bottom) would be missed).

A-posteriori check (:func:`check_agree`): the same factors composed with a second λ give a
second value with its own allowance; the two intervals must overlap, else :class:`TiltCheckError`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from scipy import fft as sp_fft
from scipy import special

from epscert.fft.pairs import UNIT_ROUNDOFF, GridMasses

#: Per-radix-stage FFT round-off in units of u, relative to the input's ℓ1 norm (stated model).
FFT_ROUNDOFF_UNITS = 8.0
#: Round-off of exp(Σ c log X̃) relative to 1 + Σ c (1 + |log X̃|), in units of u.
EXP_ROUNDOFF_UNITS = 4.0
#: Relative round-off units of the tilting, of each logsumexp and of the final reading.
TILT_ROUNDOFF_UNITS = 8.0
#: Tilted mass allowed outside the window on each side (Chernoff), before the e^{-λε} factor.
WINDOW_TAIL = 1e-10
#: Smallest positive normal float: an upper value that underflows is reported as this (never 0).
TINY = float(np.finfo(np.float64).tiny)
#: Largest FFT accepted.
MAX_FFT = 2**24
#: Largest exponent (λ + 1)(ℓ_j - ℓ_r) between a far suffix sum's anchor r and its first term j (Composition._log_sum).
FAR_SPACING = 300.0


class TiltCheckError(RuntimeError):
    """Two compositions of the same factors disagree beyond their written error budgets."""


@dataclass(frozen=True, eq=False)
class Factor:
    """A grid sub-probability composed ``count`` times."""

    masses: GridMasses
    count: int


def _log_masses(g: GridMasses) -> tuple[np.ndarray, np.ndarray]:
    keep = g.masses > 0.0
    return np.log(g.masses[keep]), g.losses()[keep]


#: Block length of the blocked MGF sums (a power of two).
MGF_BLOCK = 64
#: Largest |s|·(block width) in the blocked MGF (keeps e^{s r Δ} far from overflow).
MAX_BLOCK_EXPONENT = 64.0


class Blocked:
    """A grid sub-probability cut into blocks of B points for its moment-generating function.

    Σ_i m_i e^{s ℓ_i} = Σ_b e^{s ℓ_b + log μ_b} Σ_r (m_{b,r}/μ_b) e^{s r Δ}, μ_b the block's largest
    mass: every inner term is <= e^{|s|·BΔ} <= e^{MAX_BLOCK_EXPONENT} for |s| <= ``smax``, and
    nothing that matters underflows (a term below 1e-300·μ_b is lost: at most B·1e-300·e^{64}
    relative to the block, covered by the allowance).
    """

    def __init__(self, g: GridMasses, smax: float) -> None:
        m = g.masses
        block = MGF_BLOCK
        while block > 1 and smax * block * g.delta > MAX_BLOCK_EXPONENT:
            block //= 2
        pad = (-m.size) % block
        mm = np.concatenate([m, np.zeros(pad)]).reshape(-1, block)
        mu = np.max(mm, axis=1)
        keep = mu > 0.0
        self.block, self.smax, self.delta = block, smax, g.delta
        self.inner = mm[keep] / mu[keep, None]
        self.log_mu = np.log(mu[keep])
        self.starts = g.offset + g.delta * (g.start + block * np.flatnonzero(keep).astype(np.float64))

    def log_mgf(self, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(log Σ_i m_i e^{s ℓ_i}, absolute round-off bound) for each s (|s| <= smax); -inf if m = 0."""
        s = np.atleast_1d(np.asarray(s, dtype=np.float64))
        if self.log_mu.size == 0:
            return np.full(s.size, -np.inf), np.zeros(s.size)
        if s.size and float(np.max(np.abs(s))) > self.smax * (1.0 + 1e-9):
            raise ValueError(f"s must be <= {self.smax} in magnitude, got s={float(np.max(np.abs(s)))!r}")
        inner = self.inner @ np.exp(np.outer(self.delta * np.arange(self.block), s))
        with np.errstate(divide="ignore", invalid="ignore"):
            logs = np.log(inner) + self.log_mu[:, None] + np.outer(self.starts, s)
            top = np.max(logs, axis=0)
            vals = np.log(np.sum(np.exp(logs - top), axis=0)) + top
        vals = np.where(np.isfinite(top), vals, top)
        mag = np.maximum(np.abs(np.nan_to_num(top, neginf=0.0)), np.abs(np.nan_to_num(np.min(logs, axis=0),
                                                                                      neginf=0.0)))
        err = TILT_ROUNDOFF_UNITS * UNIT_ROUNDOFF * (self.block + math.log2(max(self.log_mu.size, 2)) + 2.0 + mag)
        return vals, err + 1e-280


def log_mgf(g: GridMasses, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(log Σ_i m_i e^{s ℓ_i}, absolute round-off bound) for each s (see :class:`Blocked`)."""
    s = np.atleast_1d(np.asarray(s, dtype=np.float64))
    return Blocked(g, float(np.max(np.abs(s))) if s.size else 0.0).log_mgf(s)


#: Chernoff exponents s for the window and tail bounds (any s > 0 gives a valid bound).
TAIL_S = 2.0 ** (np.arange(-20, 17) / 2.0)
#: Tilts are snapped down to this grid (eighth octaves) so that nearby requests share a composition.
LAM_STEPS_PER_OCTAVE = 8
#: Nats of tilted mass near ε a smaller tilt may give up for a smaller window (:meth:`Mgf.economical`).
TILT_SLACK = 1.5
#: Smallest non-zero tilt and the largest tilt tried.
LAM_MIN, LAM_MAX = 2.0**-6, 2.0**12


class Mgf:
    """s -> Σ_j c_j log M_j(s), rounded up (an upper bound), evaluated on demand (in batches) and cached."""

    def __init__(self, factors: Sequence[Factor]) -> None:
        self.factors = tuple(factors)
        self._cache: dict[float, float] = {}
        self._blocked: dict[float, list[Blocked]] = {}
        self._tails: dict[float, tuple[np.ndarray, np.ndarray]] = {}  # tilted_tails per λ
        self._at_tail_s: np.ndarray | None = None  # values(TAIL_S)
        log_finite = 0.0
        for f in self.factors:
            inf = f.masses.inf_mass
            log_finite += f.count * (math.log1p(-inf) if inf < 1.0 else -math.inf)
        self.log_finite = log_finite

    @classmethod
    def of(cls, factors: Sequence[Factor]) -> "Mgf":
        return cls(factors)

    def _blocks(self, smax: float) -> list[Blocked]:
        """Blocked forms for |s| <= smax (cached per power of two of smax, so blocks stay long)."""
        key = 2.0 ** max(0, math.ceil(math.log2(max(smax, 1.0)) + 1e-9))
        if key not in self._blocked:
            self._blocked[key] = [Blocked(f.masses, key) for f in self.factors]
        return self._blocked[key]

    def values(self, s) -> np.ndarray:
        s = np.atleast_1d(np.asarray(s, dtype=np.float64))
        try:  # all cached (a grid reads the same points at many ε): the same numbers, without set algebra
            return np.asarray([self._cache[v] for v in s.tolist()])
        except KeyError:
            pass
        todo = sorted({float(v) for v in s.tolist()} - self._cache.keys())
        if todo:
            arr = np.asarray(todo)
            total = np.zeros(arr.size)
            for f, b in zip(self.factors, self._blocks(float(np.max(np.abs(arr))))):
                v, e = b.log_mgf(arr)
                total += f.count * (v + e)
            self._cache.update(zip(todo, total.tolist()))
        return np.asarray([self._cache[float(v)] for v in s.tolist()])

    def at(self, s: float) -> float:
        return float(self.values([s])[0])

    def at_tail_s(self) -> np.ndarray:
        """values(TAIL_S), kept (the same cached numbers, without a lookup per call; read-only)."""
        if self._at_tail_s is None:
            self._at_tail_s = self.values(TAIL_S)
            self._at_tail_s.flags.writeable = False
        return self._at_tail_s

    def upper_tail(self, threshold: float) -> float:
        """log Pr[S_ℓ >= threshold] <= min_{s>0} Σ c log M(s) - s·threshold (finite part)."""
        with np.errstate(invalid="ignore"):
            ex = self.at_tail_s() - TAIL_S * threshold
        return min(0.0, float(np.nanmin(ex)))

    def saddles(self, epsilons) -> list[float]:
        """For each ε, the tilt λ ∈ {0} ∪ [LAM_MIN, LAM_MAX] minimising Σ c log M(λ) - λε, to 1/16 octave.

        h(λ) = Σ c log M(λ) - λε is convex: a half-octave scan, then a sixteenth-octave scan of the
        octave around the best point (two batches of evaluations for all ε together).
        """
        eps = [float(e) for e in np.atleast_1d(epsilons)]
        coarse = np.concatenate([[0.0], 2.0 ** np.arange(math.log2(LAM_MIN), math.log2(LAM_MAX) + 0.25, 0.5)])
        # h is convex in λ and its minimiser grows with ε: once h rises for the largest ε it has
        # risen for every ε; evaluate in chunks of increasing λ and stop there (large λ need short blocks)
        lowest = max(eps) if eps else 0.0
        upto = 0
        while upto < coarse.size:
            upto = min(coarse.size, upto + 8)
            h = self.values(coarse[:upto]) - coarse[:upto] * lowest
            k = int(np.nanargmin(h))
            if k < upto - 2:
                break
        coarse = coarse[:upto]
        vc = self.values(coarse)
        col = np.asarray(eps, dtype=np.float64)[:, None]
        # one array pass for all ε (the same arithmetic as one ε at a time; nanargmin row by row)
        best = np.nanargmin(vc - coarse * col, axis=1).tolist() if eps else []
        fines = {k: coarse[k] * 2.0 ** (np.arange(-8, 9) / 16.0) for k in set(best)}
        fines = {k: f[(f >= LAM_MIN) & (f <= LAM_MAX)] for k, f in fines.items()}
        if fines:  # every fine point in one batch (the MGF's blocking depends on the batch's largest |s|)
            self.values(np.concatenate(list(fines.values())))
        out = [0.0] * len(eps)
        for k, f in fines.items():  # the ε that share a coarse point share its fine scan
            rows = [i for i, b in enumerate(best) if b == k]
            if k == 0:
                continue
            vf = self.values(f) - f * col[rows]
            for i, j in zip(rows, np.nanargmin(vf, axis=1).tolist()):
                out[i] = float(f[j])
        return out

    def saddle(self, eps: float) -> float:
        return self.saddles([eps])[0]

    def economical(self, eps: float, lam: float, slack: float = TILT_SLACK) -> float:
        """The smallest λ' = λ·2^(-k/2) (k <= 12) with h(λ') <= h(λ) + slack, h(λ) = Σ c log M(λ) - λε.

        e^{-h(λ)} is what the tilted mass near ε scales with (δ ≈ S e^{-λε}·c), so giving up
        ``slack`` nats of it multiplies the relative round-off by at most e^slack, while a smaller
        tilt lightens the tilted tails and so shrinks the window (the cost) of the composition.
        """
        if lam <= 0.0:
            return lam
        cands = lam * 2.0 ** (-np.arange(13) / 2.0)
        cands = cands[cands >= LAM_MIN]
        h = self.values(cands) - cands * eps
        ok = np.flatnonzero(h <= h[0] + slack)
        return float(cands[ok[-1]]) if ok.size else lam

    def tilted_tails(self, lam: float) -> tuple[np.ndarray, np.ndarray]:
        """Pairs (Σ c log M(λ + s), s) and (Σ c log M(λ - s), s) for s in TAIL_S (finite values)."""
        if lam not in self._tails:  # kept per λ (a grid reads one composition at many ε)
            both = self.values(np.concatenate([lam + TAIL_S, lam - TAIL_S]))  # |s| <= λ + 256
            up = np.column_stack([both[:TAIL_S.size], TAIL_S])
            down = np.column_stack([both[TAIL_S.size:], TAIL_S])
            self._tails[lam] = (up[np.isfinite(up[:, 0])], down[np.isfinite(down[:, 0])])
        return self._tails[lam]


def window_for(mgf: Mgf, lam: float, eps_min: float, tail: float = WINDOW_TAIL) -> tuple[float, float]:
    """Loss window [bottom, top] with Pr_λ[outside] <= tail on each side (Chernoff), bottom <= eps_min."""
    up, down = mgf.tilted_tails(lam)
    base = mgf.at(lam)
    log_tail = math.log(tail)
    top = float(np.min((up[:, 0] - base - log_tail) / up[:, 1])) if up.size else math.inf
    bottom = float(np.max((log_tail - (down[:, 0] - base)) / down[:, 1])) if down.size else -math.inf
    return min(bottom, eps_min), top


def lam_grid(lam: float) -> float:
    """λ snapped down to 0 or to 2^(k/LAM_STEPS_PER_OCTAVE) (nearby requests share a composition)."""
    if lam < LAM_MIN:
        return 0.0
    k = math.floor(LAM_STEPS_PER_OCTAVE * math.log2(min(lam, LAM_MAX)) + 1e-9)
    return float(2.0 ** (k / LAM_STEPS_PER_OCTAVE))


@dataclass(frozen=True, eq=False)
class Composition:
    """The tilted composition on one window, ready to read δ(ε) with its allowances."""

    lam: float
    delta: float
    offset: float  # Σ c_j o_j
    m_lo: int
    z: np.ndarray  # tilted values at grid indices m_lo .. m_lo + N - 1
    err_pt: float
    log_scale: float  # log S
    rel: float  # (1 + r_x)^{Σc} - 1 and the reading allowances, without r_sum
    log_finite: float
    mgf: Mgf
    xi: float  # bound on |ℓ̃ - ℓ| over the window
    _suffix: dict = field(default_factory=dict, repr=False)

    @property
    def losses(self) -> np.ndarray:
        if "losses" not in self._suffix:
            self._suffix["losses"] = self.offset + self.delta * (self.m_lo + np.arange(self.z.size, dtype=np.float64))
        return self._suffix["losses"]

    @property
    def bottom(self) -> float:
        return self.offset + self.delta * self.m_lo

    @property
    def top(self) -> float:
        return self.offset + self.delta * (self.m_lo + self.z.size - 1)

    @property
    def inf_part(self) -> float:
        return max(0.0, -math.expm1(self.log_finite)) if self.log_finite > -math.inf else 1.0

    def _sums(self, upper: bool, r: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Suffix sums Σ_{m >= j} v_m e^{-λ(ℓ_m - ℓ_r)} and Σ v_m e^{-(λ+1)(ℓ_m - ℓ_r)} for j >= r (entry j - r), and v.

        Every term is <= v_m <= 1 + E_pt (ℓ_m >= ℓ_r), summed from the top: relative round-off <= N·u of the suffix
        itself. r = 0 (the bottom) is kept, and the last anchor r > 0 (:meth:`_log_sum` reads far above the bulk)."""
        key = ("up" if upper else "down", r > 0)
        if self._suffix.get(key, (None,))[0] != r:
            vals = np.maximum(self.z + self.err_pt, 0.0) if upper else np.maximum(self.z - self.err_pt, 0.0)
            rise = self.delta * np.arange(self.z.size - r, dtype=np.float64)  # ℓ_m - ℓ_r
            with np.errstate(under="ignore"):
                ta = vals[r:] * np.exp(-self.lam * rise)
                tb = ta * np.exp(-rise)
            self._suffix[key] = (r, np.cumsum(ta[::-1])[::-1], np.cumsum(tb[::-1])[::-1], vals)
        return self._suffix[key][1:]

    def _log_sum(self, eps: float, upper: bool) -> tuple[float, float]:
        """(log Σ_{ℓ > eps} f_eps(ℓ) e^{-λℓ} z±, relative allowance r_sum) (module docstring, step 5).

        The suffix sums scaled to the bottom ℓ_0 underflow far above the bulk; there they are scaled to an anchor ℓ_r,
        r <= j the last multiple of ⌊FAR_SPACING/((λ+1)Δ)⌋ (terms <= v_m, the first >= v_j e^{-FAR_SPACING}), and where
        even those underflow, summed in log space term by term (logsumexp: 10 of 15 CPU s at Poisson σ = 1, T = 100,
        δ = 1e-300, before the anchors)."""
        ell = self.losses
        j = int(np.searchsorted(ell, eps, side="right"))
        if j >= ell.size:
            return -math.inf, 0.0
        step = max(1, int(FAR_SPACING / ((self.lam + 1.0) * self.delta)))
        for r in (0, j - j % step):
            sum_a, sum_b, vals = self._sums(upper, r)
            if sum_a[j - r] > 1e-250 and sum_b[j - r] > 1e-250:
                ref = float(ell[r])
                a, b = math.log(sum_a[j - r]) - self.lam * ref, math.log(sum_b[j - r]) - (self.lam + 1.0) * ref
                break
        else:
            ref = float(ell[0])
            with np.errstate(divide="ignore"):
                la = np.log(vals[j:]) - self.lam * ell[j:]
            a, b = float(special.logsumexp(la)), float(special.logsumexp(la - ell[j:]))
        if a == -math.inf:
            return -math.inf, 0.0
        x = eps + b - a
        r_sum = TILT_ROUNDOFF_UNITS * UNIT_ROUNDOFF * (
            self.z.size + abs(self.log_scale) + abs(a) + abs(b) + abs(eps) + self.lam * max(abs(ref), abs(ell[0])))
        if not x < -1e-300:  # f_ε rounds to 0 against the sum: f_ε <= 1 bounds it above, 0 below
            return (a, r_sum) if upper else (-math.inf, 0.0)
        return a + math.log(-math.expm1(x)), r_sum / min(1.0, abs(x))

    def log_tilted_outside(self, eps: float) -> float:
        """log of S e^{-λε} Pr_λ[outside the window] (the wrap-around term of the lower value)."""
        if "outside" not in self._suffix:  # S·Pr_λ[outside] does not depend on ε: once per composition
            up, down = self.mgf.tilted_tails(self.lam)
            top = self.top + self.delta
            out = -math.inf
            if up.size:
                out = float(np.min(up[:, 0] - up[:, 1] * top))
            if down.size:
                out = float(np.logaddexp(out, np.min(down[:, 0] + down[:, 1] * self.bottom)))
            self._suffix["outside"] = out
        return self._suffix["outside"] - self.lam * eps

    def log_tail_above(self) -> float:
        """log Pr[S_ℓ > top of the window] (Chernoff, :meth:`Mgf.upper_tail`): once per composition."""
        if "above" not in self._suffix:
            self._suffix["above"] = self.mgf.upper_tail(self.top + self.delta)
        return self._suffix["above"]

    def absolute(self, eps: float, upper: bool) -> float:
        """The part of the allowance that does not scale with δ (the floor the ``resolution`` reports).

        S·E_pt·Σ_{ℓ>ε} f_ε(ℓ)e^{-λℓ} (a geometric sum over the window) plus, for the upper value, the
        ∞ mass and the tail above the window; for the lower value, the wrap-around term.
        """
        ell = self.losses
        j = int(np.searchsorted(ell, eps, side="right"))
        count = ell.size - j
        fp = 0.0
        if count > 0 and self.err_pt > 0.0:
            def geometric(rate: float) -> float:  # log Σ_{i<count} e^{-rate·iΔ}
                if rate * self.delta < 1e-12:
                    return math.log(count)
                return math.log(-math.expm1(-rate * self.delta * count)) - math.log(-math.expm1(-rate * self.delta))
            start = float(ell[j])
            first = -self.lam * start + geometric(self.lam)
            second = eps - (self.lam + 1.0) * start + geometric(self.lam + 1.0)
            log_w = first + math.log(-math.expm1(min(second - first, -1e-300)))
            fp = math.exp(min(self.log_scale + math.log(self.err_pt) + log_w, 0.0))
        if upper:
            return min(1.0, fp + self.inf_part + math.exp(self.log_tail_above()))
        return min(1.0, fp + math.exp(min(self.log_tilted_outside(eps), 0.0)))

    def upper(self, eps: float) -> float:
        """Upper bound on δ(ε) (ε >= the window's bottom)."""
        if eps < self.bottom:
            raise ValueError(f"epsilon below the composition window ({self.bottom:g}), got epsilon={eps!r}")
        e = eps - self.xi
        log_sum, r_sum = self._log_sum(e, True)
        tail = math.exp(self.log_tail_above())
        grow = (1.0 + self.rel) * (1.0 + r_sum) * math.exp(self.lam * self.xi)
        val = math.exp(min(self.log_scale + log_sum, 700.0)) * grow if log_sum > -math.inf else 0.0
        # a value that underflows is below the smallest normal float, which then bounds it
        return min(1.0, max(self.inf_part + val + tail, TINY))

    def lower(self, eps: float) -> float:
        """Lower bound on δ(ε) (ε >= the window's bottom): the value less the wrap-around term,
        both in log space (neither is capped before the difference)."""
        if eps < self.bottom:
            raise ValueError(f"epsilon below the composition window ({self.bottom:g}), got epsilon={eps!r}")
        e = eps + self.xi
        log_sum, r_sum = self._log_sum(e, False)
        if log_sum == -math.inf or r_sum >= 1.0:
            return self.inf_part * (1.0 - 4.0 * UNIT_ROUNDOFF)
        log_val = self.log_scale + log_sum + math.log1p(-r_sum) - math.log1p(self.rel) - self.lam * self.xi
        log_alias = self.log_tilted_outside(e)
        inf_low = self.inf_part * (1.0 - 4.0 * UNIT_ROUNDOFF)  # the +∞ atoms kept by the lower side
        if log_alias >= log_val:
            return inf_low
        log_low = log_val + math.log(-math.expm1(log_alias - log_val))
        return min(1.0, inf_low + math.exp(min(log_low, 0.0)))


@dataclass(frozen=True, eq=False)
class Prepared:
    """One factor tilted by λ and transformed (rfft on N points), with its round-off inputs."""

    log_abs: np.ndarray  # log|X̃|
    phase: np.ndarray  # arg X̃
    log_m: np.ndarray  # log(|X̃| + τ)
    tau_over_m: np.ndarray  # τ/(|X̃| + τ)
    abs_log: np.ndarray  # 1 + |log|X̃|| + |arg X̃| >= 1 + |log X̃|
    log_big_m: float  # log M̃ (the normaliser; any value works, this one makes ‖x‖₁ = 1)
    r_x: float  # relative round-off of the tilted entries (step 1)


def prepare(masses: GridMasses, lam: float, n: int) -> Prepared | None:
    """x = m e^{λℓ}/M̃ placed circularly on n points and transformed (None if m is 0)."""
    u = UNIT_ROUNDOFF
    log_m, ell = _log_masses(masses)
    if log_m.size == 0:
        return None
    expo = log_m + lam * ell
    log_big_m = float(special.logsumexp(expo))
    x = np.exp(expo - log_big_m)
    idx = (masses.start + np.flatnonzero(masses.masses > 0.0)) % n
    spec = sp_fft.rfft(np.bincount(idx, weights=x, minlength=n))
    tau = FFT_ROUNDOFF_UNITS * u * math.log2(n) * float(np.sum(x)) + 1e-300
    absy = np.abs(spec)
    with np.errstate(divide="ignore"):
        la = np.log(absy)
    ph = np.angle(spec)
    m = absy + tau
    r_x = TILT_ROUNDOFF_UNITS * u * (1.0 + float(np.max(np.abs(expo - log_big_m))) + abs(log_big_m)
                                     + float(np.max(np.abs(log_m))))
    # |log X̃| <= |log|X̃|| + |arg X̃| (a zero coefficient contributes nothing: its power is 0)
    abs_log = 1.0 + np.abs(np.where(absy > 0.0, la, 0.0)) + np.abs(ph)
    return Prepared(la, ph, np.log(m), tau / m, abs_log, log_big_m, r_x)


class Product:
    """Running Π_j X̃_j^{c_j} (as Σ c log), its round-off bound (steps 2-3) and log S."""

    def __init__(self, n: int) -> None:
        half = n // 2 + 1
        self.n = n
        self.log_abs = np.zeros(half)
        self.phase = np.zeros(half)
        self.sum_log_m = np.zeros(half)
        self.sum_tau_over_m = np.zeros(half)
        self.sum_abs_log = np.zeros(half)
        self.log_scale = 0.0
        self.r_x = 0.0
        self.steps = 0

    def add(self, prep: Prepared | None, count: int) -> None:
        if prep is None or count == 0:
            return
        self.log_abs += count * prep.log_abs
        self.phase += count * prep.phase
        self.sum_log_m += count * prep.log_m
        self.sum_tau_over_m += count * prep.tau_over_m
        self.sum_abs_log += count * prep.abs_log
        self.log_scale += count * prep.log_big_m
        self.r_x = max(self.r_x, prep.r_x)
        self.steps += count

    def spectrum(self) -> tuple[np.ndarray, np.ndarray]:
        """(Ã, E) with |Ã - A| <= E coefficientwise (module docstring, steps 2-3)."""
        u = UNIT_ROUNDOFF
        with np.errstate(under="ignore", invalid="ignore"):
            spectrum = np.exp(self.log_abs + 1j * self.phase)
            mag = np.abs(spectrum)
            evaluation = np.where(mag > 0.0, mag * EXP_ROUNDOFF_UNITS * u * (1.0 + self.sum_abs_log), 0.0)
            error = np.exp(self.sum_log_m) * self.sum_tau_over_m + evaluation
        return spectrum, error

    @property
    def rel(self) -> float:
        """(1 + r_x)^{Σc} - 1 plus the rounding of log S (steps 1 and 5)."""
        return math.expm1(self.steps * math.log1p(self.r_x)) + TILT_ROUNDOFF_UNITS * UNIT_ROUNDOFF * (
            1.0 + abs(self.log_scale))


def full_sum(half: np.ndarray, n: int) -> float:
    """Σ over all n frequencies of a Hermitian quantity given on the rfft half."""
    if n % 2 == 0:
        return float(np.real(half[0]) + np.real(half[-1]) + 2.0 * np.sum(np.real(half[1:-1])))
    return float(np.real(half[0]) + 2.0 * np.sum(np.real(half[1:])))


def lattice(factors: Sequence[Factor]) -> tuple[float, float, float]:
    """(Δ, Σ c_j o_j, a bound on the magnitude of that sum's terms) of the composed lattice."""
    if not factors:
        raise ValueError("factors must hold at least one factor, got factors=()")
    delta = factors[0].masses.delta
    if any(f.masses.delta != delta for f in factors):
        raise ValueError("all factors must share one grid step delta")
    offset = float(sum(f.count * f.masses.offset for f in factors))
    offset_mag = float(sum(f.count * abs(f.masses.offset) for f in factors)) * (1 + len(factors))
    return delta, offset, offset_mag


def compose(factors: Sequence[Factor], lam: float, eps_min: float, mgf: Mgf | None = None,
            size: int | None = None, window: tuple[float, float] | None = None) -> Composition:
    """The tilted composition of ``factors`` (module docstring), window from Chernoff unless given."""
    if lam < 0.0 or not math.isfinite(lam):
        raise ValueError(f"lam must be a finite number >= 0, got lam={lam!r}")
    delta, offset, offset_mag = lattice(factors)
    u = UNIT_ROUNDOFF
    mgf = mgf or Mgf.of(factors)
    bottom, top = window or window_for(mgf, lam, eps_min)
    m_lo = math.floor((bottom - offset) / delta) - 1
    m_hi = math.ceil((top - offset) / delta) + 1
    n = size or sp_fft.next_fast_len(int(min(max(m_hi - m_lo + 1, 16), MAX_FFT)), real=True)
    if n % 2:
        n += 1
    product = Product(n)
    for f in factors:
        product.add(prepare(f.masses, lam, n), f.count)
    spectrum, error = product.spectrum()
    log2n = math.log2(n)
    mag = np.abs(spectrum)
    err_pt = (full_sum(error, n) + FFT_ROUNDOFF_UNITS * u * log2n * (full_sum(mag, n) + full_sum(error, n))) / n
    z = np.roll(sp_fft.irfft(spectrum, n), -(m_lo % n))
    xi = 4.0 * u * (offset_mag + delta * (abs(m_lo) + n))
    return Composition(lam, delta, offset, m_lo, z, err_pt, product.log_scale, product.rel, mgf.log_finite, mgf, xi)


def check_agree(a: Composition, b: Composition, eps: float, upper: bool) -> None:
    """Raise :class:`TiltCheckError` unless the two compositions agree at ε within their budgets.

    Each composition brackets the same exact value v (the composition of the same rounded factors):
    lower_a <= v <= upper_a and lower_b <= v <= upper_b, so the intervals must overlap.
    """
    if eps < max(a.bottom, b.bottom):
        return
    lo_a, up_a, lo_b, up_b = a.lower(eps), a.upper(eps), b.lower(eps), b.upper(eps)
    slack = 1e-12 * max(up_a, up_b)
    if lo_a > up_b + slack or lo_b > up_a + slack:
        side = "upper" if upper else "lower"
        raise TiltCheckError(
            f"tilted FFT compositions disagree at epsilon={eps!r} ({side} side): λ={a.lam:g} gives "
            f"[{lo_a:.6e}, {up_a:.6e}], λ={b.lam:g} gives [{lo_b:.6e}, {up_b:.6e}]")
