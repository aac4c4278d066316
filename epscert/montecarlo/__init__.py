"""The Monte Carlo engine: shards and their streams, exact sums and accumulators, backend dispatch.

It knows no mechanism. A mechanism (DP-SGD's pairs in :mod:`epscert.dpsgd`, the matrix mechanism in
:mod:`epscert.matrix`) plugs in by handing the engine a *sampler object*; the configuration builds it
(``config.mc_sampler(method)``, :mod:`epscert.config.samplers`), and no module of this package imports a
mechanism, the configuration or anything above its floor (``tests/test_house.py`` reads the imports).

The protocol (:mod:`epscert.montecarlo.protocol` has the two abstract bases):

- ``draws_values``: False for a *loss sampler*, True for a *value sampler*.
- ``width()`` floats per sample in the widest array a draw makes; ``block_size()`` samples per numpy
  block (a function of the configuration only: it shapes the stream).
- A loss sampler: ``draw(rng, n, direction)`` -> (n,) directional losses ℓ, no NaN, with
  δ_direction(ε) = s · E[(1 - e^{ε-ℓ})_+]; ``log_scale(direction)`` = log s (0 without importance
  sampling). The engine folds Y = (1 - e^{ε-ℓ})_+ into exact sums on the 2^-52 grid, rounded up.
- A value sampler: ``draw(rng, n, direction, epsilons)`` -> (|ε|, n) values Y >= 0 with
  E[Y] = δ_direction(ε); ``value_range(direction, epsilons)`` -> (|ε|,) proven upper ends of Y. The
  engine folds Y and min(Y, τ_k) (the truncation levels of :mod:`epscert.bounds.truncated_lcb`, scaled
  by the range) into exact sums.
- ``jax_kernels_module``: None, or the dotted name of the mechanism's module of JAX kernels (a name, not
  an import: the kernels read the sampler; the engine imports the module by name, and it imports JAX
  lazily), offering
  ``check_supported(sampler, method)`` (ValueError when it does not cover the request),
  ``shard_block(sampler, method, directions, samples)`` (device block of a stream) and, for a loss
  sampler, ``shard_loss_sums(sampler, method, direction, key_words, samples, epsilons, progress, start,
  stream_samples)`` -> exact :class:`~epscert.montecarlo.accumulator.DirectionSums`; for a value
  sampler, ``shard_value_blocks(sampler, method, direction, key_words, samples, epsilons, start,
  stream_samples)`` -> host (|ε|, m) value arrays and, optionally, ``shard_value_sums(sampler, method,
  direction, key_words, samples, epsilons, ranges, levels, progress, start, stream_samples)`` -> the same
  exact sums as the host would form (Y, Y², min(Y, τ_k)), summed on the device (taken where offered).
  ``shard_block`` is a function of the configuration only for the matrix kernels (one compile serves every
  sample count); the DP-SGD kernels still cap it by the stream's sample count. The shared device machinery (blocks, exact grid
  sums, the key scheme) is :mod:`epscert.montecarlo.backends.jax_backend`.

Whatever the sampler, a run is one stream of blocks keyed by (seed, configuration key, stream,
direction, block) (:mod:`epscert.rng`), cut into shards (:mod:`epscert.montecarlo.shard`) whose exact
integer sums merge to the same accumulator in any layout (:mod:`epscert.montecarlo.accumulator`).

May import numpy, scipy, the ground floor (names, checks, rng) and :mod:`epscert.bounds`.
"""
