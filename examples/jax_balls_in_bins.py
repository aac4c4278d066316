"""JAX twin: DP-SGD on synthetic data with JAX Privacy's BallsInBinsSampling, certified by epscert.

Needs the [jax] extra:  pip install -e '.[jax]'  then  python examples/jax_balls_in_bins.py
BallsInBinsSampling keeps one bin per example for all cycles: epscert certifies it as
balls_and_bins_persistent, i.e. one epoch at σ/√E (the deterministic Balls-and-Bins PLD bracket).
JAX Privacy's accountants (``DpsgdTrainingAccountant``) cover Poisson and fixed-size batches only,
not ``BallsInBinsSampling``, so the comparison printed is the Poisson ε of the same σ, q = 1/T and
steps from dp_accounting's PLD accountant, as a Poisson analysis would report it. Runs in seconds:
5 epochs of 50 steps on 10,000 synthetic points. ε is also printed in the middle of each cycle
(``steps_done``): the bins of the cycle's first steps have been released once more than the others.
"""

from __future__ import annotations

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
from jax_privacy import batch_selection

from epscert.integrations.jax_privacy import accountant_for

N, T, EPOCHS, SIGMA, CLIP, LR, DELTA = 10_000, 50, 5, 1.0, 1.0, 0.5, 1e-5


def main() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, 10)).astype(np.float32)
    y = (x @ rng.standard_normal(10) > 0).astype(np.float32)
    w = jnp.zeros(10)

    def loss(w, xi, yi):
        return jnp.logaddexp(0.0, -(2 * yi - 1) * (xi @ w))

    per_example = jax.jit(jax.vmap(jax.grad(loss), in_axes=(None, 0, 0)))
    strategy = batch_selection.BallsInBinsSampling(iterations=T * EPOCHS, cycle_length=T)
    key = jax.random.key(0)
    for idx in strategy.batch_iterator(N, rng=0):
        g = per_example(w, x[idx], y[idx]) if len(idx) else jnp.zeros((0, 10))
        g = g / jnp.maximum(1.0, jnp.linalg.norm(g, axis=1, keepdims=True) / CLIP)
        key, sub = jax.random.split(key)
        noisy = g.sum(0) + SIGMA * CLIP * jax.random.normal(sub, (10,))
        w = w - LR * noisy / (N / T)
    accuracy = float(((x @ np.asarray(w) > 0) == (y > 0)).mean())
    acc = accountant_for(strategy, N, noise_multiplier=SIGMA)
    log = [f"{n}: {acc.get_epsilon(DELTA, steps_done=n):.3f}" for n in range(T // 2, T * EPOCHS, T)]
    eps = acc.get_epsilon(DELTA)
    poisson = dp_accounting.pld.PLDAccountant()
    poisson.compose(dp_accounting.PoissonSampledDpEvent(1 / T, dp_accounting.GaussianDpEvent(SIGMA)), T * EPOCHS)
    print(f"steps: {T * EPOCHS} ({EPOCHS} epochs of {T})  train accuracy: {accuracy:.3f}")
    print(f"epscert ε in the middle of each cycle (steps: ε): {', '.join(log)}")
    print(f"epscert ε (BallsInBinsSampling = balls_and_bins_persistent, certified): {eps:.3f} at δ={DELTA:g}")
    print(f"Poisson ε (dp_accounting PLD, same σ, q = 1/T and steps):             "
          f"{poisson.get_epsilon(DELTA):.3f} at δ={DELTA:g}")


if __name__ == "__main__":
    main()
