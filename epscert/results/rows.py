"""From merged sums or analytic values to result rows in the results schema.

Monte Carlo rows (SPEC §3): delta = s·p̂, delta_upper = s·UCB_β(p̂) (KL–Chernoff),
delta_lower = s·LCB_β(p̂) where the values are unbiased (DP-SGD's naive, importance; the order-statistic
variants' mean is an upper bound's mean: no LCB, see ``Method.mean_is_unbiased``),
std_error = s·sd/√m. With ``direction='both'`` each direction runs at β/2 (its rows say
error_prob = β/2) and the 'both' row takes the max of the two, at β by the union bound.
"""

from __future__ import annotations

import math

import numpy as np

from epscert.allocation import bracket_for
from epscert.matrix.bracket import matrix_bounds
from epscert.montecarlo import accumulator as acc_mod
from epscert.montecarlo.backends import split_tags
from epscert._version import __version__
from epscert.analytic.composed import composed_lower_bounds
from epscert.analytic.cube import cube_lower_bound
from epscert.analytic.deterministic import deterministic_bracket, deterministic_delta
from epscert.analytic.poisson import poisson_pld_bounds, poisson_rdp_delta
from epscert.analytic.resolution import UNDERFLOW_FLOOR
from epscert.bounds.empirical_bernstein import eb_ucb
from epscert.bounds.kl import kl_lcb, kl_ucb, standard_error
from epscert.bounds.monotone import monotone_lower, monotone_upper
from epscert.bounds.truncated_lcb import LEVELS, truncated_lcbs
from epscert.dpsgd.conditional import FLOAT_REL, conditional_sampler
from epscert.matrix.values import FLOAT_REL as MATRIX_FLOAT_REL
from epscert.matrix.add_decoupled import FALLBACK_FLOPS, MAX_FLOPS, add_bound, pair_edges
from epscert.matrix.block_law import add_law_bound, applies as block_law_applies, remove_bound
from epscert.dpsgd.conditional_ucb import add_ucb, order_stats_domination, remove_tails, remove_ucb
from epscert.config import BRACKET_METHODS, CertifyConfig, Direction, Method, Sampler, canonical_method
from epscert.config.samplers import loss_sampler
from epscert.config.samplers import matrix_pair
from epscert.config.samplers import uses_values, value_sampler
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
        "batch_size": config.batch_size, "backend": None, "device": None,
        **matrix_fields(config),
    }


def matrix_fields(config: CertifyConfig) -> dict:
    """mechanism / strategy / iterations columns: set for a matrix mechanism, null for DP-SGD."""
    if config.strategy is None:
        return {"mechanism": None, "strategy": None, "iterations": None}
    return {"mechanism": "matrix", "strategy": config.strategy.describe(), "iterations": config.strategy.iterations}


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


def sampled_fields(config: CertifyConfig, method: Method, sums, i: int, scale: float, beta: float,
                   tags: tuple[str, ...]) -> dict:
    """The columns every Monte Carlo row shares at grid point i: the estimate s·p̂, its standard
    error, the sample count, β, seed, orders, scale and the backend/device that drew it."""
    backend, device = split_tags(tags)
    mean = sums.mean(i)
    return dict(delta=scale * mean, std_error=standard_error(mean, sums.mean_sq(i), sums.count, scale),
                samples=sums.count, error_prob=beta, seed=str(config.seed),
                orders=config.orders if method.uses_order_stats else None, scale=scale,
                backend=backend, device=device)


