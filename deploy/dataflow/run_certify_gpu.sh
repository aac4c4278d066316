#!/usr/bin/env bash
# The certify job on Dataflow GPU workers (one NVIDIA L4 per G2 worker), JAX backend, float64.
# Build the image first: docker build -f deploy/dataflow/Dockerfile.gpu -t "$IMAGE" . && docker push "$IMAGE"
#   PROJECT=my-project BUCKET=my-bucket deploy/dataflow/run_certify_gpu.sh
# One SDK process per worker (no_use_multiple_sdk_containers) so that one JAX process owns the GPU.
# An L4 has slow float64: measure with benchmarks/gpu.py there before sizing a job on it.
# The command is run_certify.sh's, with the GPU image, worker type and accelerator added.
set -euo pipefail

: "${GPU_TYPE:=nvidia-l4}"
: "${MACHINE_TYPE:=g2-standard-4}"
export IMAGE_NAME="${IMAGE_NAME:-epscert-gpu}" METHOD="${METHOD:-naive}" SAMPLES="${SAMPLES:-500000000}" \
  OUTPUT_NAME="${OUTPUT_NAME:-certify-gpu}" MAX_WORKERS="${MAX_WORKERS:-8}"
exec "$(dirname "${BASH_SOURCE[0]}")/run_certify.sh" \
  --backend jax --shards "${SHARDS:-64}" --machine_type "$MACHINE_TYPE" \
  --dataflow_service_options "worker_accelerator=type:${GPU_TYPE};count:1;install-nvidia-driver" \
  --experiments no_use_multiple_sdk_containers
