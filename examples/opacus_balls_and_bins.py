"""Opacus with Balls-and-Bins batches on synthetic data; epscert's ε beside Opacus's Poisson ε.

Needs the [torch] extra:  pip install -e '.[torch]'  then  python examples/opacus_balls_and_bins.py
Runs in seconds: one epoch of a logistic regression on 2,000 synthetic points.
"""

from __future__ import annotations

import warnings

import opacus
import torch

import epscert
from epscert.integrations.opacus import make_private

# δ = 1e-3 so that a 50,000-sample Monte Carlo certificate is finite in seconds; at δ = 1e-5 today's
# Monte Carlo ε search returns inf (the deterministic Balls-and-Bins bracket, issue of the lead, fixes it).
N, BATCH, EPOCHS, SIGMA, DELTA = 2_000, 100, 1, 1.0, 1e-3


def main() -> None:
    warnings.filterwarnings("ignore", message="Secure RNG turned off")
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(N, 10, generator=gen)
    y = (x @ torch.randn(10, generator=gen) > 0).long()
    dataset = torch.utils.data.TensorDataset(x, y)
    model = torch.nn.Linear(10, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)

    bs = epscert.BatchSampler(sampler="balls_and_bins", dataset_size=N, batch_size=BATCH, epochs=EPOCHS, seed=0)
    engine = opacus.PrivacyEngine()
    model, optimizer, loader = make_private(engine, module=model, optimizer=optimizer, dataset=dataset,
                                            batch_sampler=bs, noise_multiplier=SIGMA, max_grad_norm=1.0,
                                            accountant_kwargs={"samples": 50_000})
    for xb, yb in loader:  # len(bs) = 20 steps; empty batches still take their noisy step
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(xb), yb).backward()
        optimizer.step()
    accuracy = (model(x).argmax(1) == y).float().mean().item()

    poisson = opacus.accountants.PRVAccountant()
    poisson.history = [(SIGMA, 1 / bs.steps_per_epoch, len(bs))]
    print(f"steps: {len(engine.accountant)}  train accuracy: {accuracy:.3f}")
    print(f"epscert ε (Balls-and-Bins, certified, β=0.01): {engine.get_epsilon(DELTA):.3f} at δ={DELTA:g}")
    print(f"Opacus PRV ε (Poisson, same σ and steps):      {poisson.get_epsilon(DELTA):.3f} at δ={DELTA:g}")


if __name__ == "__main__":
    main()