def mc_rows(config: CertifyConfig, method: Method, acc: acc_mod.Accumulator, wall_seconds: float) -> list[dict]:
    """Rows for a merged Monte Carlo accumulator: one per direction and ε, plus 'both'."""
    if config.strategy is not None and uses_values(config, method):
        return matrix_value_rows(config, method, acc, wall_seconds)
    if method.is_conditional:
        return conditional_rows(config, method, acc, wall_seconds)
    sampler = loss_sampler(config, method)
    parts = config.direction.parts()
    beta = config.error_prob / len(parts)
    rows: list[dict] = []
    per_dir: dict[Direction, list[dict]] = {}
    for direction in parts:
        sums = acc[direction]
        scale = math.exp(sampler.log_scale(direction))
        per_dir[direction] = []
        means = [sums.mean(i) for i in range(len(config.epsilons))]
        ucbs = monotone_ucbs(means, sums.count, beta, scale)
        lcbs = [None] * len(means)
        # DP-SGD's pairs only: a matrix mechanism's naive rows keep their lower side from its deterministic
        # bounds (its two-sided answer is chosen in epscert.inverse.best; issue 35 keeps it unchanged here)
        if (method.mean_is_unbiased and sampler.guarantee == "mc_upper_confidence" and sums.count
                and config.strategy is None):
            lcbs = monotone_lcbs(means, sums.count, beta, scale)
        for i, eps in enumerate(config.epsilons):
            row = base_row(config, method, direction, eps, wall_seconds)
            row.update(sampled_fields(config, method, sums, i, scale, beta, acc.tags), delta_upper=ucbs[i],
                       delta_lower=lcbs[i], bound=MC_BOUND_NAME, guarantee=sampler.guarantee)
            per_dir[direction].append(row)
        rows.extend(per_dir[direction])
    rows.extend(both_rows(config, per_dir))
    return apply_truncation(config, rows)


def both_rows(config: CertifyConfig, per_dir: dict[Direction, list[dict]]) -> list[dict]:
    """The 'both' rows (δ = max over directions) when both directions ran, else none: δ, the UCB
    and the LCB are the maxima over the directions (each direction's statement at its β share,
    so the pair holds at β); no LCB unless every direction has one."""
    if config.direction is not Direction.BOTH:
        return []
    parts = config.direction.parts()
    out = []
    for i in range(len(config.epsilons)):
        per = [per_dir[d][i] for d in parts]
        lowers = [r["delta_lower"] for r in per]
        row = dict(max(per, key=lambda r: (r["delta_upper"], r["delta"])))
        row.update(direction=Direction.BOTH.value, error_prob=config.error_prob,
                   delta=max(r["delta"] for r in per), delta_upper=max(r["delta_upper"] for r in per),
                   delta_lower=None if None in lowers else max(lowers))
        out.append(row)
    return out


CONDITIONAL_BOUND_NAME = "levels_kl_eb+lognormal_tails+truncated_kl_lcb"


def conditional_ucbs(config: CertifyConfig, sampler, direction: Direction, sums, truncated: np.ndarray,
                     ranges: list[float], beta: float) -> list[float]:
    """Per-ε UCBs of one direction (epscert.dpsgd.conditional_ucb), each valid at ``beta``;
    ``truncated`` holds the means of min(Y, τ_k), shape (|ε|, LEVELS)."""
    if direction is Direction.ADD:
        scale = math.exp(sampler.log_scale(direction))
        return [add_ucb(sums.count, sums.mean(i), sums.mean_sq(i), scale, sampler.sigma, sampler.steps, eps,
                        sampler.b_add, beta, FLOAT_REL) for i, eps in enumerate(config.epsilons)]
    rho = order_stats_domination(sampler.ranks if sampler.order_stats else None, sampler.steps - 1)
    out = []
    for i, eps in enumerate(config.epsilons):
        taus, tails = remove_tails(sampler.sigma, sampler.steps, eps, ranges[i], rho)
        out.append(remove_ucb(sums.count, truncated[i], sums.mean_sq(i), taus, tails, beta, FLOAT_REL)[0])
    return out


def conditional_rows(config: CertifyConfig, method: Method, acc: acc_mod.Accumulator,
                     wall_seconds: float) -> list[dict]:
    """Rows of the conditional estimator (epscert.dpsgd.conditional): δ = s·E[Y], Y in [0, B(ε)].

    delta_upper: the certified UCB of epscert.dpsgd.conditional_ucb (REMOVE: truncation
    levels with KL–Chernoff and empirical Bernstein plus an analytic tail; ADD: KL, empirical
    Bernstein and an analytic bound), valid at β per direction, made non-increasing in ε as in
    :func:`monotone_ucbs`. delta_lower (plain variant only): the truncated KL lower bound of
    epscert.bounds.truncated_lcb, a separate statement at the same β. The order-statistics
    variant's values are raised ones (pessimistic), so it has no lower bound.
    """
    sampler = conditional_sampler(config, method)
    parts = config.direction.parts()
    beta = config.error_prob / len(parts)
    n_eps = len(config.epsilons)
    rows: list[dict] = []
    per_dir: dict[Direction, list[dict]] = {}
    for direction in parts:
        sums = acc[direction]
        scale = math.exp(sampler.log_scale(direction))
        ranges = sampler.value_range(direction, config.epsilons).tolist()
        truncated = np.array([[sums.mean_extra(i * LEVELS + k) for k in range(LEVELS)] for i in range(n_eps)])
        ucbs = raised_from_the_right(conditional_ucbs(config, sampler, direction, sums, truncated, ranges, beta)
                                     if sums.count else [1.0] * n_eps)
        per_dir[direction] = []
        lowers = (truncated_lcbs(truncated, ranges, sums.count, beta, FLOAT_REL)
                  if not method.uses_order_stats and sums.count else None)
        for i, eps in enumerate(config.epsilons):
            lower = None if lowers is None else scale * float(lowers[i])
            row = base_row(config, method, direction, eps, wall_seconds)
            row.update(sampled_fields(config, method, sums, i, scale, beta, acc.tags),
                       delta_upper=min(1.0, ucbs[i]), delta_lower=lower,
                       bound=CONDITIONAL_BOUND_NAME, guarantee=sampler.guarantee)
            per_dir[direction].append(row)
        rows.extend(per_dir[direction])
    rows.extend(both_rows(config, per_dir))
    return apply_truncation(config, rows)


