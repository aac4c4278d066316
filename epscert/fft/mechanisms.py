"""Mechanisms the Fourier accountant composes, and the schedule (mechanism, count) list.

Each mechanism is a frozen dataclass giving its worst-case pair (P, Q) through the PLD
ω = log P(o)/Q(o), o ~ P, for a direction:

- ``Gaussian(sigma, sensitivity)``: P = N(s, σ²), Q = N(0, σ²); ω ~ N(μ, 2μ), μ = s²/(2σ²).
  Symmetric: REMOVE and ADD coincide.
- ``SubsampledGaussian(q, sigma)`` (Poisson sampling with rate q, sensitivity 1):
  REMOVE: P = (1-q)N(0, σ²) + qN(1, σ²), Q = N(0, σ²),
          ω(x) = log(1 - q + q·e^{(2x-1)/(2σ²)}), increasing in x, range (log(1-q), ∞);
  ADD:    P = N(0, σ²), Q = the mixture, ω(x) = -log(1 - q + q·e^{(2x-1)/(2σ²)}),
          decreasing in x, range (-∞, -log(1-q)).
  (dp_accounting's REMOVE / ADD adjacency, the project's Direction convention.) The loss is
  monotone in x, so the mass of a loss cell is the exact P-mass of an x-interval:
  normal CDF differences, no quadrature.
- ``RandomizedResponse(p)``: the true bit with probability p in [1/2, 1]. P = (p, 1-p),
  Q = (1-p, p): ω = ±log(p/(1-p)) with probabilities p, 1-p; p = 1 puts all mass at +∞.

``place`` puts the pair on the grid (``grid.py``: connect-the-dots for UP, merging for DOWN), the
(subsampled) Gaussian through its loss cells (``gaussmix.py``), randomized response through its
two atoms. ``log_mgf_bound(λ)`` bounds log E_P[e^{λω}] (finite part) of the *continuous* PLD; it
is used only for the a-priori choice of L and n (``choose.py``). The certified bounds use the
moment-generating functions of the placed grid PMFs (``tilt.py``).
"""

from __future__ import annotations

import abc
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np
from scipy import special

from epscert.fft.gaussmix import SubsampledPair
from epscert.fft.grid import Grid, Rounding, place_atoms, place_pair
from epscert.fft.pairs import GridMasses
from epscert.names import Direction
from epscert.checks import check_float, check_int


class Mechanism(abc.ABC):
    """One step of a composition, with its worst-case PLD per direction."""

    kind: str = ""
    #: True when REMOVE and ADD give the same PLD (then one direction is computed).
    symmetric: bool = False

    @abc.abstractmethod
    def place(self, grid: Grid, rounding: Rounding, direction: Direction) -> GridMasses:
        """This mechanism's PLD on ``grid`` (REMOVE or ADD), as the UP or DOWN grid PMF."""

    @abc.abstractmethod
    def log_mgf_bound(self, lam: float, direction: Direction) -> float:
        """An upper bound on log E_P[e^{λω}; ω finite] of the continuous PLD (any real λ)."""

    @abc.abstractmethod
    def params(self) -> dict:
        """The parameters, for JSON and hashing."""

    @property
    def sigma_value(self) -> float:
        """σ for the results schema (NaN for mechanisms without one)."""
        return float("nan")

    def to_dict(self) -> dict:
        return {"mechanism": self.kind, **self.params()}


@dataclass(frozen=True)
class Gaussian(Mechanism):
    """Gaussian mechanism: ω ~ N(μ, 2μ) under P, μ = sensitivity²/(2σ²)."""

    sigma: float
    sensitivity: float = 1.0
    kind = "gaussian"
    symmetric = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", check_float("sigma", self.sigma, low=0.0, low_open=True))
        object.__setattr__(self, "sensitivity",
                           check_float("sensitivity", self.sensitivity, low=0.0, low_open=True))

    @property
    def mu(self) -> float:
        return self.sensitivity**2 / (2.0 * self.sigma**2)

    @property
    def sigma_value(self) -> float:
        return self.sigma / self.sensitivity

    def params(self) -> dict:
        return {"sigma": self.sigma, "sensitivity": self.sensitivity}

    def place(self, grid: Grid, rounding: Rounding, direction: Direction) -> GridMasses:
        """The pair N(s, σ²) against N(0, σ²) (the same for both directions)."""
        return place_pair(SubsampledPair(1.0, self.sigma, self.sensitivity, Direction.REMOVE), grid, rounding)

    def log_mgf_bound(self, lam: float, direction: Direction) -> float:
        """Exact: log E[e^{λω}] = λμ + λ²μ for ω ~ N(μ, 2μ)."""
        return lam * (lam + 1.0) * self.mu


