"""Issue-23 probe: the tilted-mixture estimate of δ_remove for BandMF, and why it certifies nothing yet.

    python -m benchmarks.matrix_tilted [--quick] [--out benchmarks/results]

Setting of ``benchmarks/matrix.py`` part 2: n = 2000, b = 100, 16 bands of c_i = binom(2i, i)/4^i,
σ = 4.61 (δ_remove(4) ≈ 1e-8), ε ∈ {3.07, 4.0} (δ ≈ 1e-6 and 1e-8). One core (thread variables set to
1), CPU seconds from time.process_time.

Part 1, estimates: :func:`epscert.matrix.tilted.tilted_remove_estimate` against the
conditional estimator (``epscert.certify``, REMOVE), each with its relative standard error, its
relative variance per sample and the CPU seconds a 1% relative standard error would take at the
measured rate (relative variance x CPU s per sample / 1e-4).

Part 2, the range: 10^6 tilted draws at ε = 4. Per ρ0 (ρ = Σ_k e^{x_k - x_max}): the share of the
estimate carried by draws with ρ > ρ0, bound 1 at ρ0 over the estimate (the range a certificate on
{ρ <= ρ0} would pay), and the largest draw with ρ <= ρ0 over that bound (how tight bound 1 is).

Part 3, a truncation that fails: bound the P-mass of {#modes with x >= s_K is >= K} for K = 1..b by
Gaussian concentration of the top-K sum (Lipschitz constant σ_K = the largest K x K principal sum
of G, bounded by row sums; mean bounded by min_t [K t + Σ_k E(x_k - t)_+]; K = 1 by the union bound,
K = b exactly), each at 0.1 δ/b. On the complement the K-th largest mode is below min_{k <= K} s_k, and
the largest value of e^c (mean_k e^{x_k} - e^ε)_+ / mean_k e^{θ x_k} under those caps (a water-filling
problem in one parameter, see profile_range) is the range left. It is printed over δ next to the
power-mean bound that holds without truncation: such a profile does not exclude many modes being
equally high, and gains about a factor of 3.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from scipy import special  # noqa: E402

import epscert  # noqa: E402
from benchmarks.matrix_rivals import binomial_c_col  # noqa: E402
from epscert.matrix.tilted import default_theta, tilted_remove_estimate, tilted_value_bound, tilted_values  # noqa: E402
from epscert.matrix.pair import MatrixPair  # noqa: E402
from epscert.rng import stream_generator  # noqa: E402
from epscert.matrix.strategies import toeplitz_strategy  # noqa: E402
from epscert.matrix.strategies.gram import mode_gram  # noqa: E402

FULL = dict(n=2000, b=100, bands=16, sigma=4.61, eps=(3.07, 4.0), tilted=1_000_000, conditional=20_000,
            range_draws=1_000_000, rho0=(2, 3, 4, 5, 6, 8), budget=0.1)
QUICK = dict(n=200, b=20, bands=4, sigma=4.0, eps=(2.5, 3.5), tilted=20_000, conditional=1_000,
             range_draws=20_000, rho0=(2, 4), budget=0.1)


def cpu(fn):
    start = time.process_time()
    out = fn()
    return out, time.process_time() - start


def estimates(setting: dict, strategy, pair) -> list[dict]:
    eps = list(setting["eps"])
    tilted, t_cpu = cpu(lambda: tilted_remove_estimate(pair, eps, setting["tilted"], seed=1))
    table, c_cpu = cpu(lambda: epscert.certify(sampler="balls_and_bins_persistent", sigma=setting["sigma"],
                                               steps=setting["b"], epsilons=eps, method="conditional",
                                               samples=setting["conditional"], seed=2, strategy=strategy,
                                               direction="remove"))
    rows = {r["epsilon"]: r for r in table.to_pylist()}
    out = []
    for i, e in enumerate(eps):
        for name, delta, se, m, seconds in (
                ("tilted", tilted.delta[i], tilted.std_error[i], setting["tilted"], t_cpu),
                ("conditional", rows[e]["delta"], rows[e]["std_error"], setting["conditional"], c_cpu)):
            rel = se / delta if delta > 0 else math.inf
            relvar = rel * rel * m
            out.append(dict(epsilon=e, method=name, delta=delta, rel_se=rel, samples=m, cpu_s=seconds,
                            relvar_per_sample=relvar, cpu_s_for_1pct=relvar * seconds / m / 1e-4,
                            theta=tilted.theta if name == "tilted" else None))
    return out


def range_shares(setting: dict, pair, eps: float) -> dict:
    theta = default_theta(pair, eps)
    rng = stream_generator(3, 1)
    values, rhos = [], []
    left = setting["range_draws"]
    while left:
        rows = min(50_000, left)
        y, rho = tilted_values(pair, np.array([eps]), theta, rng, rows)
        values.append(y[:, 0])
        rhos.append(rho)
        left -= rows
    y, rho = np.concatenate(values), np.concatenate(rhos)
    mean = float(y.mean())
    out = dict(epsilon=eps, theta=theta, estimate=mean, max_over_mean=float(y.max()) / mean,
               power_mean_bound_over_mean=float(tilted_value_bound(pair, theta, eps)) / mean, rows=[])
    for rho0 in setting["rho0"]:
        inside = rho <= rho0
        bound = float(tilted_value_bound(pair, theta, eps, rho0))
        out["rows"].append(dict(rho0=rho0, share_above=float(y[~inside].sum() / y.sum()),
                                bound_over_mean=bound / mean, largest_inside_over_bound=float(y[inside].max()) / bound))
    return out


def profile_range(setting: dict, pair, eps: float, delta: float) -> dict:
    g, b = pair.g, pair.bins
    v = pair.diag
    sd = np.sqrt(v)
    mu = g - pair.half_diag  # row i: the means of x under P_i
    top_rows = np.cumsum(-np.sort(-g, axis=1), axis=1)  # sum of the K largest entries of each row
    tgrid = np.linspace(-10.0, 20.0, 1501)
    z = (mu[:, :, None] - tgrid) / sd[None, :, None]
    excess = (sd[None, :, None] * np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
              + (mu[:, :, None] - tgrid) * special.ndtr(z)).sum(axis=1)  # Σ_k E_i(x_k - t)_+, per (i, t)
    total_sd = math.sqrt(float(g.sum()))

    def mass(k: int, level: float) -> float:  # bound on P(top-k sum of x >= k level)
        if k == 1:
            return float(np.mean(special.ndtr((mu - level) / sd).sum(axis=1)))
        if k == b:
            return float(np.mean(special.ndtr((mu.sum(axis=1) - b * level) / total_sd)))
        lip = math.sqrt(float(np.sort(top_rows[:, k - 1])[::-1][:k].sum()))
        gap = k * level - (k * tgrid + excess).min(axis=1)
        return float(np.mean(np.where(gap > 0, np.exp(-np.square(np.maximum(gap, 0.0)) / (2 * lip * lip)), 1.0)))

    target = setting["budget"] * delta / b
    levels = []
    for k in range(1, b + 1):
        lo, hi = -10.0, 40.0
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if mass(k, mid) > target else (lo, mid)
        levels.append(hi)
    # x_(K) < s_K on the complement, so the K-th largest mode is below cap_K = min_{k <= K} s_k. With
    # a_k = e^{x_k} and W >= e^{-c} mean_k a_k^θ, Y <= e^c (mean a - e^ε)_+ / mean a^θ; for a fixed Σ a
    # the convex Σ a^θ under the caps a_(K) <= e^{cap_K} is least at the water level a_(K) = min(e^{cap_K}, α)
    # (KKT: every uncapped a equal), so the largest value is a maximum over α alone. On a grid cell
    # [α_j, α_j+1] the numerator is taken at α_j+1 and the denominator at α_j (both monotone in α).
    caps = np.exp(np.minimum.accumulate(np.asarray(levels)))
    theta = default_theta(pair, eps)
    c = theta * (theta - 1.0) * float(v.max()) / 2.0
    alpha = np.exp(np.linspace(-10.0, levels[0], 20_001))
    filled = np.minimum(caps[None, :], alpha[:, None])
    total = filled.sum(axis=1)
    power = np.power(filled, theta).sum(axis=1)
    value = math.exp(c) * np.maximum(total[1:] / b - math.exp(eps), 0.0) * b / power[:-1]
    j = int(np.argmax(value))
    return dict(epsilon=eps, theta=theta, levels_first=levels[:4], levels_last=levels[-3:],
                range_over_delta=float(value[j]) / delta, water_level=float(np.log(alpha[j + 1])),
                modes_at_level=int(np.count_nonzero(caps >= alpha[j + 1])),
                power_mean_over_delta=float(tilted_value_bound(pair, theta, eps)) / delta)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small setting (a smoke run)")
    parser.add_argument("--out", default="benchmarks/results", help="folder for the JSON figures")
    args = parser.parse_args(argv)
    setting = QUICK if args.quick else FULL
    strategy = toeplitz_strategy(binomial_c_col(setting["bands"]), setting["n"])
    pair = MatrixPair(mode_gram(strategy, setting["b"]), setting["sigma"])
    print(f"# tilted-mixture probe ({'quick' if args.quick else 'full'}): n={setting['n']} b={setting['b']} "
          f"bands={setting['bands']} σ={setting['sigma']}; {platform.machine()}, one core, CPU s")
    report = dict(setting={k: list(v) if isinstance(v, tuple) else v for k, v in setting.items()})
    report["estimates"] = estimates(setting, strategy, pair)
    print("\n## Part 1: estimates of δ_remove\n")
    print("| ε | method | θ | samples | CPU s | δ estimate | rel. SE | rel. variance / sample | CPU s for 1% |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in report["estimates"]:
        theta = f"{r['theta']:.2f}" if r["theta"] else "-"
        print(f"| {r['epsilon']} | {r['method']} | {theta} | {r['samples']:,} | {r['cpu_s']:.2f} | {r['delta']:.4g} | "
              f"{100 * r['rel_se']:.2f}% | {r['relvar_per_sample']:.3g} | {r['cpu_s_for_1pct']:.3g} |")
    top = max(setting["eps"])
    shares = range_shares(setting, pair, top)
    report["range"] = shares
    print(f"\n## Part 2: where the tilted values lie, ε = {top}, θ = {shares['theta']:.2f}, "
          f"{setting['range_draws']:,} draws (estimate {shares['estimate']:.4g})\n")
    print(f"largest value / estimate: {shares['max_over_mean']:.4g}; power-mean bound / estimate: "
          f"{shares['power_mean_bound_over_mean']:.3g}\n")
    print("| ρ0 | share of the estimate from ρ > ρ0 | bound 1 at ρ0 / estimate "
          "| largest value with ρ <= ρ0 / bound 1 |")
    print("|---|---|---|---|")
    for r in shares["rows"]:
        print(f"| {r['rho0']} | {r['share_above']:.3g} | {r['bound_over_mean']:.4g} "
              f"| {r['largest_inside_over_bound']:.3f} |")
    prof, p_cpu = cpu(lambda: profile_range(setting, pair, top, shares["estimate"]))
    report["profile"] = prof
    print(f"\n## Part 3: truncation by a Gaussian-concentration count profile (mass {setting['budget']} δ in all)\n")
    print(f"levels s_1..s_4 = {[round(x, 2) for x in prof['levels_first']]}, s_(b-2)..s_b = "
          f"{[round(x, 2) for x in prof['levels_last']]}; range left / δ = {prof['range_over_delta']:.3g} "
          f"(the {prof['modes_at_level']} largest modes at x = {prof['water_level']:.2f}, the others at their caps), against "
          f"{prof['power_mean_over_delta']:.3g} without truncation ({p_cpu:.1f} CPU s)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"matrix_tilted{'-quick' if args.quick else ''}.json"
    path.write_text(json.dumps(report, indent=1, default=float))
    print(f"\nsaved {path}")
    return report


if __name__ == "__main__":
    main()
