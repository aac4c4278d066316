"""From merged sums or analytic values to result rows in the results schema.

Monte Carlo rows (SPEC §3): delta = s·p̂, delta_upper = s·UCB_β(p̂) (KL–Chernoff),
std_error = s·sd/√m. With ``direction='both'`` each direction runs at β/2 (its rows say
error_prob = β/2) and the 'both' row takes the max of the two, at β by the union bound.
"""

from __future__ import annotations

import math

import numpy as np

from epscert.montecarlo import accumulator as acc_mod
from epscert.montecarlo.backends import split_tags
from epscert._version import __version__
from epscert.analytic.composed import composed_lower_bound
from epscert.analytic.cube import cube_lower_bound
from epscert.analytic.deterministic import deterministic_delta
from epscert.analytic.poisson import poisson_pld_delta, poisson_rdp_delta
from epscert.bounds.kl import kl_ucb, standard_error
from epscert.params import CertifyConfig, Direction, Method, Sampler
from epscert.montecarlo.samplers import loss_sampler
from epscert.analytic.truncation import config_penalty

MC_BOUND_NAME = "kl_chernoff"


def base_row(config: CertifyConfig, method: Method, direction: Direction, eps: float, wall: float) -> dict:
    """The columns every row of one (configuration, method, direction, ε) shares."""
    return {
        "config_id": config.config_id, "sampler": config.sampler.value, "sigma": config.sigma,
        "steps": config.steps, "epochs": config.epochs, "method": method.value,
        "direction": direction.value, "epsilon": float(eps), "delta": 0.0, "delta_upper": None,
        "delta_lower": None, "std_error": None, "samples": None, "error_prob": None,
        "seed": None, "orders": None, "scale": None, "bound": None, "guarantee": "estimate",
        "wall_seconds": float(wall), "epscert_version": __version__,
        "dataset_size": config.dataset_size, "max_batch_size": config.max_batch_size,
        "backend": None, "device": None,
    }


def apply_truncation(config: CertifyConfig, rows: list[dict]) -> list[dict]:
    """Add the truncated-batch penalty (1 + e^ε)η to every δ that is an estimate or upper bound.

    Lower bounds of the untruncated mechanism lose the same amount (the coupling works both
    ways), clamped at 0. The penalty goes into its own column (SPEC §9, epscert.analytic.truncation).
    """
    if not config.truncated:
        return rows
    for row in rows:
        pen = config_penalty(config, row["epsilon"])
        row["truncation_penalty"] = pen
        if row["guarantee"] != "lower_bound":
            row["delta"] = min(1.0, row["delta"] + pen)
        if row["delta_upper"] is not None:
            row["delta_upper"] = min(1.0, row["delta_upper"] + pen)
        if row["delta_lower"] is not None:
            row["delta_lower"] = max(0.0, row["delta_lower"] - pen)
        if row["guarantee"] == "lower_bound":
            row["delta"] = row["delta_lower"]
        if row["guarantee"] == "exact":  # exact for the untruncated mechanism only
            row["guarantee"] = "upper_bound"
            row["delta_lower"] = None
    return rows


def mc_rows(config: CertifyConfig, method: Method, acc: acc_mod.Accumulator, wall_seconds: float) -> list[dict]:
    """Rows for a merged Monte Carlo accumulator: one per direction and ε, plus 'both'."""
    sampler = loss_sampler(config, method)
    parts = config.direction.parts()
    beta = config.error_prob / len(parts)
    backend, device = split_tags(acc.tags)
    rows: list[dict] = []
    per_dir: dict[Direction, list[dict]] = {}
    for direction in parts:
        sums = acc[direction]
        scale = math.exp(sampler.log_scale(direction))
        per_dir[direction] = []
        ucbs = monotone_ucbs([sums.mean(i) for i in range(len(config.epsilons))], sums.count, beta, scale)
        for i, eps in enumerate(config.epsilons):
            mean = sums.mean(i)
            row = base_row(config, method, direction, eps, wall_seconds)
            row.update(
                delta=scale * mean,
                delta_upper=ucbs[i],
                std_error=standard_error(mean, sums.mean_sq(i), sums.count, scale),
                samples=sums.count, error_prob=beta, seed=str(config.seed),
                orders=config.orders if method.uses_order_stats else None,
                scale=scale, bound=MC_BOUND_NAME, guarantee=sampler.guarantee,
                backend=backend, device=device,
            )
            per_dir[direction].append(row)
        rows.extend(per_dir[direction])
    if config.direction is Direction.BOTH:
        for i, eps in enumerate(config.epsilons):
            worst = max((per_dir[d][i] for d in parts), key=lambda r: (r["delta_upper"], r["delta"]))
            row = dict(worst)
            row.update(direction=Direction.BOTH.value, error_prob=config.error_prob,
                       delta=max(per_dir[d][i]["delta"] for d in parts),
                       delta_upper=max(per_dir[d][i]["delta_upper"] for d in parts))
            rows.append(row)
    return apply_truncation(config, rows)