MATRIX_VALUE_BOUND_NAME = "kl_eb_at_range+truncated_kl_lcb"


def matrix_value_rows(config: CertifyConfig, method: Method, acc: acc_mod.Accumulator,
                      wall_seconds: float) -> list[dict]:
    """Rows of the matrix mechanism's value estimators (epscert.matrix.values): δ = E[Y],
    0 <= Y <= B(ε) (the proven range of each estimator).

    delta_upper: the smaller of KL–Chernoff and empirical Bernstein at scale B (β/2 each), made
    non-increasing in ε; delta_lower: the truncated KL lower bound (epscert.bounds.truncated_lcb) at β.
    Computed values are within FLOAT_REL of the exact ones: means are raised (UCB) or lowered (LCB) by it.
    Where the computed law of the draws may move the mean from δ by an additive amount (the sampler's
    ``value_slack``: the tilted estimator's tuple law), the UCB is raised and the LCB lowered by it.
    ADD, where G is banded in the natural order (one participation): the UCB is the smaller of that one and
    the decoupled-blocks Chernoff bound (:mod:`epscert.matrix.add_decoupled`), each at half the ADD β; the
    second is formed only where the first exceeds the REMOVE UCB at some ε (elsewhere it cannot move 'both').
    REMOVE, where the block-law bound applies (:func:`epscert.matrix.block_law.applies`, deterministic: G banded with
    blocks of ``MIN_SIZE`` to ``MAX_SIZE`` bins and a light moment tail): the smaller of that one and the block-law
    bound, each at half the REMOVE β. ADD where it applies too: the line's UCB at β/2, the decoupled and the
    block-law ADD bound (:class:`epscert.matrix.block_law.BlockLawAddBound`) at β/4 each: the block-law one where
    the line's UCB could bind, then the decoupled one where the smaller of those two still could (:func:`could_bind`),
    its draws capped at ``FALLBACK_FLOPS`` there (the block law's is the tighter where both were measured).
    A bound not formed keeps its share of β unspent, so all hold at once w.p. >= 1 - β whichever are formed.
    """
    sampler = value_sampler(config, method)
    parts = config.direction.parts()
    beta = config.error_prob / len(parts)
    n_eps = len(config.epsilons)
    rows: list[dict] = []
    per_dir: dict[Direction, list[dict]] = {}
    for direction in parts:
        sums = acc[direction]
        ranges = sampler.value_range(direction, config.epsilons).tolist()
        slack = sampler.value_slack(direction, config.epsilons).tolist()
        truncated = np.array([[sums.mean_extra(i * LEVELS + k) for k in range(LEVELS)] for i in range(n_eps)])
        ucbs = [1.0] * n_eps
        # ADD where G is banded: the line's UCB at β/2 and the decoupled bound at β/2 (both hold at once w.p.
        # >= 1 - β whether or not the second is formed); it is formed only where the line's UCB could bind.
        # REMOVE where the block-law bound applies (deterministic: epscert.matrix.block_law.applies): the values'
        # UCB at β/2 and the block-law bound at β/2, always formed there
        split = direction is Direction.ADD and pair_edges(matrix_pair(config)) is not None
        split_remove = direction is Direction.REMOVE and block_law_applies(matrix_pair(config))
        # ADD where the block law applies too: the line at β/2, the decoupled and the block-law bound at β/4 each
        split_add_law = split and block_law_applies(matrix_pair(config))
        line_beta = beta / 2.0 if split or split_remove else beta
        side_beta = beta / 4.0 if split_add_law else beta / 2.0
        if sums.count:
            ucbs = raised_from_the_right([range_ucb(sums.mean(i), sums.mean_sq(i), sums.count, ranges[i], line_beta)
                                          + slack[i] for i in range(n_eps)])
        formed = False  # whether the decoupled bound entered the UCB (the row's bound name says so)
        law_formed = False  # whether a block-law bound did (REMOVE, or ADD)
        if split_remove:
            law_bound = remove_bound(matrix_pair(config), law_samples(config), law_seed(config), law_betas(beta)[0])
            if law_bound is not None:  # None: it failed after applying (the values' bound alone, still at β/2)
                ucbs = raised_from_the_right(np.minimum(ucbs, law_bound.upper(config.epsilons)).tolist())
                law_formed = True
        if split_add_law and could_bind(ucbs, per_dir):
            add_law = add_law_bound(matrix_pair(config), law_samples(config), law_seed(config), law_betas(beta)[1])
            if add_law is not None:  # None: it failed after applying (the others stand, at their shares)
                ucbs = raised_from_the_right(np.minimum(ucbs, add_law.upper(config.epsilons)).tolist())
                law_formed = True
        # the decoupled bound after the block-law ADD bound (which reuses the REMOVE law's draws; the decoupled one
        # draws its own, 25 to 52 CPU s at n = b = 10^4, where it is the looser): only where ADD could still bind
        if split and could_bind(ucbs, per_dir):
            decoupled = add_bound(matrix_pair(config), law_samples(config), law_seed(config), side_beta,
                                  FALLBACK_FLOPS if split_add_law else MAX_FLOPS)
            if decoupled is not None:  # None: G singular (the line's bound alone, still at its share of β)
                ucbs = raised_from_the_right(np.minimum(ucbs, decoupled.upper(config.epsilons)).tolist())
                formed = True
        per_dir[direction] = []
        lowers = truncated_lcbs(truncated, ranges, sums.count, beta, MATRIX_FLOAT_REL) if sums.count else None
        for i, eps in enumerate(config.epsilons):
            lower = None if lowers is None else float(lowers[i])
            if lower is not None and slack[i]:
                lower = max(0.0, lower - slack[i])
            row = base_row(config, method, direction, eps, wall_seconds)
            row.update(sampled_fields(config, method, sums, i, 1.0, beta, acc.tags),
                       delta_upper=min(1.0, ucbs[i]), delta_lower=lower,
                       bound=MATRIX_VALUE_BOUND_NAME + ("+decoupled_chernoff" if formed else "")
                       + ("+block_law" if law_formed else ""),
                       guarantee=sampler.guarantee)
            per_dir[direction].append(row)
        rows.extend(per_dir[direction])
    rows.extend(both_rows(config, per_dir))
    return rows


