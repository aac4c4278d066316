"""Opacus with epscert's batches: a real PrivacyEngine on a real torch model (extra ``[torch]``)."""

from __future__ import annotations

import math
import warnings

import pytest

torch = pytest.importorskip("torch", reason="needs the [torch] extra: pip install -e '.[torch]'")
opacus = pytest.importorskip("opacus", reason="needs the [torch] extra: pip install -e '.[torch]'")

import epscert  # noqa: E402
from epscert.integrations import opacus as eo  # noqa: E402
from epscert.integrations.torch import data_loader  # noqa: E402


def tiny_problem(n: int = 64, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=gen)
    y = (x[:, 0] > 0).long()
    model = torch.nn.Sequential(torch.nn.Linear(4, 2))
    return torch.utils.data.TensorDataset(x, y), model


def train(model, optimizer, loader, steps: int):
    done = 0
    for x, y in loader:
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward() if len(x) else model(x).sum().backward()
        optimizer.step()
        done += 1
        if done == steps:
            return done
    return done


def test_collate_gives_zero_length_tensors_of_the_right_shape_and_dtype():
    ds = torch.utils.data.TensorDataset(torch.randn(40, 3, 2), torch.arange(40))
    bs = epscert.BatchSampler(sampler="balls_and_bins", dataset_size=40, batch_size=1, epochs=1, seed=1)
    batches = list(data_loader(ds, bs))
    assert len(batches) == 40
    empty = [b for b in batches if len(b[0]) == 0]
    assert empty, "T = 40 bins for 40 records: P(no empty bin) = 40!/40^40 < 1e-15"
    x, y = empty[0]
    assert x.shape == (0, 3, 2) and x.dtype == torch.float32 and y.shape == (0,) and y.dtype == torch.int64
    assert sum(len(b[0]) for b in batches) == 40


def test_real_privacy_engine_counts_steps_and_certifies_whole_epochs():
    ds, model = tiny_problem()
    bs = epscert.BatchSampler(sampler="balls_and_bins", dataset_size=64, batch_size=8, epochs=3, seed=0)
    engine = opacus.PrivacyEngine()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    kw = dict(samples=20_000, seed=4)
    model, opt, loader = eo.make_private(engine, module=model, optimizer=opt, dataset=ds, batch_sampler=bs,
                                         noise_multiplier=2.0, max_grad_norm=1.0, accountant_kwargs=kw)
    acc = engine.accountant
    assert isinstance(acc, opacus.accountants.IAccountant) and acc.mechanism() == "epscert"
    assert opt.expected_batch_size == pytest.approx(8.0)
    before = [p.detach().clone() for p in model.parameters()]
    assert train(model, opt, loader, steps=11) == 11  # one epoch of T = 8 and 3 steps of the next
    assert len(acc) == 11
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    # 11 steps: the second epoch is started, so the certificate is that of 2 whole epochs
    expected = epscert.Accountant(noise_multiplier=2.0, steps=8, epochs=2, **kw).get_epsilon(1e-2)
    assert engine.get_epsilon(1e-2) == expected and math.isfinite(expected)
    assert engine.get_epsilon(1e-2) > epscert.Accountant(noise_multiplier=2.0, steps=8, epochs=1,
                                                         **kw).get_epsilon(1e-2)
    # state_dict round trip into a fresh accountant for the same run
    fresh = eo.accountant_class()(bs, 2.0, **kw)
    fresh.load_state_dict(acc.state_dict())
    assert len(fresh) == 11 and fresh.get_epsilon(1e-2) == expected
    other = eo.accountant_class()(epscert.BatchSampler(sampler="poisson", dataset_size=64, batch_size=8,
                                                       epochs=3), 2.0, **kw)
    with pytest.raises(ValueError, match="batch_sampler"):
        other.load_state_dict(acc.state_dict())
    with pytest.raises(ValueError, match="noise_multiplier"):
        acc.step(noise_multiplier=1.0, sample_rate=0.1)


