#!/usr/bin/env bash
# The plain command: the certify job submitted from this machine with the DataflowRunner.
# Needs `pip install -e '.[gcp]'` here and the image from build.sh for the workers.
#   PROJECT=my-project BUCKET=my-bucket deploy/dataflow/run_certify.sh [extra job or Beam flags...]
# IMAGE_NAME, METHOD, SAMPLES, OUTPUT_NAME and MAX_WORKERS change the defaults (run_certify_gpu.sh
# uses them); extra arguments are appended to the job's command line.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

: "${PROJECT:?set PROJECT}"
: "${BUCKET:?set BUCKET (without gs://)}"
: "${REGION:=us-central1}"
: "${TAG:=0.1.0}"
IMAGE="${IMAGE:-${REGION}-docker.pkg.dev/${PROJECT}/epscert/${IMAGE_NAME:-epscert}:${TAG}}"

cd "$EPSCERT_ROOT"
run python -m pipelines.certify \
  --sampler balls_and_bins --sigma "${SIGMA:-0.35}" --steps "${STEPS:-1000}" --epochs 1 \
  --epsilons "${EPSILONS:-1,2,4,8}" --method "${METHOD:-importance}" --samples "${SAMPLES:-100000000}" \
  --error-prob 0.01 --seed "${SEED:-0}" --direction both \
  --output "gs://${BUCKET}/epscert/${OUTPUT_NAME:-certify}/results.parquet" \
  --runner DataflowRunner --project "$PROJECT" --region "$REGION" \
  --temp_location "gs://${BUCKET}/tmp" --sdk_container_image "$IMAGE" \
  --max_num_workers "${MAX_WORKERS:-50}" "$@"