@dataclass(frozen=True)
class SubsampledGaussian(Mechanism):
    """Poisson-subsampled Gaussian (rate q, noise multiplier σ, sensitivity 1)."""

    q: float
    sigma: float
    kind = "subsampled_gaussian"

    def __post_init__(self) -> None:
        object.__setattr__(self, "q", check_float("q", self.q, low=0.0, low_open=True, high=1.0, high_open=False))
        object.__setattr__(self, "sigma", check_float("sigma", self.sigma, low=0.0, low_open=True))

    @property
    def sigma_value(self) -> float:
        return self.sigma

    @property
    def symmetric(self) -> bool:  # type: ignore[override]
        return self.q == 1.0

    def params(self) -> dict:
        return {"q": self.q, "sigma": self.sigma}

    def place(self, grid: Grid, rounding: Rounding, direction: Direction) -> GridMasses:
        if direction not in (Direction.REMOVE, Direction.ADD):
            raise ValueError(f"direction must be remove or add for a placement, got direction={direction.value!r}")
        return place_pair(SubsampledPair(self.q, self.sigma, 1.0, direction), grid, rounding)

    def _log_a(self, alpha: int) -> float:
        """log E_Q[(P/Q)^α] for REMOVE, integer α >= 1: Σ_k C(α,k)(1-q)^{α-k} q^k e^{k(k-1)/(2σ²)}."""
        k = np.arange(alpha + 1, dtype=np.float64)
        log_binom = special.gammaln(alpha + 1) - special.gammaln(k + 1) - special.gammaln(alpha - k + 1)
        log_one_minus_q = math.log1p(-self.q) if self.q < 1.0 else -math.inf
        with np.errstate(invalid="ignore"):
            terms = (log_binom + (alpha - k) * log_one_minus_q + k * math.log(self.q)
                     + k * (k - 1) / (2.0 * self.sigma**2))
        terms = np.where(np.isnan(terms), -np.inf, terms)
        return float(special.logsumexp(terms))

    def _renyi(self, alpha: float) -> float:
        """D_⌈α⌉(mixture || N(0,σ²)) >= D_α (Rényi divergences increase with the order)."""
        a = max(2, math.ceil(alpha))
        return self._log_a(a) / (a - 1)

    def log_mgf_bound(self, lam: float, direction: Direction) -> float:
        """λ·D_{λ+1} for λ > 0, (μ-1)·D_μ for λ = -μ < -1, 0 for -1 <= λ <= 0.

        Both directions use the REMOVE divergence: for α >= 1, D_α(N(0)||mixture) <=
        D_α(mixture||N(0)) (Mironov, Talwar, Zhang 2019). A-priori use only.
        """
        if lam > 0:
            return lam * self._renyi(lam + 1.0)
        if lam >= -1.0:
            return 0.0
        return (-lam - 1.0) * self._renyi(-lam)


@dataclass(frozen=True)
class RandomizedResponse(Mechanism):
    """Randomized response: the true bit with probability p in [1/2, 1]."""

    p: float
    kind = "randomized_response"
    symmetric = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "p", check_float("p", self.p, low=0.5, low_open=False, high=1.0, high_open=False))

    def params(self) -> dict:
        return {"p": self.p}

    @property
    def loss(self) -> float:
        return math.log(self.p) - math.log1p(-self.p) if self.p < 1.0 else math.inf

    def place(self, grid: Grid, rounding: Rounding, direction: Direction) -> GridMasses:
        """Atoms ±a, a = log(p/(1-p)), with P-masses (p, 1-p) and Q-masses (1-p, p); p = 1: all at +∞."""
        if self.p == 1.0:
            return GridMasses(grid.dx, 0.0, 0, np.zeros(1), 1.0)
        a = self.loss
        return place_atoms(grid, rounding, [a, -a], [self.p, 1.0 - self.p], [1.0 - self.p, self.p])

    def log_mgf_bound(self, lam: float, direction: Direction) -> float:
        if self.p == 1.0:
            return -math.inf
        a = self.loss
        return float(np.logaddexp(math.log(self.p) + lam * a, math.log1p(-self.p) - lam * a))


