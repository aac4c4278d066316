#!/usr/bin/env bash
# A sweep on a Spark 3 standalone cluster through Beam's SparkRunner.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

: "${SPARK_MASTER:?set SPARK_MASTER (e.g. spark://spark-master:7077)}"
: "${IMAGE:?set IMAGE (SDK container with epscert, from deploy/dataflow/Dockerfile)}"
: "${SPEC:?set SPEC (sweep spec file)}"
: "${OUTPUT:?set OUTPUT (a directory every executor can write)}"
read -r -a extra <<< "${EXTRA_FLAGS:-}"

cd "$EPSCERT_ROOT"
run python -m pipelines.sweep "$SPEC" --output "$OUTPUT" \
  --runner SparkRunner --spark_master_url "$SPARK_MASTER" --spark_version 3 \
  --environment_type DOCKER --environment_config "$IMAGE" \
  ${extra[@]+"${extra[@]}"}
