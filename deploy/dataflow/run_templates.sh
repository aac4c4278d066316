#!/usr/bin/env bash
# Launch the flex templates built by build.sh (no local Python needed).
#   PROJECT=my-project BUCKET=my-bucket SPEC=gs://my-bucket/specs/grid.yaml deploy/dataflow/run_templates.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

: "${PROJECT:?set PROJECT}"
: "${BUCKET:?set BUCKET (without gs://)}"
: "${SPEC:?set SPEC (gs:// path of a sweep spec)}"
: "${REGION:=us-central1}"
: "${TAG:=0.1.0}"
IMAGE="${IMAGE:-${REGION}-docker.pkg.dev/${PROJECT}/epscert/epscert:${TAG}}"
STAMP="$(date -u +%Y%m%d-%H%M%S)"

# Sweep: resumable; re-running with the same output computes only what is missing.
run gcloud dataflow flex-template run "epscert-sweep-${STAMP}" \
  --project "$PROJECT" --region "$REGION" \
  --template-file-gcs-location "gs://${BUCKET}/templates/epscert-sweep.json" \
  --parameters "command=sweep,spec=${SPEC},output=gs://${BUCKET}/epscert/sweeps/manual-${STAMP}" \
  --parameters "sdk_container_image=${IMAGE}"

# Certify: values with commas need gcloud's alternative delimiter (^~^).
run gcloud dataflow flex-template run "epscert-certify-${STAMP}" \
  --project "$PROJECT" --region "$REGION" \
  --template-file-gcs-location "gs://${BUCKET}/templates/epscert-certify.json" \
  --parameters "^~^command=certify~sampler=balls_and_bins~sigma=0.35~steps=1000~epsilons=1,2,4,8~method=importance~samples=100000000~output=gs://${BUCKET}/epscert/certify/${STAMP}.parquet~sdk_container_image=${IMAGE}"
