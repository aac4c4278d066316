"""Shared by the bad-input suites: make every Monte Carlo sampler fail if it is ever reached."""

from __future__ import annotations

from epscert.montecarlo.protocol import LossSampler


def trip_sampler_draws(monkeypatch, boom) -> None:
    """Replace ``draw`` on every LossSampler subclass that defines one with ``boom``."""
    stack = [LossSampler]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if "draw" in vars(cls):
            monkeypatch.setattr(cls, "draw", boom)
