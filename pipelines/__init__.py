"""Runnable epscert jobs: one module per job (certify, sweep), each with ``run(argv) -> PipelineResult``."""

from pipelines.quiet import quiet_beam_import

quiet_beam_import()  # before any job module imports Beam (see pipelines.quiet)
