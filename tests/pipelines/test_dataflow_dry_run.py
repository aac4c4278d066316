"""The certify job builds for Dataflow (``--dry_run=True``: no credentials, nothing submitted).

Needs the ``gcp`` extra (``pip install -e '.[gcp]'``); skipped without it. Slow: opt-in with -m slow.
"""

from __future__ import annotations

import importlib

import pytest

from pipelines import certify

pytestmark = pytest.mark.slow


def _gcp_missing() -> str | None:
    for module in ("apache_beam.io.gcp.gcsio", "apache_beam.runners.dataflow.internal.apiclient",
                   "google.cloud.storage"):
        try:
            importlib.import_module(module)
        except ImportError as err:
            return f"apache-beam[gcp] not installed ({module}: {err})"
    return None


@pytest.mark.skipif(_gcp_missing() is not None, reason=str(_gcp_missing()))
def test_certify_dry_runs_on_dataflow():
    result = certify.run([
        "--sampler", "balls_and_bins", "--sigma", "0.35", "--steps", "1000", "--epsilons", "1,2,4,8",
        "--method", "importance", "--samples", "1000000",
        "--output", "gs://epscert-dry-run/out/results.parquet",
        "--runner=DataflowRunner", "--project=epscert-dry-run", "--region=us-central1",
        "--temp_location=gs://epscert-dry-run/tmp", "--dry_run=True",
        "--sdk_container_image=us-docker.pkg.dev/epscert-dry-run/epscert/epscert:0.1.0",
    ])
    assert result.state == "DONE"
    names = {t.unique_name for t in result.job.proto_pipeline.components.transforms.values()}
    for step in ("Certify/PlanShards", "Certify/RunShards", "Certify/MergeShards", "Certify/FinaliseMonteCarlo",
                 "Certify/ComputeAnalytic", "WriteResults/WriteParquet"):
        assert step in names, step