def monotone_ucbs(means: list[float], count: int, beta: float, scale: float) -> list[float]:
    """KL–Chernoff UCBs over an ascending ε grid, made non-increasing in ε.

    One sample set serves the whole grid, so p̂(ε) is non-increasing and so is the exact
    UCB (SPEC §8). The running max from the right removes any last-ulp wobble of the
    numerical solution; it can only raise a bound, so each stays valid at β, and the
    curve is monotone, which the ε(δ) inversion relies on (no union bound over the grid).
    """
    ucbs = [kl_ucb(scale * m, count, beta, scale=scale) for m in means]
    for i in range(len(ucbs) - 2, -1, -1):
        ucbs[i] = max(ucbs[i], ucbs[i + 1])
    return ucbs


#: dp_accounting overflows e^ε beyond this; δ is non-increasing, so upper bounds at larger ε
#: use the value here, and lower bounds there are reported as 0 (always a valid lower bound).
MAX_ANALYTIC_EPSILON = 700.0


def analytic_values(config: CertifyConfig, method: Method, direction: Direction) -> tuple[np.ndarray, str, str]:
    """(values per ε in [0, 1], guarantee, bound name) of an analytic method for one direction."""
    vals, guarantee, bound = _analytic_values(config, method, direction)
    vals = np.clip(np.asarray(vals, dtype=np.float64), 0.0, 1.0)  # dp_accounting's float error
    if guarantee == "exact" and max(config.epsilons) > MAX_ANALYTIC_EPSILON:
        guarantee = "upper_bound"  # evaluated at ε = 700 beyond it: δ is non-increasing
    if guarantee == "lower_bound":
        vals = np.where(np.asarray(config.epsilons) > MAX_ANALYTIC_EPSILON, 0.0, vals)
    return vals, guarantee, bound


def _analytic_values(config: CertifyConfig, method: Method, direction: Direction) -> tuple[np.ndarray, str, str]:
    s, T, E = config.sigma, config.steps, config.epochs
    eps = np.minimum(np.asarray(config.epsilons), MAX_ANALYTIC_EPSILON)
    if method is Method.EXACT:
        return deterministic_delta(s, E, eps), "exact", "gaussian_closed_form"
    if method in (Method.PLD_UPPER, Method.PLD_LOWER):
        upper = method is Method.PLD_UPPER
        vals = poisson_pld_delta(s, T, E, eps, direction, config.pld_discretization, pessimistic=upper)
        return vals, ("upper_bound" if upper else "lower_bound"), f"pld_{'pessimistic' if upper else 'optimistic'}"
    if method is Method.RDP_UPPER:
        return poisson_rdp_delta(s, T, E, eps), "upper_bound", "rdp"
    if method is Method.CUBE_LOWER_BOUND:
        pair = "balls_and_bins" if config.sampler is Sampler.BALLS_AND_BINS else "shuffle"
        sigma = s / math.sqrt(E) if config.sampler is Sampler.SHUFFLE_PERSISTENT else s
        epochs = 1 if config.sampler is Sampler.SHUFFLE_PERSISTENT else E
        if epochs == 1:
            return cube_lower_bound(sigma, T, eps, pair, direction), "lower_bound", "cube"
        vals = composed_lower_bound(sigma, T, epochs, eps, pair, direction, config.pld_discretization)
        return vals, "lower_bound", "cube_sliced_pld_composition"
    raise ValueError(f"method={method.value!r} is not an analytic method")


def row_count(config: CertifyConfig, method: Method) -> int:
    """Rows :func:`mc_rows` / :func:`analytic_rows` return for one method of ``config``.

    One per direction and ε, plus the 'both' rows when the direction is 'both'; RDP and
    exact: only the 'both' rows (one per ε).
    """
    n_eps = len(config.epsilons)
    if method in (Method.RDP_UPPER, Method.EXACT):
        return n_eps
    return n_eps * (len(config.direction.parts()) + (config.direction is Direction.BOTH))


def analytic_rows(config: CertifyConfig, method: Method, wall_seconds: float = 0.0) -> list[dict]:
    """Rows of an analytic method, per direction and ε (RDP and exact: 'both' only)."""
    if method in (Method.RDP_UPPER, Method.EXACT):
        directions = (Direction.BOTH,)  # RDP bounds both at once; the Gaussian pair is symmetric
    else:
        directions = config.direction.parts() + ((Direction.BOTH,) if config.direction is Direction.BOTH else ())
    rows = []
    for direction in directions:
        vals, guarantee, bound = analytic_values(config, method, direction)
        for eps, val in zip(config.epsilons, vals.tolist()):
            row = base_row(config, method, direction, eps, wall_seconds)
            row.update(delta=float(val), guarantee=guarantee, bound=bound)
            if guarantee in ("exact", "upper_bound"):
                row["delta_upper"] = float(val)
            if guarantee in ("exact", "lower_bound"):
                row["delta_lower"] = float(val)
            rows.append(row)
    return apply_truncation(config, rows)
