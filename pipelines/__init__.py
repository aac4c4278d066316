"""Runnable epscert jobs: one module per job (certify, sweep), each with ``run(argv) -> PipelineResult``."""
