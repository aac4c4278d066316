#!/usr/bin/env bash
# The certify job on Dataflow GPU workers (one NVIDIA L4 per G2 worker), JAX backend, float64.
# Build the image first: docker build -f deploy/dataflow/Dockerfile.gpu -t "$IMAGE" . && docker push "$IMAGE"
#   PROJECT=my-project BUCKET=my-bucket deploy/dataflow/run_certify_gpu.sh
# One SDK process per worker (no_use_multiple_sdk_containers) so that one JAX process owns the GPU.
# An L4 has slow float64: measure with benchmarks/gpu.py there before sizing a job on it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

: "${PROJECT:?set PROJECT}"
: "${BUCKET:?set BUCKET (without gs://)}"
: "${REGION:=us-central1}"
: "${TAG:=0.1.0}"
: "${GPU_TYPE:=nvidia-l4}"
: "${MACHINE_TYPE:=g2-standard-4}"
IMAGE="${IMAGE:-${REGION}-docker.pkg.dev/${PROJECT}/epscert/epscert-gpu:${TAG}}"

cd "$EPSCERT_ROOT"
run python -m pipelines.certify \
  --sampler balls_and_bins --sigma "${SIGMA:-0.35}" --steps "${STEPS:-1000}" --epochs 1 \
  --epsilons "${EPSILONS:-1,2,4,8}" --method "${METHOD:-naive}" --samples "${SAMPLES:-500000000}" \
  --error-prob 0.01 --seed "${SEED:-0}" --direction both --backend jax --shards "${SHARDS:-64}" \
  --output "gs://${BUCKET}/epscert/certify-gpu/results.parquet" \
  --runner DataflowRunner --project "$PROJECT" --region "$REGION" \
  --temp_location "gs://${BUCKET}/tmp" --sdk_container_image "$IMAGE" \
  --machine_type "$MACHINE_TYPE" \
  --dataflow_service_options "worker_accelerator=type:${GPU_TYPE};count:1;install-nvidia-driver" \
  --experiments no_use_multiple_sdk_containers \
  --max_num_workers "${MAX_WORKERS:-8}"