def could_bind(add_ucbs, per_dir: dict) -> bool:
    """Whether an ADD UCB curve could move the 'both' rows: some ε where it is above the REMOVE rows' UCB (or no
    REMOVE rows). Where it is at or below them everywhere, 'both' (the larger) is REMOVE's whatever ADD's bound."""
    if Direction.REMOVE not in per_dir:
        return True
    return any(min(1.0, u) > r["delta_upper"] for u, r in zip(add_ucbs, per_dir[Direction.REMOVE]))


def law_seed(config: CertifyConfig) -> int:
    """The seed of the block-law and decoupled bounds' draws (``config.law_seed``, else ``config.seed``). Each of
    those bounds holds for every ε at once, from streams of their own (independent of the values'), so the searches
    of an ε(δ) inversion may share the user's: the grid they place then depends on those draws, which leaves the
    values' bounds at the grid's points valid (their draws are independent of it) and these bounds too (every ε)."""
    return config.seed if config.law_seed is None else config.law_seed


def law_samples(config: CertifyConfig) -> int:
    """The sample count that sizes the block-law and decoupled bounds' draws (``config.law_samples``, else
    ``config.samples``): an inversion's search passes draw fewer values but keep these bounds at the run's count, so
    they are the very bounds of its certifying pass (each holds for every ε at once, on streams of its own)."""
    return config.samples if config.law_samples is None else config.law_samples


