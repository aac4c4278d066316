"""JAX Privacy's and Opake's Monte Carlo for BandMF with Balls-and-Bins, called as epscert's checks need.

Shared by ``benchmarks/matrix.py`` and ``tests/matrix``: both libraries are test extras (JAX
Privacy through ``[jax]``, Opake through ``[test]``) and are imported lazily here.

Conventions (checked by tests/matrix/test_jax_privacy.py and tests/matrix/test_opake.py):

- The mechanism is y = C x + σ z with σ the noise multiplier relative to the clip norm (no norm of
  C in it), C the lower-triangular Toeplitz matrix whose first column's nonzeros are ``c_col``, and
  x_j the participation pattern of bin j (1 at t ≡ j mod b, t < n).
- JAX Privacy: ``get_privacy_loss_sample(BallsInBinsSampling(iterations=n, cycle_length=b),
  noise_multiplier=σ, c_col, positive_sample=...)`` returns loss samples ℓ of the pair
  P = (1/b) Σ_j N(C x_j, σ² I), Q = N(0, σ² I): ``positive_sample=True`` draws y ~ P and returns
  L(y) = log dP/dQ (epscert's REMOVE loss), ``False`` draws y ~ Q and returns -L(y) (ADD). Either
  way δ(ε) = E[(1 - e^{ε - ℓ})_+].
- Opake: ``bnb_mc_pld(gram, num_bins, sigma, config)`` takes ``gram`` = the b x b Gram matrix of the
  *unscaled* modes m_j = C x_j, G0_jk = <m_j, m_k> (epscert's ``Strategy.gram(b).g0``; Opake's own
  ``toeplitz_gram_matrix(c_col, n, b, None, False)`` returns the same matrix), flattened row-major
  (G0 is symmetric, so the order does not matter), and ``sigma`` = the noise multiplier σ: it works
  with G0/σ². Evidence: (G0 s², σ s) gives the same PLD as (G0, σ) to the last bit; C = I gives
  upper bounds on the Balls-and-Bins bracket at σ/√k that converge to it as the resolution falls,
  while the Gram matrix of the *unit* modes (I) gives values far below the truth; b = 1 likewise
  against the Gaussian mechanism with sensitivity ||C 1||. Its ``delta_at(ε)`` is an upper bound
  on max(δ_remove, δ_add) that holds except with probability ``mc_failure_probability`` and is
  never below ``mc_resolution`` (the unresolved mass sits at +∞).

Opake 0.16.1's Python package does not import on Python 3.11 (``import opake.accounting`` fails in
its own dataclass definitions with "__weakref__ slot disallowed"), so :func:`load_opake` loads its
compiled extension module ``opake/api/accounting/core/opake_accounting*.so`` directly.
"""

from __future__ import annotations

import functools
import glob
import importlib.util
import math
from pathlib import Path

import numpy as np


def binomial_c_col(bands: int) -> np.ndarray:
    """c_i = binom(2i, i)/4^i for i < ``bands`` (c_0 = 1, c_i = c_{i-1} (2i - 1)/(2i)): the first column
    of the square root of the prefix-sum matrix, the strategy of the issue's benchmarks, truncated."""
    out = np.ones(bands)
    for i in range(1, bands):
        out[i] = out[i - 1] * (2 * i - 1) / (2 * i)
    return out


@functools.lru_cache(maxsize=1)
def load_opake():
    """Opake's compiled extension module (ImportError when opake-accounting is not installed)."""
    spec = importlib.util.find_spec("opake")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("opake-accounting is not installed: pip install opake-accounting==0.16.1")
    for root in spec.submodule_search_locations:
        found = sorted(glob.glob(str(Path(root) / "api" / "accounting" / "core" / "opake_accounting*.so")))
        if found:
            ext = importlib.util.spec_from_file_location("opake_accounting", found[0])
            module = importlib.util.module_from_spec(ext)
            ext.loader.exec_module(module)
            return module
    raise ImportError("opake-accounting is installed but its extension opake_accounting*.so was not found")


def opake_config(resolution: float, failure_prob: float = 1e-6, seed: int = 42, discretization: float = 1e-4):
    """Opake's DiscretizationConfig with Monte Carlo resolution and failure probability."""
    return load_opake().DiscretizationConfig(discretization=discretization, mc_resolution=resolution,
                                             mc_failure_probability=failure_prob, seed=seed)


def opake_pld(g0: np.ndarray, sigma: float, config):
    """Opake's ``bnb_mc_pld`` for the unscaled mode Gram matrix ``g0`` (b x b) at noise multiplier σ."""
    g0 = np.asarray(g0, dtype=np.float64)
    return load_opake().bnb_mc_pld(g0.ravel().tolist(), int(g0.shape[0]), float(sigma), config)


def jax_privacy_losses(c_col, iterations: int, cycle_length: int, sigma: float, remove: bool, samples: int,
                       seed: int) -> np.ndarray:
    """JAX Privacy's loss samples of the pair (module docstring): REMOVE if ``remove`` else ADD."""
    from jax_privacy import batch_selection
    from jax_privacy.experimental.monte_carlo import sample_generation

    strategy = batch_selection.BallsInBinsSampling(iterations=int(iterations), cycle_length=int(cycle_length))
    losses, _ = sample_generation.get_privacy_loss_sample(
        strategy=strategy, noise_multiplier=float(sigma), c_col=np.asarray(c_col, dtype=np.float64),
        seed=int(seed), positive_sample=bool(remove), num_samples=int(samples))
    return np.asarray(losses, dtype=np.float64)


def delta_from_losses(losses: np.ndarray, epsilons) -> tuple[np.ndarray, np.ndarray]:
    """(mean, standard error) of (1 - e^{ε - ℓ})_+ over the loss samples, at each ε."""
    losses = np.asarray(losses, dtype=np.float64)
    eps = np.atleast_1d(np.asarray(epsilons, dtype=np.float64))
    values = -np.expm1(np.minimum(eps[:, None] - losses[None, :], 0.0))
    n = losses.size
    return values.mean(axis=1), values.std(axis=1, ddof=1) / math.sqrt(n)

