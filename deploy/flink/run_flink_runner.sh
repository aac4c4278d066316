#!/usr/bin/env bash
# A sweep on an existing Flink cluster through Beam's FlinkRunner.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

: "${FLINK_MASTER:?set FLINK_MASTER (host:port of the Flink REST endpoint)}"
: "${IMAGE:?set IMAGE (SDK container with epscert, from deploy/dataflow/Dockerfile)}"
: "${SPEC:?set SPEC (sweep spec file)}"
: "${OUTPUT:?set OUTPUT (a directory every task manager can write)}"
: "${FLINK_VERSION:=1.19}"
read -r -a extra <<< "${EXTRA_FLAGS:-}"

cd "$EPSCERT_ROOT"
run python -m pipelines.sweep "$SPEC" --output "$OUTPUT" \
  --runner FlinkRunner --flink_master "$FLINK_MASTER" --flink_version "$FLINK_VERSION" \
  --environment_type DOCKER --environment_config "$IMAGE" --parallelism "${PARALLELISM:-8}" \
  ${extra[@]+"${extra[@]}"}