def law_betas(beta: float) -> tuple[float, float]:
    """The block-law bounds' shares of one direction's β in :func:`matrix_value_rows` where the block law applies
    (fixed before any draw, formed or not): REMOVE β/2 (the values' UCB the other half), ADD β/4 (the line's UCB
    β/2 and the decoupled bound β/4 the rest). One place for the rows and :func:`matrix_law_upper`."""
    return beta / 2.0, beta / 4.0


def matrix_law_upper(config: CertifyConfig, method: Method, epsilons) -> np.ndarray | None:
    """Upper bounds on δ(ε) of ``config.direction`` from the block-law bounds alone, at any ε, or None.

    The same objects and shares of β as :func:`matrix_value_rows` gives them (REMOVE: the block-law bound at half
    the REMOVE β; ADD: the block-law ADD bound at a quarter of the ADD β), so no new β is spent. Each holds for every
    ε at once (its survival bounds hold jointly, with probability >= 1 - its β; the rest is deterministic), so it
    may be evaluated at ε chosen after the run's samples were seen: :func:`epscert.inverse.epsilon_at_delta`
    refines an ε(δ) answer between two points of its fixed grid with it. 'both' is the larger of the two
    directions' bounds. None where ``method`` is not a value estimator of a strategy (no β was set aside), the
    block law does not apply, or a bound was not formed."""
    if config.strategy is None or not uses_values(config, method):
        return None
    pair = matrix_pair(config)
    if not block_law_applies(pair):
        return None
    parts = config.direction.parts()
    beta = config.error_prob / len(parts)
    eps = np.asarray(epsilons, dtype=float)
    out = np.zeros(eps.size)
    for direction in parts:
        if direction is Direction.REMOVE:
            bound = remove_bound(pair, law_samples(config), law_seed(config), law_betas(beta)[0])
        else:
            bound = (add_law_bound(pair, law_samples(config), law_seed(config), law_betas(beta)[1])
                     if pair_edges(pair) is not None else None)
        if bound is None:
            return None
        out = np.maximum(out, bound.upper(eps))
    return out


def range_ucb(mean: float, mean_sq: float, count: int, scale: float, beta: float) -> float:
    """min(KL–Chernoff, empirical Bernstein) at scale B, each at β/2, for values in [0, B], with the
    means raised by MATRIX_FLOAT_REL (computed values are within it of the exact ones)."""
    up = 1.0 + MATRIX_FLOAT_REL
    m_hi, m_lo = mean * up, mean * (1.0 - MATRIX_FLOAT_REL)
    var = max(mean_sq * up * up * count - count * m_lo * m_lo, 0.0) / (count - 1) if count > 1 else math.inf
    return min(kl_ucb(m_hi, count, beta / 2.0, scale=scale), eb_ucb(m_hi, var, count, beta / 2.0, scale=scale))


def monotone_ucbs(means: list[float], count: int, beta: float, scale: float) -> list[float]:
    """KL–Chernoff UCBs over an ascending ε grid, made non-increasing in ε.

    One sample set serves the whole grid, so p̂(ε) is non-increasing and so is the exact
    UCB (SPEC §8). The running max from the right removes any last-ulp wobble of the
    numerical solution; it can only raise a bound, so each stays valid at β, and the
    curve is monotone, which the ε(δ) inversion relies on (no union bound over the grid).
    """
    return raised_from_the_right([kl_ucb(scale * m, count, beta, scale=scale) for m in means])


def monotone_lcbs(means: list[float], count: int, beta: float, scale: float) -> list[float]:
    """KL–Chernoff lower confidence bounds over an ascending ε grid, made non-increasing in ε.

    For the estimators whose values are unbiased (``Method.mean_is_unbiased``: naive, importance),
    values in [0, s] with mean δ(ε): Chernoff–Hoeffding's upper tail gives Pr[δ(ε) < LCB_β] <= β
    (:func:`epscert.bounds.kl.kl_lcb`), a separate statement from the UCB at the same β (each side at
    β, the pair at 2β). The order-statistic variants' values are raised ones, whose mean is above
    δ(ε): their LCB would bound the raised mean, not δ, so they get none. One sample set serves the
    grid, so p̂ and the exact LCB are non-increasing in ε; the running minimum from the left only
    removes a last-ulp wobble, and it can only lower a bound (each keeps its β).
    """
    out = [kl_lcb(scale * m, count, beta, scale=scale) for m in means]
    for i in range(1, len(out)):
        out[i] = min(out[i], out[i - 1])
    return out


