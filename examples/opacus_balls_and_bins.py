"""Opacus with Balls-and-Bins batches on synthetic data; epscert's ε beside Opacus's Poisson ε.

Needs the [torch] extra:  pip install -e '.[torch]'  then  python examples/opacus_balls_and_bins.py
Runs in seconds: 5 epochs of a logistic regression on 10,000 synthetic points (batches of 200, 250
steps). The accountant is Opacus's by name, ``PrivacyEngine(accountant="epscert")``; it is asked
for ε in the middle and at the end of every epoch, as a training loop that logs would, and each
answer is the deterministic Balls-and-Bins PLD bracket's (no Monte Carlo) for the steps taken.
"""

from __future__ import annotations

import warnings

import opacus
import torch

import epscert
from epscert.integrations import opacus as eo
from epscert.integrations.torch import data_loader

N, BATCH, EPOCHS, SIGMA, DELTA = 10_000, 200, 5, 1.0, 1e-5


def main() -> None:
    warnings.filterwarnings("ignore", message="Secure RNG turned off")
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(N, 10, generator=gen)
    y = (x @ torch.randn(10, generator=gen) > 0).long()
    dataset = torch.utils.data.TensorDataset(x, y)
    model = torch.nn.Linear(10, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)

    bs = epscert.BatchSampler(sampler="balls_and_bins", dataset_size=N, batch_size=BATCH, epochs=EPOCHS, seed=0)
    eo.register()  # PrivacyEngine(accountant="epscert") from here on
    engine = opacus.PrivacyEngine(accountant="epscert")
    model, optimizer, loader = engine.make_private(
        module=model, optimizer=optimizer, data_loader=data_loader(dataset, bs),  # one epoch per iteration
        noise_multiplier=SIGMA, max_grad_norm=1.0, poisson_sampling=False)
    engine.accountant.bind(bs)  # optional: checks every step against the sampler (and handles prefetching)
    log = []
    for _ in range(EPOCHS):
        for step, (xb, yb) in enumerate(loader):  # 50 steps; empty batches still take their noisy step
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(xb), yb).backward()
            optimizer.step()
            if step + 1 in (len(loader) // 2, len(loader)):
                log.append(f"{len(engine.accountant)}: {engine.get_epsilon(DELTA):.3f}")
    accuracy = (model(x).argmax(1) == y).float().mean().item()

    poisson = opacus.accountants.PRVAccountant()  # what Opacus alone prints: Poisson at q = 1/T
    poisson.history = list(engine.accountant.history)  # [(σ, 1/T, steps)], Opacus's own format
    eps = engine.get_epsilon(DELTA)
    cert = engine.accountant.last_certificate
    print(f"steps: {len(engine.accountant)} ({EPOCHS} epochs of {bs.steps_per_epoch})  train accuracy: {accuracy:.3f}")
    print(f"epscert ε after each half epoch (steps: ε): {', '.join(log)}")
    print(f"epscert ε (Balls-and-Bins, certified, {cert.bound}): {eps:.3f} at δ={DELTA:g}")
    print(f"Opacus PRV ε (Poisson, same σ and steps):         {poisson.get_epsilon(DELTA):.3f} at δ={DELTA:g}")


if __name__ == "__main__":
    main()
