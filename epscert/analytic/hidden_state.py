"""Last-iterate (hidden-state) Rényi-DP bound for noisy SGD (Ye & Shokri), and its (ε, δ).

Noisy SGD on shuffled-once mini-batches of size b (m = n/b >= 2 batches, K >= 1 epochs):

    θ <- θ - η·(1/b) Σ_{i∈B} ∇ℓ(θ; x_i) + N(0, 2ησ² I),

ℓ λ-strongly convex and β-smooth, per-example gradient sensitivity S_g, η < 2/(λ+β).
Only the last iterate θ_{mK} is released. Ye & Shokri's main theorem: for every α > 1,

    ε(α) <= ε₀^{⌊m/2⌋}(α) · [1 - c^{(K-1)(m - ⌊m/2⌋)}] / [1 - c^{m - ⌊m/2⌋}]
            + 1/(α-1) · log( (1/m) Σ_{j=1}^{m} e^{(α-1) ε₀^j(α)} ),

    ε₀^j(α) = α·a·w_j,  a = η S_g² / (4σ² b²),  w_j = c^{j-1} / Σ_{s=0}^{j-1} c^s = c^{j-1}(1-c)/(1-c^j),

with c = (1 - ηλ)² in [0, 1) (the averaged index j = m - j₀ runs over 1..m). Standard
composition, where every iterate is released, is K·α·a (each record is in one batch per
epoch; one Gaussian step has RDP α(ηS_g/b)²/(2·2ησ²) = α·a). Since w_j <= 1 and the first
term is at most α·a·(K-1), the hidden-state bound is never above composition.

Everything is computed in log space: log c = 2·log1p(-ηλ), 1 - c^j = -expm1(j·log c), so
long runs do not underflow, ηλ -> 0 tends to w_j = 1/j and ηλ -> 1 to w_1 = 1, w_{j>1} = 0.

RDP -> (ε, δ). ``Conversion.IMPROVED`` (Canonne, Kamath, Steinke 2020; Balle et al. 2020):

    ε = r(α) + log((α-1)/α) - (log δ + log α)/(α - 1),  equivalently
    δ = exp((α-1)(r(α) - ε + log(1 - 1/α)) - log α);

``Conversion.CLASSIC`` (Mironov 2017): ε = r(α) + log(1/δ)/(α-1). Each α gives a valid
(ε, δ); the minimum over the fixed grid ``ORDERS`` is reported, with the same conversion for
both bounds. Adjacency is replace-one (a record substituted), as in the theorem.
"""

from __future__ import annotations

import argparse
import enum
import hashlib
import json
import math
import sys
import time
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

from epscert._version import __version__
from epscert.checks import check_float, check_int
from epscert.schema import COLUMNS

#: Rényi orders α for the conversion: 1 + 10^-3 .. 1 + 10^6, geometric.
ORDERS = 1.0 + np.geomspace(1e-3, 1e6, 721)
SAMPLER = "noisy_sgd_last_iterate"
HIDDEN_BOUND = "hidden_state_ye_shokri"
COMPOSITION_BOUND = "rdp_standard_composition"


class Conversion(str, enum.Enum):
    IMPROVED = "improved"
    CLASSIC = "classic"