MECHANISMS: dict[str, type[Mechanism]] = {
    cls.kind: cls for cls in (Gaussian, SubsampledGaussian, RandomizedResponse)}


def mechanism_from_dict(spec: Mapping, where: str = "mechanism") -> tuple[Mechanism, int]:
    """(mechanism, count) from ``{"mechanism": kind, <params>, "count": c}``; errors name the field."""
    if not isinstance(spec, Mapping):
        raise ValueError(f"{where} must be an object, got {where}={spec!r}")
    kind = spec.get("mechanism")
    if kind not in MECHANISMS:
        raise ValueError(f"{where}.mechanism must be one of {', '.join(MECHANISMS)}, got mechanism={kind!r}")
    cls = MECHANISMS[kind]
    allowed = set(cls.__dataclass_fields__) - {"kind"}
    unknown = set(spec) - allowed - {"mechanism", "count"}
    if unknown:
        raise ValueError(f"{where} has unknown fields {sorted(unknown)} for mechanism={kind!r}")
    try:
        count = check_int("count", spec.get("count", 1), 1)
        mech = cls(**{k: v for k, v in spec.items() if k in allowed})
    except (TypeError, ValueError) as err:
        raise ValueError(f"{where}: {err}") from None
    return mech, count


@dataclass(frozen=True)
class Schedule:
    """A non-adaptive composition: ``entries`` = ((mechanism, count), ...) in the order run."""

    entries: tuple[tuple[Mechanism, int], ...]
    _distinct: tuple = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        entries = tuple(tuple(e) for e in self.entries)
        if not entries:
            raise ValueError("entries must hold at least one (mechanism, count), got entries=()")
        checked = []
        for i, entry in enumerate(entries):
            if len(entry) != 2 or not isinstance(entry[0], Mechanism):
                raise ValueError(f"entries[{i}] must be (Mechanism, count), got entries[{i}]={entry!r}")
            checked.append((entry[0], check_int(f"entries[{i}].count", entry[1], 1)))
        object.__setattr__(self, "entries", tuple(checked))
        totals: dict[Mechanism, int] = {}
        for mech, count in checked:
            totals[mech] = totals.get(mech, 0) + count
        object.__setattr__(self, "_distinct", tuple(totals.items()))

    @classmethod
    def of(cls, entries: Iterable[tuple[Mechanism, int]]) -> "Schedule":
        return cls(tuple(entries))

    @property
    def steps(self) -> int:
        """Number of compositions k = Σ counts."""
        return sum(c for _, c in self.entries)

    @property
    def distinct(self) -> tuple[tuple[Mechanism, int], ...]:
        """Each distinct mechanism once with its total count (composition is commutative)."""
        return self._distinct

    @property
    def min_sigma(self) -> float:
        sigmas = [m.sigma_value for m, _ in self.entries if not math.isnan(m.sigma_value)]
        return min(sigmas) if sigmas else float("nan")

    def to_dict(self) -> dict:
        return {"mechanisms": [{**m.to_dict(), "count": c} for m, c in self.entries]}

    @classmethod
    def from_dict(cls, spec) -> "Schedule":
        """From ``{"mechanisms": [...]}`` or a bare list of mechanism objects."""
        items = spec.get("mechanisms") if isinstance(spec, Mapping) else spec
        if isinstance(spec, Mapping) and set(spec) - {"mechanisms"}:
            raise ValueError(f"schedule has unknown fields {sorted(set(spec) - {'mechanisms'})}")
        if not isinstance(items, list) or not items:
            raise ValueError(f"mechanisms must be a non-empty list, got mechanisms={items!r}")
        return cls(tuple(mechanism_from_dict(s, f"mechanisms[{i}]") for i, s in enumerate(items)))

    @classmethod
    def from_json(cls, path: str | Path) -> "Schedule":
        try:
            spec = json.loads(Path(path).read_text())
        except OSError as err:
            raise ValueError(f"schedule file cannot be read: {path} ({err.strerror})") from None
        except json.JSONDecodeError as err:
            raise ValueError(f"schedule is not valid JSON: {path} (line {err.lineno}: {err.msg})") from None
        return cls.from_dict(spec)
