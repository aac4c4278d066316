"""Fixtures of the pipeline tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def small_spec(tmp_path) -> Path:
    """Four cheap configurations (two samplers x two sigmas), naive and importance methods."""
    path = tmp_path / "spec.yaml"
    path.write_text(
        "sampler: balls_and_bins\n"
        "sigma: [0.6, 0.9]\n"
        "steps: 10\n"
        "method: [naive, importance]\n"
        "samples: 600\n"
        "epsilons: [0.5, 1, 2]\n"
        "seed: 11\n"
        "shards: 3\n"
    )
    return path
