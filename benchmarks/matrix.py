"""Issue-23 benchmark: BandMF with Balls-and-Bins (the matrix mechanism), one core, one run.

    python -m benchmarks.matrix [--quick] [--budget S] [--out benchmarks/results]

Setting: n = 2000 iterations, cycle length b = 100, C the banded Toeplitz matrix whose first column
is c_i = binom(2i, i)/4^i truncated to p bands. Thread variables (OMP, OpenBLAS, MKL, Rayon) are
forced to 1 before numpy or Opake load, so every figure is one core; CPU seconds are
time.process_time of this process.

Part 1, sampling rate, p in {1, 4, 16, 100}, at σ = σ* (part 2) and ε = 4:
- epscert ``naive``, ``importance``, ``conditional``, ``tilted``: samples/s of ``epscert.certify`` end to end
  (REMOVE direction, one ε: draws, values, exact sums, rows), after a warm-up call that builds the
  Gram matrix and its factor; the sample count doubles until one call takes ``--seconds`` CPU s,
  then the best of ``repeats`` (3) calls at that count is kept (load on the shared machine only
  slows a call; single calls were seen to vary by up to 1.5x);
- JAX Privacy 2.0 ``get_privacy_loss_sample`` (REMOVE: positive_sample=True), the same way;
- Opake 0.16.1 ``bnb_mc_pld`` on the same Gram matrix (benchmarks/matrix_rivals.py states its
  convention), best of 3: its ``resolved_num_mc_samples`` over the CPU s of the call (PLD
  construction included), and ``register_bnb_transcript_corpus`` alone (the draws only). Opake
  builds both directions of its PLD from one corpus of ``num_samples`` draws (its API: the corpus
  of ``register_bnb_transcript_corpus`` is all ``bnb_pld_from_transcript_handle`` gets), so one
  Opake sample serves both directions; one epscert or JAX Privacy sample serves one.

Part 2, certification at σ* where δ(4) = 1e-8 (found with the conditional estimator's REMOVE estimate,
the dominant direction, by a secant search on log δ; rounded to 0.01): for δ in {1e-6, 1e-8}, ε*(δ)
from a pilot conditional run; then each method calls ``epscert.certify(..., method=m, strategy=...)``
with doubling sample counts (fresh seeds) on the grid ε*·(1 + {0, ±0.5%, ±1%, ±2%, ±5%, +10%, +20%, +50%,
+100%}) and reads, from the 'both' rows (δ = max over directions; β = 0.01 in all):
- ``UCB/est``: delta_upper / delta at ε*; 'certified within 2%' when <= 1.02;
- the certified interval on ε(δ): upper = min grid ε with delta_upper <= δ, lower = max grid ε with
  delta_lower > δ (the LCB is non-increasing in ε, one sample set); 'width' = (upper - lower)/ε*.
Each (method, δ) stops when both criteria hold or the next call would pass ``--budget`` CPU s; the
table gives the samples and CPU s of the first call that met each criterion (one call, as a user who
knew the count would run it) and the total CPU spent on the search. The grid reaches far above ε* so
that a loose certified upper end still shows where it lies (to the grid's resolution, rounded up). A
last line per δ combines the methods' final calls: the largest lower end and the smallest upper end,
which hold together with probability >= 1 - 8β (union bound over the eight one-sided certificates). Because the steps only call
certify() and read its rows, a sharper certificate in epscert shows here without change.

Figures are printed (markdown) and saved as JSON under ``--out``. No timing is asserted anywhere.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

import epscert  # noqa: E402
from epscert.matrix.strategies import toeplitz_strategy  # noqa: E402

from benchmarks.matrix_rivals import (binomial_c_col, jax_privacy_losses, load_opake, opake_config,  # noqa: E402
                                      opake_pld)

METHODS = ("naive", "importance", "conditional", "tilted")
FULL = dict(n=2000, b=100, bands=(1, 4, 16, 100), cert_bands=16, targets=(1e-6, 1e-8), sigma_target=1e-8,
            sigma_eps=4.0, sigma_guess=(4.4, 4.8), pilot_samples=3000, opake_resolution=1e-4, seconds=1.0, repeats=3,
            budget=60.0, start={"naive": 100_000, "importance": 50_000, "conditional": 1000, "tilted": 25_000})
QUICK = dict(n=200, b=10, bands=(1, 4), cert_bands=4, targets=(1e-3, 1e-4), sigma_target=1e-4,
             sigma_eps=2.0, sigma_guess=(5.0, 6.0), pilot_samples=500, opake_resolution=1e-2, seconds=0.05, repeats=1,
             budget=0.5, start={"naive": 2000, "importance": 2000, "conditional": 200, "tilted": 1000})
#: The conditional estimator's cost grows with the grid (a root and integrals per ε): 17 points left it
#: half the samples of 9 in the same budget, so the far side is coarse (13 points in all).
GRID = (-0.05, -0.02, -0.01, -0.005, 0.0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
ERROR_PROB = 0.01
WITHIN = 1.02


def cpu(fn):
    """(result, CPU seconds of this process) of fn()."""
    start = time.process_time()
    out = fn()
    return out, time.process_time() - start


def certify(strategy, b, sigma, method, eps, samples, seed=0, direction="both"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # log(0) of an empty far set, handled by its caller
        return epscert.certify(sampler="balls_and_bins_persistent", sigma=sigma, steps=b, epsilons=list(eps),
                               method=method, samples=int(samples), seed=seed, error_prob=ERROR_PROB,
                               direction=direction, strategy=strategy)


def doubling_rate(run, start: int, seconds: float, repeats: int) -> dict:
    """Samples/s of run(m) at the first m (doubling from ``start``) whose call takes >= ``seconds`` CPU,
    the best of ``repeats`` calls (the shared machine's load only ever slows a call down)."""
    m = start
    while True:
        _, t = cpu(lambda: run(m))
        if t >= seconds or m >= 2**31:
            break
        m *= 2
    times = [t] + [cpu(lambda: run(m))[1] for _ in range(repeats - 1)]
    return {"samples": m, "cpu_s": min(times), "rate": m / min(times), "cpu_s_all": times}


def best_of(run, repeats: int) -> float:
    """The smallest CPU s of ``repeats`` calls of run()."""
    return min(cpu(run)[1] for _ in range(repeats))


# ---------------------------------------------------------------------------------------------
# Part 1: sampling rates


def rates(setting: dict, sigma: float) -> list[dict]:
    n, b, eps = setting["n"], setting["b"], setting["sigma_eps"]
    out = []
    for bands in setting["bands"]:
        c_col = binomial_c_col(bands)
        strategy = toeplitz_strategy(c_col, n)
        certify(strategy, b, sigma, "naive", [eps], 100, direction="remove")  # warm-up: Gram and factor
        row = {"bands": bands, "n": n, "b": b, "sigma": sigma}
        for method in METHODS:
            start = 200 if method == "conditional" else 5000
            row[method] = doubling_rate(lambda m: certify(strategy, b, sigma, method, [eps], m, direction="remove"),
                                        start, setting["seconds"], setting["repeats"])
        jax_privacy_losses(c_col, n, b, sigma, True, 2, seed=0)  # warm-up: imports
        row["jax_privacy"] = doubling_rate(lambda m: jax_privacy_losses(c_col, n, b, sigma, True, m, seed=1),
                                           50, setting["seconds"], setting["repeats"])
        config = opake_config(setting["opake_resolution"])
        g0 = strategy.gram(b).g0
        count = config.resolved_num_mc_samples
        t = best_of(lambda: opake_pld(g0, sigma, config), setting["repeats"])
        row["opake"] = {"samples": count, "cpu_s": t, "rate": count / t}
        opake = load_opake()
        t = best_of(lambda: opake.drop_bnb_transcript_corpus(
            opake.register_bnb_transcript_corpus(g0.ravel().tolist(), b, count, 1)), setting["repeats"])
        row["opake_draws"] = {"samples": count, "cpu_s": t, "rate": count / t}
        out.append(row)
        print_rate(row)
    return out


def print_rate(row: dict) -> None:
    best = max(row[m]["rate"] for m in METHODS)
    print(f"| {row['bands']} | " + " | ".join(f"{row[m]['rate']:,.0f}" for m in METHODS)
          + f" | {row['jax_privacy']['rate']:,.0f} | {row['opake']['rate']:,.0f} | {row['opake_draws']['rate']:,.0f}"
          + f" | {row['naive']['rate'] / row['jax_privacy']['rate']:,.0f}x"
          + f" | {row['naive']['rate'] / row['opake']['rate']:.2f}x | {best / row['opake']['rate']:.2f}x |", flush=True)


# ---------------------------------------------------------------------------------------------
# Part 2: σ*, ε*(δ), and the cost of certifying


def remove_estimate(strategy, b, sigma, eps, samples, seed) -> float:
    table = certify(strategy, b, sigma, "conditional", [eps], samples, seed=seed, direction="remove")
    return table.to_pylist()[0]["delta"]


def find_sigma(setting: dict, strategy) -> tuple[float, list]:
    """σ (to 0.01) with the conditional estimate of δ_remove(ε) = target: a secant search on log δ."""
    b, eps, target = setting["b"], setting["sigma_eps"], math.log(setting["sigma_target"])
    trail = []

    def f(s):
        value = remove_estimate(strategy, b, s, eps, setting["pilot_samples"], seed=7)
        trail.append((s, value))
        return math.log(value) - target

    s0, s1 = setting["sigma_guess"]
    f0, f1 = f(s0), f(s1)
    for _ in range(6):
        s2 = s1 - f1 * (s1 - s0) / (f1 - f0)
        if abs(s2 - s1) < 0.005:
            s1 = s2
            break
        s0, f0, s1, f1 = s1, f1, s2, f(s2)
    return round(s1, 2), trail


def epsilon_star(setting: dict, strategy, sigma: float) -> tuple[dict, list]:
    """ε*(δ) for each target from one pilot conditional run: log-linear interpolation of the estimate."""
    grid = np.round(np.arange(1.0, 8.01, 0.5), 3)
    table = certify(strategy, setting["b"], sigma, "conditional", grid, setting["pilot_samples"], seed=8)
    rows = sorted((r for r in table.to_pylist() if r["direction"] == "both"), key=lambda r: r["epsilon"])
    eps = np.array([r["epsilon"] for r in rows])
    logd = np.log(np.maximum([r["delta"] for r in rows], 1e-300))
    out = {}
    for target in setting["targets"]:
        k = int(np.flatnonzero(logd <= math.log(target))[0])
        t = (math.log(target) - logd[k - 1]) / (logd[k] - logd[k - 1])
        out[target] = round(float(eps[k - 1] + t * (eps[k] - eps[k - 1])), 3)
    return out, [(float(e), float(d)) for e, d in zip(eps, np.exp(logd))]


def read(table, grid, eps_star: float, target: float) -> dict:
    """UCB/est at ε* and the certified ε interval at δ = target, from the 'both' rows."""
    rows = sorted((r for r in table.to_pylist() if r["direction"] == "both"), key=lambda r: r["epsilon"])
    centre = min(rows, key=lambda r: abs(r["epsilon"] - eps_star))
    upper = min((r["epsilon"] for r in rows if r["delta_upper"] <= target), default=math.inf)
    # LCBs made non-increasing in ε (a running minimum from the left only lowers them), so that the
    # largest ε with LCB > δ is a lower bound on ε(δ) at the LCB's β, as the UCB side (SPEC §8)
    lcbs = np.minimum.accumulate([-math.inf if r["delta_lower"] is None else r["delta_lower"] for r in rows])
    lower = max((r["epsilon"] for r, lcb in zip(rows, lcbs) if lcb > target), default=-math.inf)
    ratio = centre["delta_upper"] / centre["delta"] if centre["delta"] > 0 else math.inf
    width = (upper - lower) / eps_star if math.isfinite(upper) and math.isfinite(lower) else math.inf
    return {"delta": centre["delta"], "std_error": centre["std_error"], "ucb": centre["delta_upper"],
            "lcb": centre["delta_lower"], "ucb_over_est": ratio, "eps_lower": lower, "eps_upper": upper,
            "eps_width": width}


def certify_cost(setting: dict, strategy, sigma: float, method: str, target: float, eps_star: float) -> dict:
    """Doubling sample counts until UCB/est <= 1.02 and the ε interval is <= 2% wide, or the budget."""
    grid = [round(eps_star * (1 + g), 4) for g in GRID]
    samples, spent, seed = setting["start"][method], 0.0, 100
    first = {"ucb": None, "width": None}
    last, steps = None, []
    while True:
        table, t = cpu(lambda: certify(strategy, setting["b"], sigma, method, grid, samples, seed=seed))
        spent += t
        last = {"samples": samples, "cpu_s": t, **read(table, grid, eps_star, target)}
        steps.append(last)
        if first["ucb"] is None and last["ucb_over_est"] <= WITHIN:
            first["ucb"] = {"samples": samples, "cpu_s": t}
        if first["width"] is None and last["eps_width"] <= WITHIN - 1.0:
            first["width"] = {"samples": samples, "cpu_s": t}
        if (first["ucb"] and first["width"]) or spent + 2.2 * t > setting["budget"]:
            break
        samples, seed = 2 * samples, seed + 1
    return {"method": method, "target": target, "eps_star": eps_star, "grid": grid, "first": first,
            "search_cpu_s": spent, "last": last, "steps": steps}


def fmt(x: float, spec: str = ".3g") -> str:
    return "-" if x is None or not math.isfinite(x) else format(x, spec)


def print_cost(r: dict) -> None:
    last, first = r["last"], r["first"]

    def reached(key):
        hit = first[key]
        return f"{hit['samples']:,} / {hit['cpu_s']:.1f}" if hit else "not within budget"

    print(f"| {r['target']:.0e} | {r['eps_star']:.3f} | {r['method']} | {reached('ucb')} | {reached('width')} | "
          f"{last['samples']:,} | {fmt(last['delta'])} | {fmt(last['ucb_over_est'], '.3g')} | "
          f"[{fmt(last['eps_lower'], '.4g')}, {fmt(last['eps_upper'], '.4g')}] | {fmt(100 * last['eps_width'], '.2f')}% | "
          f"{r['search_cpu_s']:.1f} |", flush=True)


def print_combined(results: list[dict], target: float, eps_star: float) -> None:
    """The best ends over the methods' last calls (each one-sided certificate at β: all 2m together at 2mβ)."""
    lower = max(r["last"]["eps_lower"] for r in results)
    upper = min(r["last"]["eps_upper"] for r in results)
    width = (upper - lower) / eps_star if math.isfinite(upper) and math.isfinite(lower) else math.inf
    cpu_s = sum(r["last"]["cpu_s"] for r in results)
    print(f"| {target:.0e} | {eps_star:.3f} | best of the {len(results)} (at {2 * len(results)}β) | | | | | | "
          f"[{fmt(lower, '.4g')}, {fmt(upper, '.4g')}] | {fmt(100 * width, '.2f')}% | {cpu_s:.1f} (last calls) |",
          flush=True)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small smoke run (n = 200, b = 10)")
    parser.add_argument("--budget", type=float, default=None, help="CPU s per (method, δ) in part 2")
    parser.add_argument("--seconds", type=float, default=None, help="CPU s per rate measurement in part 1")
    parser.add_argument("--out", default="benchmarks/results", help="folder for the JSON figures")
    args = parser.parse_args(argv)
    setting = dict(QUICK if args.quick else FULL)
    if args.budget is not None:
        setting["budget"] = args.budget
    if args.seconds is not None:
        setting["seconds"] = args.seconds
    started = time.process_time()
    cert_strategy = toeplitz_strategy(binomial_c_col(setting["cert_bands"]), setting["n"])
    sigma, trail = find_sigma(setting, cert_strategy)
    print(f"# matrix mechanism: n = {setting['n']}, b = {setting['b']}, c_i = binom(2i, i)/4^i; one core "
          f"({platform.processor() or platform.machine()}, {os.cpu_count()} CPUs visible)")
    print(f"σ* = {sigma} (conditional estimate of δ_remove({setting['sigma_eps']}) = {setting['sigma_target']:g} "
          f"with {setting['cert_bands']} bands; search {[(s, f'{d:.3g}') for s, d in trail]})\n")
    print("## Part 1: samples/s (CPU), REMOVE direction; Opake: its samples (both directions) per CPU s\n")
    print("| bands | " + " | ".join(f"epscert {m}" for m in METHODS) + " | JAX Privacy | Opake bnb_mc_pld | "
          "Opake draws only | naive / JAX Privacy | naive / Opake | best epscert / Opake |")
    print("|" + "---|" * (len(METHODS) + 7))
    part1 = rates(setting, sigma)
    stars, pilot = epsilon_star(setting, cert_strategy, sigma)
    print(f"\n## Part 2: certifying at σ* = {sigma}, {setting['cert_bands']} bands; budget {setting['budget']:g} "
          f"CPU s per row; ε*(δ) = {stars} (pilot conditional estimate)\n")
    print("| δ | ε* | method | UCB/est <= 1.02: samples / CPU s | ε interval <= 2%: samples / CPU s | last samples | "
          "last estimate | last UCB/est | last certified ε interval | width | search CPU s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    part2 = []
    for target in setting["targets"]:
        for method in METHODS:
            result = certify_cost(setting, cert_strategy, sigma, method, target, stars[target])
            part2.append(result)
            print_cost(result)
        print_combined(part2[-len(METHODS):], target, stars[target])
    report = {"setting": {k: v for k, v in setting.items()}, "sigma": sigma, "sigma_search": trail,
              "pilot": pilot, "eps_star": {str(k): v for k, v in stars.items()}, "rates": part1,
              "certification": part2, "cpu_s_total": time.process_time() - started,
              "machine": {"processor": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
                          "python": platform.python_version(), "numpy": np.__version__,
                          "epscert": epscert.__version__}}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / ("matrix-quick.json" if args.quick else "matrix.json")
    path.write_text(json.dumps(report, indent=1, default=float))
    print(f"\nsaved {path} (total CPU {report['cpu_s_total']:.0f} s)")
    return report


if __name__ == "__main__":
    main()
