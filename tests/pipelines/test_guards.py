"""Issue 17 item 6 (part): guards before work, refusing with the flag, the estimate and the way out."""

from __future__ import annotations

import pytest

from epscert.config import CertifyConfig
from pipelines import cli


def _config(**kwargs) -> CertifyConfig:
    return CertifyConfig(**{"sampler": "balls_and_bins", "sigma": 1.0, "steps": 10, "epsilons": (1.0,), **kwargs})


def test_dense_epsilon_grid_is_streamed_with_the_same_sums():
    # issue 25 (#17's leftover): a 10,001-value grid used to be refused (2.44 GiB per block); it is now
    # streamed in chunks of at most ADD_ELEMENTS values, and the integer sums do not depend on the chunking:
    # its rows at ε = 1, 2 equal a run on the grid (1, 2) alone (naive: the same losses, the key leaves ε out)
    import tracemalloc

    import epscert

    dense = [i / 1000 for i in range(10_001)]
    tracemalloc.start()
    table = epscert.certify(sigma=1.0, steps=10, epsilons=dense, method="naive", samples=3000, direction="remove")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 512 * 2**20  # before streaming: one 2.44 GiB temporary
    small = epscert.certify(sigma=1.0, steps=10, epsilons=[1, 2], method="naive", samples=3000, direction="remove")
    got = {r["epsilon"]: (r["delta"], r["delta_upper"]) for r in table.to_pylist() if r["epsilon"] in (1.0, 2.0)}
    assert got == {r["epsilon"]: (r["delta"], r["delta_upper"]) for r in small.to_pylist()}
    with pytest.raises(ValueError, match=r"epsilons has 20001 values, more than MAX_EPSILONS=20000"):
        _config(epsilons=[i / 1000 for i in range(20_001)])


def test_memory_guard_does_not_refuse_samplers_for_costs_they_do_not_have():
    # deterministic draws one Gaussian per sample, whatever T and E (T*E*32 bytes would be 149 GiB here)
    assert _config(sampler="deterministic", steps=10**9, epochs=5, methods=("naive",)).samples
    # shuffle_persistent draws one epoch (E folded into sigma): 10^6 x 1 x 32 bytes, not x 100 epochs
    assert _config(sampler="shuffle_persistent", steps=10**6, epochs=100, methods=("naive",)).samples


def test_memory_guard_advice_names_only_methods_the_sampler_has():
    with pytest.raises(ValueError, match="lower steps or epochs") as err:
        _config(sampler="shuffle", steps=10**8, epochs=10, methods=("naive",))
    assert "order_stats" not in str(err.value)
    with pytest.raises(ValueError, match="order_stats"):
        _config(steps=10**8, epochs=10, methods=("naive",))


def test_sweep_output_checked_before_work(tmp_path, small_spec, capsys):
    (tmp_path / "out" / "results.parquet").mkdir(parents=True)
    assert cli.main(["sweep", str(small_spec), "--output", str(tmp_path / "out"), "--no-progress"]) == 2
    assert "results.parquet" in capsys.readouterr().err
    assert cli.main(["sweep", str(small_spec), "--output", str(tmp_path / "o2"), "--output-shards", "1000000"]) == 2
    assert "output_shards=1000000" in capsys.readouterr().err


