"""Monte Carlo engine: samplers of privacy losses, shards, exact per-shard sums and their merge.

May import numpy, scipy and the ground floor (epscert.params, epscert.rng); never bounds, analytic or above.
"""
