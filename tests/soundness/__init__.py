"""Statistical soundness, merge invariance and bad-input tests of the core Python API."""