def test_fine_pld_discretization_refused_before_sampling(tmp_path, capsys):
    # was: the whole sampling phase, then a 421 GiB allocation traceback (8e10 grid points)
    argv = ["certify", "--sigma", "1", "--steps", "10", "--samples", "100000000", "--pld-discretization", "1e-10"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "pld_discretization=1e-10" in err and "TiB" in err and "--no-baselines" in err
    assert cli.main(argv + ["--no-baselines", "--sampler", "poisson", "--method", "pld_upper"]) == 2
    assert "coarser --pld-discretization" in capsys.readouterr().err
    spec = tmp_path / "spec.yaml"
    spec.write_text("sampler: poisson\nsigma: 1.0\nsteps: 10\nepsilons: [1]\npld_discretization: 1.0e-10\n")
    assert cli.main(["sweep", str(spec), "--output", str(tmp_path / "out")]) == 2
    assert "spec key pld_discretization" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_pld_size_estimate_matches_dp_accounting():
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    from epscert.results.cost import poisson_pld_cost
    for sigma, steps in ((1.0, 10), (2.0, 100)):
        pld = pld_lib.from_gaussian_mechanism(standard_deviation=sigma, sampling_prob=1 / steps,
                                              value_discretization_interval=1e-2)
        assert poisson_pld_cost(sigma, steps, 1e-2).points == pytest.approx(pld._pmf_remove.size, rel=0.05)


def test_tiny_sigma_baselines_refused_with_the_way_out(capsys):
    # was: 145 s and 2.9 GB of baselines; now refused at once with the estimate and --no-baselines
    assert cli.main(["certify", "--sigma", "0.05", "--steps", "100", "--samples", "1000"]) == 2
    err = capsys.readouterr().err
    assert "analytic baselines at sigma=0.05" in err and "GiB" in err and "--no-baselines" in err


def test_certify_dry_run_prints_the_estimates_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "r.parquet"
    argv = ["certify", "--sigma", "1", "--steps", "10", "--samples", "10000000", "--output", str(out), "--dry-run"]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "balls_and_bins sigma=1 steps=10" in printed and "samples=10000000" in printed
    assert "estimated CPU time" in printed and "estimated peak memory" in printed and "nothing was run" in printed
    assert list(tmp_path.iterdir()) == []


def test_sweep_dry_run_writes_nothing(tmp_path, small_spec, capsys):
    out = tmp_path / "out"
    assert cli.main(["sweep", str(small_spec), "--output", str(out), "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert "4 configurations to compute (0 already complete)" in printed and "CPU-hours" in printed
    assert not out.exists()


def _huge_spec(tmp_path):
    spec = tmp_path / "huge.yaml"
    sigmas = ", ".join(str(0.5 + i / 1000) for i in range(100))
    spec.write_text(f"sampler: balls_and_bins\nsigma: [{sigmas}]\nsteps: 1000\nmethod: naive\n"
                    "samples: 2000000000\nepsilons: [1]\n")
    return spec


def test_sweep_above_the_cpu_hours_cap_refuses_to_start(tmp_path, capsys):
    # was: a sweep of 2e11 samples started without a word, with an ETA of 231 days
    spec, out = _huge_spec(tmp_path), tmp_path / "out"
    assert cli.main(["sweep", str(spec), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert "CPU-hours" in err and "max_cpu_hours=24" in err and "--max-cpu-hours" in err
    assert not (out / "parts").exists() or not any((out / "parts").iterdir())
    assert cli.main(["sweep", str(spec), "--output", str(out), "--max-cpu-hours", "0"]) == 2
    assert "max_cpu_hours must be in (0.0, inf), got max_cpu_hours='0'" in capsys.readouterr().err


def test_api_refuses_a_pld_grid_past_the_memory_cap_before_work():
    # the same guard as the CLI's --pld-discretization (issue 17 item 6), in the Python API: refused from
    # the estimate (the PLD itself would need about 58 TiB)
    import epscert

    with pytest.raises(ValueError, match="pld_discretization"):
        epscert.certify(sampler="poisson", sigma=1.0, steps=10, epsilons=[1.0], method="pld_upper",
                        pld_discretization=1e-10)


def test_cost_estimate_sees_a_dense_grid():
    """Issue 35 item 5: the estimate grows with the ε grid by the measured per-ε costs of the analytic
    bounds and by the rows (seconds and bytes), so --dry-run and the CPU-hours cap see a dense grid.
    Checked against the row count the run will produce (an independent count), not a stored figure."""
    from epscert.results import cost
    from epscert.results.rows import row_count
    grid = tuple(i * 1e-3 for i in range(14_001))
    for sampler, method in [("poisson", "pld_upper"), ("shuffle", "cube_lower_bound"), ("balls_and_bins", "auto")]:
        one = _config(sampler=sampler, methods=method, steps=50, samples=1000)
        dense = _config(sampler=sampler, methods=method, steps=50, samples=1000, epsilons=grid)
        c1, c2 = cost.config_cost(one), cost.config_cost(dense)
        rows = sum(row_count(dense, m) for m in dense.resolved)
        assert c2.seconds - c1.seconds >= (rows - len(one.epsilons) * 3) * cost.ROW_SECONDS
        assert c2.peak_bytes - c1.peak_bytes >= (rows - 3) * cost.ROW_BYTES * 0.99


def test_certify_dry_run_estimate_grows_with_the_grid(tmp_path, capsys):
    out = tmp_path / "r.parquet"
    estimates = []
    for eps in ("1", ",".join(str(i * 1e-3) for i in range(14_001))):
        argv = ["certify", "--sigma", "1", "--steps", "50", "--samples", "1000", "--epsilons", eps,
                "--output", str(out), "--dry-run"]
        assert cli.main(argv) == 0
        printed = capsys.readouterr().out
        line = next(x for x in printed.splitlines() if "estimated CPU time" in x)
        estimates.append(line)
    assert estimates[0] != estimates[1]
    assert list(tmp_path.iterdir()) == []
