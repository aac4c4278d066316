"""Exact values and analytic bounds (SPEC §7): one module per baseline."""
