"""Issue-33 benchmark: BandMF with Balls-and-Bins at the sizes people train, one core, one run.

    python -m benchmarks.matrix_production [--quick] [--out benchmarks/results]

What a user calls, timed: ``epscert.Accountant(noise_multiplier=σ, strategy=toeplitz_strategy(c, n),
cycle_length=b).epsilon_interval(δ)`` (the default 'auto' method and sample count; ``--quick``:
``--samples`` samples), c_i = binom(2i, i)/4^i truncated to the given bands, for every configuration
of issue 33's table:

- n = 10^4, b = 1000 (10 participations), σ = 2, 16 bands;
- n = 2000, b = 2000 (one participation), σ = 1.2 and σ = 0.6, 16 bands;
- n = 2000, b = 100 (the benchmark size of ``benchmarks/matrix.py``), σ = 4.61, 16 bands;
- n = 10^4, b = 10^4 (one participation), 64 bands, σ = 2 (the issue names no σ for it);

at δ = 1e-6, 1e-8, 1e-10 (``--quick``: 1e-6 only). Printed per (configuration, δ): the certified
interval [lower, upper] on ε(δ), its width upper/lower - 1, the samples per direction and pass, and the
CPU seconds of the call (time.process_time of this process; thread variables are forced to 1 before
numpy, JAX or Opake load, so every figure is one core). Each call is a fresh Accountant: the Gram
matrix, its factor and the tilt tables are cached per pair, so the first δ of a configuration pays for
them and the later ones do not.

Next to it, in the same CPU budget (the epscert call's CPU seconds), where installed:
- JAX Privacy's Monte Carlo (``get_privacy_loss_sample``, both directions, half the budget each; the
  count from a timed pilot of ``PILOT`` samples, at least ``MIN_RIVAL_SAMPLES`` (so it may overrun a
  small budget: 70 ms a sample at n = 10^4, b = 1000, measured), at most ``MAX_RIVAL_SAMPLES``): δ̂(ε) = the larger
  direction's mean of (1 - e^{ε - ℓ})_+, and ε where δ̂ = δ and where δ̂ ∓ 2 standard errors = δ
  (an estimate with a CLT band, not a certificate; 'unresolved' when δ < 1/N for its N samples per
  direction, where the crossing is only the largest sampled loss);
- Opake 0.16.1's ``bnb_mc_pld`` at the finest ``mc_resolution`` whose ``resolved_num_mc_samples`` fit the
  budget at the rate of a timed pilot (resolution 1e-2): its ``epsilon_at(δ)``, an upper bound that
  holds except with probability 1e-6, and never finite for δ below the resolution (left out for
  b > ``OPAKE_MAX_BINS``: its API takes the Gram matrix as a Python list of b² floats).
The rivals' calls are those of ``benchmarks/matrix_rivals.py`` (their conventions are stated and tested
there).

Cost. The full run is 15 epscert calls at the default 10^5 samples (three passes of 10^5 per direction
each). Not run yet; estimated from the per-sample rates measured for issue 33 (one core of the shared
2-core machine, tilted: 1.6 s REMOVE + 2.1 s ADD per 10^4 samples at b = 2000): about 2 CPU minutes per
call at b = 1000-2000, under half a minute at b = 100, and several times the b = 2000 figure at
b = 10^4 with 64 bands, whose b x b Gram matrix and the arrays derived from it also take about 4 GB of
memory (800 MB each). The rivals get the same CPU again (JAX Privacy more where its minimum count
overruns the budget). Allow 2 to 3 CPU hours and 6 GB for the full run. ``--quick`` (2000 samples,
δ = 1e-6, rivals included) takes a few CPU minutes; its log is
``benchmarks/results/matrix_production-quick.log``.

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
from epscert.inverse.best import outward_text  # noqa: E402
from epscert.matrix.strategies import toeplitz_strategy  # noqa: E402

from benchmarks.matrix import cpu  # noqa: E402
from benchmarks.matrix_rivals import (binomial_c_col, delta_from_losses, jax_privacy_losses,  # noqa: E402
                                      load_opake, opake_config, opake_pld)

CONFIGS = (
    dict(n=10_000, b=1000, sigma=2.0, bands=16),
    dict(n=2000, b=2000, sigma=1.2, bands=16),
    dict(n=2000, b=2000, sigma=0.6, bands=16),
    dict(n=2000, b=100, sigma=4.61, bands=16),
    dict(n=10_000, b=10_000, sigma=2.0, bands=64),
)
DELTAS = (1e-6, 1e-8, 1e-10)
QUICK_SAMPLES = 2000
#: Samples of JAX Privacy's timed pilot, the fewest and the most either rival is given (the most: memory).
PILOT = 50
MIN_RIVAL_SAMPLES = 50
#: Opake takes the Gram matrix as a Python list of b² floats: left out above this b (10^8 floats at b = 10^4).
OPAKE_MAX_BINS = 4000
MAX_RIVAL_SAMPLES = 10**7
OPAKE_FAILURE = 1e-6


def epscert_interval(strategy, b: int, sigma: float, delta: float, samples: int | None,
                     direction: str = "both") -> dict:
    """The certified interval of a fresh Accountant (default samples when ``samples`` is None; ``direction`` 'both'
    is the Accountant's default, 'remove' or 'add' certifies that side alone) and its CPU s."""
    kwargs = {} if samples is None else {"samples": samples}
    if direction != "both":
        kwargs["direction"] = direction
    acc = epscert.Accountant(noise_multiplier=sigma, strategy=strategy, cycle_length=b, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a NotCertifiedWarning shows as an infinite upper end below
        interval, seconds = cpu(lambda: acc.epsilon_interval(delta))
    lower, upper = float(interval.lower), float(interval.upper)
    return {"lower": lower, "upper": upper, "estimate": interval.estimate,
            "width": upper / lower - 1.0 if lower > 0 and math.isfinite(upper) else math.inf,
            "samples": acc.config.samples, "cpu_s": seconds, "direction": direction}


def crossing(eps: np.ndarray, curve: np.ndarray, delta: float) -> float:
    """The smallest grid ε with curve <= δ (curves fall with ε); nan when the grid never gets there."""
    hit = np.flatnonzero(curve <= delta)
    return float(eps[hit[0]]) if hit.size else math.nan


def jax_privacy_budget(c_col, n: int, b: int, sigma: float, delta: float, budget: float, upper: float) -> dict:
    """JAX Privacy's estimate of ε(δ) from as many loss samples as ``budget`` CPU s allow (module docstring)."""
    jax_privacy_losses(c_col, n, b, sigma, True, 2, seed=0)  # warm-up: imports and compilation
    _, t = cpu(lambda: jax_privacy_losses(c_col, n, b, sigma, True, PILOT, seed=0))
    count = int(min(MAX_RIVAL_SAMPLES, max(MIN_RIVAL_SAMPLES, PILOT * 0.5 * budget / max(t, 1e-9))))
    top = upper if math.isfinite(upper) else 50.0
    eps = np.linspace(0.0, 1.5 * top, 1501)
    mean, err = np.zeros(eps.size), np.zeros(eps.size)
    spent = 0.0
    for seed, remove in ((1, True), (2, False)):
        losses, t = cpu(lambda: jax_privacy_losses(c_col, n, b, sigma, remove, count, seed=seed))
        spent += t
        m, e = delta_from_losses(losses, eps)
        worse = m > mean
        mean, err = np.where(worse, m, mean), np.where(worse, e, err)
    return {"samples": count, "cpu_s": spent, "estimate": crossing(eps, mean, delta),
            "low": crossing(eps, mean - 2 * err, delta), "high": crossing(eps, mean + 2 * err, delta)}


def opake_budget(g0: np.ndarray, sigma: float, delta: float, budget: float) -> dict:
    """Opake's ``epsilon_at(δ)`` at the finest resolution whose samples fit ``budget`` CPU s (module docstring)."""
    pilot = opake_config(1e-2, OPAKE_FAILURE)
    _, t = cpu(lambda: opake_pld(g0, sigma, pilot))
    target = pilot.resolved_num_mc_samples * budget / max(t, 1e-9)
    lo, hi = 1e-9, 1e-2  # bisection on log resolution: samples fall as the resolution grows
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        if opake_config(mid, OPAKE_FAILURE).resolved_num_mc_samples > min(target, MAX_RIVAL_SAMPLES):
            lo = mid
        else:
            hi = mid
    config = opake_config(hi, OPAKE_FAILURE)
    pld, spent = cpu(lambda: opake_pld(g0, sigma, config))
    return {"resolution": hi, "samples": config.resolved_num_mc_samples, "cpu_s": spent,
            "upper": float(pld.epsilon_at(delta))}


def rival_text(jp: dict, delta: float) -> str:
    """JAX Privacy's column. Below δ = 1/N (N samples per direction) no crossing means anything: δ̂(ε) then
    falls to 0 at the largest sampled loss, and the 'crossing' is that loss, not an estimate of ε(δ)."""
    tail = f"({jp['samples']:,}, {jp['cpu_s']:.1f})"
    if delta * jp["samples"] < 1.0:
        return f"unresolved: δ < 1/N {tail}"
    return f"{fmt(jp['estimate'])} [{fmt(jp['low'])}, {fmt(jp['high'])}] {tail}"


def fmt(x, spec: str = ".3f") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else ("inf" if x == math.inf else
                                                                             format(x, spec))


def bound(x, up: bool) -> str:
    """A certified side to three decimals, rounded outward (down for the lower side, up for the upper one) on its
    exact value, so the printed interval still contains the certified one."""
    return fmt(x) if x is None or not math.isfinite(x) else outward_text(x, up=up, places=3)


def run(configs, deltas, samples: int | None, rivals: bool, direction: str = "both") -> list[dict]:
    rows = []
    print(HEADER)
    for setting in configs:
        n, b, sigma, bands = setting["n"], setting["b"], setting["sigma"], setting["bands"]
        c_col = binomial_c_col(bands)
        strategy = toeplitz_strategy(c_col, n)
        for delta in deltas:
            row = dict(setting, delta=delta, epscert=epscert_interval(strategy, b, sigma, delta, samples, direction))
            mine = row["epscert"]
            budget = mine["cpu_s"]
            if rivals:
                try:
                    row["jax_privacy"] = jax_privacy_budget(c_col, n, b, sigma, delta, budget, mine["upper"])
                except ImportError as err:
                    row["jax_privacy"] = {"missing": str(err)}
                try:
                    load_opake()
                    if b <= OPAKE_MAX_BINS:
                        row["opake"] = opake_budget(strategy.gram(b).g0, sigma, delta, budget)
                    else:
                        row["opake"] = {"missing": f"b = {b} > {OPAKE_MAX_BINS}: a list of b² floats"}
                except ImportError as err:
                    row["opake"] = {"missing": str(err)}
            print(format_row(row), flush=True)
            rows.append(row)
    return rows


HEADER = ("| n | b | bands | σ | δ | epscert certified ε | width | samples | CPU s | JAX Privacy ε̂ [±2 s.e.] "
          "(samples, CPU s) | Opake ε upper (resolution, CPU s) |\n|---|---|---|---|---|---|---|---|---|---|---|")


def format_row(row: dict) -> str:
    """One line of the printed table from a row of the JSON (``--reprint`` reads them back)."""
    mine, delta = row["epscert"], row["delta"]
    jp, op = row.get("jax_privacy", {}), row.get("opake", {})
    jp_text = jp.get("missing", "not run") if "samples" not in jp else rival_text(jp, delta)
    op_text = op.get("missing", "not run") if "upper" not in op else \
        f"{fmt(op['upper'])} ({op['resolution']:.1e}, {op['cpu_s']:.1f})"
    side = "" if mine.get("direction", "both") == "both" else f" ({mine['direction']} only)"
    return (f"| {row['n']} | {row['b']} | {row['bands']} | {row['sigma']} | {delta:.0e} | [{bound(mine['lower'], False)}, "
            f"{bound(mine['upper'], True)}]{side} | {100 * mine['width']:.1f}% | {mine['samples']:,} | {mine['cpu_s']:.1f} "
            f"| {jp_text} | {op_text} |")


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_SAMPLES} samples, δ = 1e-6 only")
    parser.add_argument("--samples", type=int, default=None, help="samples per direction and pass (default: "
                        f"the Accountant's; --quick: {QUICK_SAMPLES})")
    parser.add_argument("--no-rivals", action="store_true", help="epscert only")
    parser.add_argument("--skip-large", action="store_true", help="leave out n = b = 10^4 (several GB)")
    parser.add_argument("--only", nargs="+", metavar="N,B,SIGMA", help="these configurations only, e.g. 2000,2000,1.2")
    parser.add_argument("--deltas", nargs="+", type=float, default=None, help=f"δ values (default {DELTAS})")
    parser.add_argument("--direction", choices=("both", "remove", "add"), default="both",
                        help="the side certified (default both, as a user's call; one side shows which one binds)")
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--reprint", nargs="+", metavar="JSON", help="print the table of saved runs and stop")
    args = parser.parse_args(argv)
    if args.reprint:
        rows = [row for path in args.reprint for row in json.loads(Path(path).read_text())]
        print(HEADER)
        for row in rows:
            print(format_row(row))
        return rows
    if args.samples is not None and args.samples < 2:
        raise SystemExit(f"--samples must be >= 2, got --samples={args.samples}")
    samples = args.samples if args.samples is not None else (QUICK_SAMPLES if args.quick else None)
    deltas = tuple(args.deltas) if args.deltas else (DELTAS[:1] if args.quick else DELTAS)
    configs = [c for c in CONFIGS if not (args.skip_large and c["b"] >= 10_000)]
    if args.only:
        wanted = {tuple(float(x) for x in item.split(",")) for item in args.only}
        configs = [c for c in configs if (c["n"], c["b"], c["sigma"]) in wanted]
        if not configs:
            raise SystemExit(f"--only matches no configuration of {[(c['n'], c['b'], c['sigma']) for c in CONFIGS]}")
    print(f"# matrix_production{' --quick' if args.quick else ''}: {platform.node()}, {os.cpu_count()} cores, "
          f"one thread; epscert {epscert.__version__}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
          flush=True)
    rows = run(configs, deltas, samples, not args.no_rivals, args.direction)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = "matrix_production-quick.json" if args.quick else "matrix_production.json"
    if args.only or args.deltas or args.direction != "both":  # a partial run: its own file, the full table kept
        name = f"matrix_production-partial-{args.direction}.json"
    (out / name).write_text(json.dumps(rows, indent=1, default=str))
    return rows


if __name__ == "__main__":
    main()
