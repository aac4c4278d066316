#!/usr/bin/env bash
# Build and stage the certify job for Dataflow without credentials or submission (--dry_run=True).
# Needs `pip install -e '.[gcp]'`. tests/pipelines/test_dataflow_dry_run.py does the same (slow).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

cd "$EPSCERT_ROOT"
if [[ "${DRY_RUN:-0}" != "1" ]] && ! python -c "import apache_beam.runners.dataflow.internal.apiclient" 2>/dev/null; then
  echo "dry_run.sh: Beam's Dataflow runner needs the gcp extra, not installed here: pip install -e '.[gcp]'" >&2
  exit 2
fi
run python -m pipelines.certify \
  --sampler balls_and_bins --sigma 0.35 --steps 1000 --epsilons 1,2,4,8 --method importance \
  --samples 1000000 --output "gs://${BUCKET:-epscert-dry-run}/out/results.parquet" \
  --runner DataflowRunner --project "${PROJECT:-epscert-dry-run}" --region "${REGION:-us-central1}" \
  --temp_location "gs://${BUCKET:-epscert-dry-run}/tmp" --dry_run=True \
  --sdk_container_image "${IMAGE:-us-docker.pkg.dev/epscert-dry-run/epscert/epscert:0.1.0}"