@dataclass(frozen=True)
class HiddenStateConfig:
    """Noisy SGD with only the last iterate released; validated against the theorem's assumptions."""

    dataset_size: int
    batch_size: int
    epochs: int
    step_size: float
    sigma: float
    strong_convexity: float
    smoothness: float
    grad_sensitivity: float

    def __post_init__(self) -> None:
        n = check_int("dataset_size", self.dataset_size, 2)
        b = check_int("batch_size", self.batch_size, 1)
        if n % b:
            raise ValueError(f"batch_size must divide dataset_size (n/b batches), got "
                             f"dataset_size={self.dataset_size!r}, batch_size={self.batch_size!r}")
        if n // b < 2:
            raise ValueError(f"dataset_size/batch_size must be >= 2, got dataset_size={self.dataset_size!r}, "
                             f"batch_size={self.batch_size!r}")
        fields = {
            "dataset_size": n, "batch_size": b, "epochs": check_int("epochs", self.epochs, 1),
            "step_size": check_float("step_size", self.step_size, low=0.0, low_open=True),
            "sigma": check_float("sigma", self.sigma, low=0.0, low_open=True),
            "strong_convexity": check_float("strong_convexity", self.strong_convexity, low=0.0, low_open=True),
            "smoothness": check_float("smoothness", self.smoothness, low=0.0, low_open=True),
            "grad_sensitivity": check_float("grad_sensitivity", self.grad_sensitivity, low=0.0, low_open=True),
        }
        if fields["smoothness"] < fields["strong_convexity"]:
            raise ValueError(f"smoothness must be >= strong_convexity, got smoothness={self.smoothness!r}, "
                             f"strong_convexity={self.strong_convexity!r}")
        limit = 2.0 / (fields["strong_convexity"] + fields["smoothness"])
        if fields["step_size"] >= limit:
            raise ValueError(f"step_size must be < 2/(strong_convexity + smoothness) = {limit:.6g}, "
                             f"got step_size={self.step_size!r}")
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    @property
    def batches(self) -> int:
        """m = n/b, the number of batches (steps) per epoch."""
        return self.dataset_size // self.batch_size

    @property
    def steps(self) -> int:
        return self.batches * self.epochs

    @property
    def log_contraction(self) -> float:
        """log c = 2·log(1 - ηλ) (-inf if 1 - ηλ rounds to 0)."""
        x = self.step_size * self.strong_convexity
        return 2.0 * math.log1p(-x) if x < 1.0 else -math.inf

    @property
    def unit_rdp(self) -> float:
        """a = η S_g² / (4σ² b²): RDP of one step at α, divided by α."""
        return self.step_size * self.grad_sensitivity**2 / (4.0 * self.sigma**2 * self.batch_size**2)

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def config_id(self) -> str:
        text = json.dumps({**self.to_dict(), "accountant": "hidden_state"}, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def log_weights(config: HiddenStateConfig) -> np.ndarray:
    """log w_j, j = 1..m, w_j = c^{j-1}(1-c)/(1-c^j) (limits 1/j at c = 1, [1, 0, ...] at c = 0)."""
    j = np.arange(1, config.batches + 1, dtype=np.float64)
    lc = config.log_contraction
    if lc == 0.0:  # ηλ below round-off: c = 1
        return -np.log(j)
    if lc == -math.inf:
        return np.where(j == 1, 0.0, -np.inf)
    return (j - 1.0) * lc + math.log(-math.expm1(lc)) - np.log(-np.expm1(j * lc))


def _log_ratio(config: HiddenStateConfig) -> float:
    """log [1 - c^{(K-1)g}] / [1 - c^g], g = m - ⌊m/2⌋ (-inf for K = 1)."""
    if config.epochs == 1:
        return -math.inf
    g = config.batches - config.batches // 2
    lc = config.log_contraction
    if lc == 0.0:
        return math.log(config.epochs - 1)
    if lc == -math.inf:
        return 0.0
    return math.log(-math.expm1((config.epochs - 1) * g * lc)) - math.log(-math.expm1(g * lc))


def hidden_state_rdp(config: HiddenStateConfig, orders=ORDERS) -> np.ndarray:
    """Ye & Shokri's ε(α) for each α > 1 (module docstring)."""
    alphas = _check_orders(orders)
    logw = log_weights(config)
    a = config.unit_rdp
    first = alphas * a * math.exp(logw[config.batches // 2 - 1] + _log_ratio(config))
    # (α-1) ε₀^j = (α-1) α a w_j; log-mean-exp over j as x_max + log1p(mean(expm1(x - x_max))),
    # which keeps its relative accuracy when all x are tiny (log(m) - log(m) would cancel)
    exps = np.outer((alphas - 1.0) * alphas * a, np.exp(logw))
    top = exps.max(axis=1)
    second = (top + np.log1p(np.mean(np.expm1(exps - top[:, None]), axis=1))) / (alphas - 1.0)
    return first + np.maximum(second, 0.0)


def composition_rdp(config: HiddenStateConfig, orders=ORDERS) -> np.ndarray:
    """Standard composition with every iterate released: K·α·a."""
    return config.epochs * _check_orders(orders) * config.unit_rdp


def _check_orders(orders) -> np.ndarray:
    alphas = np.atleast_1d(np.asarray(orders, dtype=np.float64))
    if alphas.size == 0 or not np.all(np.isfinite(alphas)) or np.any(alphas <= 1.0):
        raise ValueError(f"orders must be finite and > 1, got orders={orders!r}")
    return alphas


def rdp_to_epsilon(rdp: np.ndarray, orders, delta: float, conversion: Conversion | str = Conversion.IMPROVED
                   ) -> tuple[float, float]:
    """(min over α of ε(α, δ), the minimising α); ε clipped at 0."""
    delta = check_float("delta", delta, low=0.0, low_open=True, high=1.0)
    alphas = _check_orders(orders)
    if Conversion(conversion) is Conversion.IMPROVED:
        eps = rdp + np.log1p(-1.0 / alphas) - (math.log(delta) + np.log(alphas)) / (alphas - 1.0)
    else:
        eps = rdp + math.log(1.0 / delta) / (alphas - 1.0)
    i = int(np.argmin(eps))
    return max(float(eps[i]), 0.0), float(alphas[i])


def rdp_to_delta(rdp: np.ndarray, orders, epsilon: float, conversion: Conversion | str = Conversion.IMPROVED
                 ) -> float:
    """min over α of δ(α, ε), capped at 1."""
    epsilon = check_float("epsilon", epsilon, low=0.0, low_open=False)
    alphas = _check_orders(orders)
    if Conversion(conversion) is Conversion.IMPROVED:
        log_delta = (alphas - 1.0) * (rdp - epsilon + np.log1p(-1.0 / alphas)) - np.log(alphas)
    else:
        log_delta = (alphas - 1.0) * (rdp - epsilon)
    return float(math.exp(min(float(np.min(log_delta)), 0.0)))


@dataclass(frozen=True)
class EpsilonComparison:
    """ε at δ for the last iterate (hidden state) and for standard composition, with their α."""

    delta: float
    hidden: float
    composition: float
    alpha_hidden: float
    alpha_composition: float
    conversion: Conversion


def compare_at_delta(config: HiddenStateConfig, delta: float, orders=ORDERS,
                     conversion: Conversion | str = Conversion.IMPROVED) -> EpsilonComparison:
    """ε(δ) of both bounds, same α grid and same conversion."""
    conversion = Conversion(conversion)
    hidden, a_h = rdp_to_epsilon(hidden_state_rdp(config, orders), orders, delta, conversion)
    comp, a_c = rdp_to_epsilon(composition_rdp(config, orders), orders, delta, conversion)
    return EpsilonComparison(float(delta), hidden, comp, a_h, a_c, conversion)


def _row(config: HiddenStateConfig, hidden: bool, wall: float, **values) -> dict:
    row = {c: None for c in COLUMNS}
    row.update(config_id=config.config_id, sampler=SAMPLER, sigma=config.sigma, steps=config.steps,
               epochs=config.epochs, method="hidden_state_rdp" if hidden else "rdp_composition",
               direction="both", bound=HIDDEN_BOUND if hidden else COMPOSITION_BOUND, guarantee="upper_bound",
               wall_seconds=wall, epscert_version=__version__)
    if "quantity" in COLUMNS:
        row["quantity"] = "delta_at_epsilon"
    row.update(values)
    return {k: v for k, v in row.items() if k in COLUMNS}


def to_rows(config: HiddenStateConfig, *, deltas: Sequence[float] = (), epsilons: Sequence[float] = (),
            orders=ORDERS, conversion: Conversion | str = Conversion.IMPROVED) -> list[dict]:
    """Rows in the results schema: ε at each δ (quantity ``epsilon_at_delta``) and δ at each ε.

    direction is ``both``: the theorem's adjacency is replace-one, which covers either.
    """
    start = time.perf_counter()
    curves = {True: hidden_state_rdp(config, orders), False: composition_rdp(config, orders)}
    wall = time.perf_counter() - start
    rows = []
    for hidden, rdp in curves.items():
        for delta in deltas:
            eps, _ = rdp_to_epsilon(rdp, orders, delta, conversion)
            rows.append(_row(config, hidden, wall, quantity="epsilon_at_delta", target_delta=float(delta),
                             delta=float(delta), epsilon=eps, epsilon_upper=eps))
        for eps in epsilons:
            d = rdp_to_delta(rdp, orders, eps, conversion)
            rows.append(_row(config, hidden, wall, epsilon=float(eps), delta=d, delta_upper=d))
    return rows


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        raise ValueError(message)


def hidden_state_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="epscert hidden-state",
                description="Last-iterate Rényi-DP bound of noisy SGD (Ye & Shokri) vs standard composition.")
    p.add_argument("--dataset-size", type=int, required=True, help="n")
    p.add_argument("--batch-size", type=int, required=True, help="b (must divide n)")
    p.add_argument("--epochs", default="1,10,100", help="K, comma-separated for a sweep (default 1,10,100)")
    p.add_argument("--step-size", type=float, required=True, help="η < 2/(λ+β)")
    p.add_argument("--sigma", type=float, required=True, help="noise N(0, 2ησ²I) per step")
    p.add_argument("--strong-convexity", type=float, required=True, help="λ")
    p.add_argument("--smoothness", type=float, required=True, help="β >= λ")
    p.add_argument("--grad-sensitivity", type=float, required=True, help="S_g")
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--conversion", default="improved", choices=[c.value for c in Conversion])
    return p


def cli_hidden_state(argv: Sequence[str] | None = None) -> int:
    """``epscert hidden-state``: table of ε(δ) per K; 0 on success, 2 on bad input (one line)."""
    try:
        try:
            args = hidden_state_parser().parse_args(argv)
        except SystemExit as stop:  # --help
            return int(stop.code or 0)
        try:
            epochs = [int(e) for e in args.epochs.split(",") if e.strip()]
        except ValueError:
            raise ValueError(f"--epochs must be comma-separated integers, got --epochs={args.epochs!r}") from None
        if not epochs:
            raise ValueError(f"--epochs must hold at least one integer, got --epochs={args.epochs!r}")
        configs = [HiddenStateConfig(args.dataset_size, args.batch_size, k, args.step_size, args.sigma,
                                     args.strong_convexity, args.smoothness, args.grad_sensitivity) for k in epochs]
        results = [compare_at_delta(c, args.delta, conversion=args.conversion) for c in configs]
    except ValueError as err:
        print(f"epscert hidden-state: error: {err}", file=sys.stderr)
        return 2
    c0 = configs[0]
    print(f"# noisy SGD last iterate (Ye & Shokri): n={c0.dataset_size}, b={c0.batch_size}, "
          f"η={c0.step_size:g}, σ={c0.sigma:g}, λ={c0.strong_convexity:g}, β={c0.smoothness:g}, "
          f"S_g={c0.grad_sensitivity:g}, δ={args.delta:g}, {args.conversion} RDP conversion")
    print("| epochs K | steps | ε hidden state | ε composition | α hidden | α composition |")
    print("|---|---|---|---|---|---|")
    for c, r in zip(configs, results):
        print(f"| {c.epochs} | {c.steps} | {r.hidden:.4f} | {r.composition:.4f} | "
              f"{r.alpha_hidden:.4g} | {r.alpha_composition:.4g} |")
    return 0