def raised_from_the_right(ucbs: list[float]) -> list[float]:
    """Running max from the right over an ascending ε grid (see :func:`monotone_ucbs`): it only
    raises each UCB, so each keeps its own β, with no union bound over the grid."""
    out = list(ucbs)
    for i in range(len(out) - 2, -1, -1):
        out[i] = max(out[i], out[i + 1])
    return out


#: dp_accounting overflows e^ε beyond this; δ is non-increasing, so upper bounds at larger ε
#: use the value here, and lower bounds there are reported as 0 (always a valid lower bound).
MAX_ANALYTIC_EPSILON = 700.0


def analytic_bounds(config: CertifyConfig, method: Method, direction: Direction, epsilons=None) -> dict:
    """Certified values of an analytic method for one direction, at ``epsilons`` (default: the grid).

    Returns a dict with ``lower`` and ``upper`` arrays (None where the method gives no such side),
    ``delta`` (the value a row shows), ``guarantee``, ``bound`` and ``resolution`` (issue 12):
    - each method's values are outward (its module states the error budget and resolution);
    - every lower bound of a sampler with one participation per epoch (deterministic, shuffle,
      Balls-and-Bins) is capped by the deterministic upper bound at (σ, E): such a sampler is
      dominated by E Gaussian participations (one Gaussian at σ/√E; SPEC §7, δ_S <= δ_D). Poisson is
      NOT: a record can join several batches of an epoch, and e.g. at σ = 0.3, T = 129, ε = 19 its
      δ (2.5e-4, PLD lower bound) exceeds δ_D (1.2e-5), so its lower bounds are not capped;
    - on a grid of several ε, uppers are a running minimum from the left and lowers a running
      maximum from the right (:mod:`epscert.bounds.monotone`: valid since δ(ε) is non-increasing).
    """
    method = canonical_method(config.sampler, method)  # Balls-and-Bins pld_upper is the bracket's old name
    grid = config.epsilons if epsilons is None else tuple(np.atleast_1d(epsilons).tolist())
    eps = np.minimum(np.asarray(grid, dtype=np.float64), MAX_ANALYTIC_EPSILON)
    beyond = np.asarray(grid, dtype=np.float64) > MAX_ANALYTIC_EPSILON
    lower, upper, guarantee, bound, res = _analytic_bounds(config, method, direction, eps)
    if guarantee == "exact" and beyond.any():
        guarantee, lower = "upper_bound", None  # evaluated at ε = 700 beyond it: δ is non-increasing
    raw_lower = None
    if lower is not None:
        if config.strategy is not None:  # the matrix mechanism: capped by its comonotone upper bound
            cap = matrix_bounds(matrix_pair(config).gram, config.sigma, Method.COMONOTONE_UPPER_BOUND,
                                direction, eps)[1]
        elif config.sampler is Sampler.POISSON:
            cap = 1.0
        else:
            cap = deterministic_bracket(config.sigma, config.epochs, eps)[1]
        raw_lower = np.where(beyond, 0.0, np.minimum(np.clip(lower, 0.0, 1.0), cap))
        lower = monotone_lower(grid, raw_lower)
    if upper is not None:
        raw = np.clip(upper, 0.0, 1.0)
        upper = monotone_upper(grid, raw)
        bound, res = follow_envelope(grid, raw, upper, bound, res, upper=True)
    elif lower is not None and not isinstance(bound, str):
        bound, res = follow_envelope(grid, raw_lower, lower, bound, res, upper=False)
    if guarantee == "exact" and config.strategy is not None:  # one bin: the Gaussian mechanism of its mode
        delta = np.clip(0.5 * (lower + upper), lower, upper)
    elif guarantee == "exact":
        delta = np.clip(deterministic_delta(config.sigma, config.epochs, eps), lower, upper)
    else:
        delta = upper if lower is None else lower
    return {"lower": lower, "upper": upper, "delta": delta, "guarantee": guarantee, "bound": bound,
            "resolution": res}