def test_guard_warns_for_shuffling_loader_with_poisson_epsilon():
    ds, model = tiny_problem()
    engine = opacus.PrivacyEngine(accountant="rdp")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(ds, batch_size=8, shuffle=True)
    model, opt, loader = engine.make_private(module=model, optimizer=opt, data_loader=loader,
                                             noise_multiplier=1.0, max_grad_norm=1.0, poisson_sampling=False)
    train(model, opt, loader, steps=len(loader))  # one epoch: the shuffle lower bound is the cube bound (fast)
    with pytest.warns(eo.SamplingMismatchWarning, match="does not apply"):
        report = eo.check_sampling(engine, opt, loader, 1e-5)
    assert report["mismatch"] and report["shuffle_epsilon_lower"] > 0
    assert report["opacus_epsilon"] == engine.get_epsilon(1e-5)
    # Poisson loader: no warning
    ds, model = tiny_problem()
    engine = opacus.PrivacyEngine(accountant="rdp")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model, opt, loader = engine.make_private(module=model, optimizer=opt, data_loader=torch.utils.data.DataLoader(
        ds, batch_size=8), noise_multiplier=1.0, max_grad_norm=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", eo.SamplingMismatchWarning)
        assert not eo.check_sampling(engine, opt, loader, 1e-5)["mismatch"]


@pytest.mark.slow  # the calibration computes its Poisson and deterministic baselines too (~30 s)
def test_make_private_with_epsilon_uses_epscert_calibration():
    ds, model = tiny_problem()
    bs = epscert.BatchSampler(sampler="deterministic", dataset_size=64, batch_size=8, epochs=2)
    engine = opacus.PrivacyEngine()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model, opt, loader = eo.make_private_with_epsilon(engine, module=model, optimizer=opt, dataset=ds,
                                                      batch_sampler=bs, target_epsilon=4.0, target_delta=1e-5,
                                                      max_grad_norm=1.0, accountant_kwargs={"method": "exact"})
    sigma = opt.noise_multiplier
    # deterministic batches: one Gaussian at σ/√E, whose exact ε(1e-5) must be <= 4 and close to it
    assert epscert.Accountant(noise_multiplier=sigma, steps=8, epochs=2, sampler="deterministic",
                              method="exact").get_epsilon(1e-5) <= 4.0
    assert epscert.Accountant(noise_multiplier=sigma * 0.99, steps=8, epochs=2,
                              sampler="deterministic", method="exact").get_epsilon(1e-5) > 4.0
    assert train(model, opt, loader, steps=16) == 16
    assert 3.9 < engine.get_epsilon(1e-5) <= 4.0


def test_ten_epochs_of_234_steps_match_epscert_accountant_and_beat_opacus_poisson():
    """The issue's reference point: 10 epochs of 234 steps at σ = 1, δ = 1e-5 (one bracket, ~5 s).

    The value is the deterministic Balls-and-Bins PLD bracket's upper side, not a Monte Carlo
    estimate (which cannot reach δ = 1e-5 at the default samples) nor the deterministic domination
    bound (ε ≈ 17.9), and it lies below both of Opacus's Poisson ε for the same σ and steps,
    computed by Opacus's own PRV and RDP accountants.
    """
    bs = epscert.BatchSampler(sampler="balls_and_bins", dataset_size=60_000, batch_size=256, epochs=10)
    acc = eo.accountant_class()(bs, 1.0)
    for _ in range(2340):
        acc.step(noise_multiplier=1.0, sample_rate=1 / 234)
    mine = acc.get_epsilon(1e-5)
    cert = acc.last_certificate
    assert (cert.method, cert.bound, cert.guarantee, cert.error_prob) == (
        "bracket_upper", "allocation_bracket_upper", "upper_bound", None)
    direct = epscert.Accountant(noise_multiplier=1.0, steps=234, epochs=10)
    assert mine == direct.get_epsilon(1e-5)  # the bracket is cached per process: no second computation
    assert math.isfinite(mine) and mine == pytest.approx(1.0476, abs=5e-3)
    poisson = [(1.0, 1 / 234, 2340)]  # Opacus's history format: (σ, q = 1/T, steps)
    prv, rdp = opacus.accountants.PRVAccountant(), opacus.accountants.RDPAccountant()
    prv.history, rdp.history = list(poisson), list(poisson)
    assert mine < prv.get_epsilon(1e-5) and mine < rdp.get_epsilon(1e-5)


def test_partial_epoch_reports_the_whole_epochs_started():
    """After k steps of epoch e the ε is that of e whole epochs (a prefix is post-processing)."""
    T, sigma, delta = 8, 2.0, 1e-5
    bs = epscert.BatchSampler(sampler="balls_and_bins", dataset_size=64, batch_size=8, epochs=2, seed=0)
    acc = eo.accountant_class()(bs, sigma)
    whole = {e: epscert.Accountant(noise_multiplier=sigma, steps=T, epochs=e).get_epsilon(delta) for e in (1, 2)}
    assert 0 < whole[1] < whole[2] < math.inf
    assert acc.get_epsilon(delta) == 0.0  # nothing released yet
    seen = {}
    for k in range(1, 2 * T + 1):
        acc.step(noise_multiplier=sigma, sample_rate=1 / T)
        seen[k] = acc.get_epsilon(delta)
        assert seen[k] == whole[-(-k // T)], k
    assert {seen[1], seen[T // 2], seen[T]} == {whole[1]} and {seen[T + 1], seen[2 * T]} == {whole[2]}
    assert acc.last_certificate.method == "bracket_upper"
    with pytest.raises(ValueError, match="steps"):
        acc.step(noise_multiplier=sigma, sample_rate=1 / T)  # no certified batches after the run
