#!/usr/bin/env bash
# A sweep through Beam's Flink job-server container and the PortableRunner.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

: "${FLINK_MASTER:?set FLINK_MASTER (host:port of the Flink REST endpoint)}"
: "${IMAGE:?set IMAGE (SDK container with epscert, from deploy/dataflow/Dockerfile)}"
: "${SPEC:?set SPEC (sweep spec file)}"
: "${OUTPUT:?set OUTPUT (a directory every task manager can write)}"
: "${FLINK_VERSION:=1.19}"
: "${BEAM_VERSION:=2.77.0}"

run docker run --rm -d --name epscert-flink-job-server --network host \
  "apache/beam_flink${FLINK_VERSION}_job_server:${BEAM_VERSION}" --flink-master="$FLINK_MASTER"
trap 'run docker stop epscert-flink-job-server' EXIT

cd "$EPSCERT_ROOT"
run python -m pipelines.sweep "$SPEC" --output "$OUTPUT" \
  --runner PortableRunner --job_endpoint localhost:8099 --artifact_endpoint localhost:8098 \
  --environment_type DOCKER --environment_config "$IMAGE"