def follow_envelope(grid, raw: np.ndarray, env: np.ndarray, bound, res, upper: bool):
    """Per-ε bound names and resolutions after a monotone envelope: each value keeps the name and
    resolution of the grid point it came from (the nearest point to its left for an upper bound,
    to its right for a lower bound, holding that value). A single name or resolution stays as is."""
    if isinstance(bound, str) and np.ndim(res) == 0:
        return bound, res
    eps = np.asarray(grid, dtype=np.float64)
    names = [bound] * eps.size if isinstance(bound, str) else list(bound)
    reso = np.broadcast_to(np.asarray(res, dtype=np.float64), eps.shape).copy()
    out_names, out_res = list(names), reso.copy()
    for i in range(eps.size):
        if raw[i] == env[i]:
            continue
        side = (eps <= eps[i]) if upper else (eps >= eps[i])
        src = np.flatnonzero(side & (raw == env[i]))
        if src.size:
            j = int(src[np.argmax(eps[src])] if upper else src[np.argmin(eps[src])])
            out_names[i], out_res[i] = names[j], reso[j]
    return out_names, out_res


def _analytic_bounds(config: CertifyConfig, method: Method, direction: Direction, eps: np.ndarray):
    """(lower, upper, guarantee, bound name, resolution) before the shared cap and envelopes.

    A persistent sampler is certified as its exact one-epoch reduction at σ/√E
    (:meth:`~epscert.config.CertifyConfig.reduced`), so every method sees the reduced configuration.
    """
    if config.strategy is not None:
        return matrix_bounds(matrix_pair(config).gram, config.sigma, method, direction, eps)
    config = config.reduced()
    s, T, E = config.sigma, config.steps, config.epochs
    if method is Method.EXACT:
        lo, hi = deterministic_bracket(s, E, eps)
        return lo, hi, "exact", "gaussian_closed_form", 0.0
    if method in BRACKET_METHODS:
        bracket = bracket_for(s, T, E)  # one side's chain only: the other side may never be needed
        if method is Method.BRACKET_UPPER:
            return (None, bracket.delta_side(eps, direction, "upper"), "upper_bound", "allocation_bracket_upper",
                    bracket.resolution)
        return (bracket.delta_side(eps, direction, "lower"), None, "lower_bound", "allocation_bracket_lower",
                bracket.resolution)
    if method in (Method.PLD_UPPER, Method.PLD_LOWER):
        upper = method is Method.PLD_UPPER
        asked = config.direction.parts() + ((Direction.BOTH,) if config.direction is Direction.BOTH else ())
        vals, res, names = poisson_pld_bounds(s, T, E, eps, direction, config.pld_discretization,
                                              pessimistic=upper, directions=asked if direction in asked else None)
        return (None, vals, "upper_bound", names, res) if upper else (vals, None, "lower_bound", names, res)
    if method is Method.RDP_UPPER:
        return None, poisson_rdp_delta(s, T, E, eps), "upper_bound", "rdp", float(UNDERFLOW_FLOOR)
    if method is Method.CUBE_LOWER_BOUND:
        pair = "balls_and_bins" if config.sampler is Sampler.BALLS_AND_BINS else "shuffle"
        if E == 1:
            return cube_lower_bound(s, T, eps, pair, direction), None, "lower_bound", "cube", 0.0
        vals, res = composed_lower_bounds(s, T, E, eps, pair, direction, config.pld_discretization)
        return vals, None, "lower_bound", "cube_sliced_pld_composition", res
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
    method = canonical_method(config.sampler, method)
    if method in (Method.RDP_UPPER, Method.EXACT):
        directions = (Direction.BOTH,)  # RDP bounds both at once; the Gaussian pair is symmetric
    else:
        directions = config.direction.parts() + ((Direction.BOTH,) if config.direction is Direction.BOTH else ())
    rows = []
    for direction in directions:
        out = analytic_bounds(config, method, direction)
        for i, eps in enumerate(config.epsilons):
            row = base_row(config, method, direction, eps, wall_seconds)
            bound = out["bound"] if isinstance(out["bound"], str) else out["bound"][i]
            res = out["resolution"] if np.ndim(out["resolution"]) == 0 else out["resolution"][i]
            row.update(delta=float(out["delta"][i]), guarantee=out["guarantee"], bound=bound,
                       resolution=float(res))
            if out["upper"] is not None:
                row["delta_upper"] = float(out["upper"][i])
            if out["lower"] is not None:
                row["delta_lower"] = float(out["lower"][i])
            rows.append(row)
    return apply_truncation(config, rows)
