"""Benchmark scripts: they print figures; nothing here asserts a timing."""
