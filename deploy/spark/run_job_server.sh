#!/usr/bin/env bash
# A sweep through Beam's Spark 3 job-server container and the PortableRunner.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

: "${SPARK_MASTER:?set SPARK_MASTER (e.g. spark://spark-master:7077)}"
: "${IMAGE:?set IMAGE (SDK container with epscert, from deploy/dataflow/Dockerfile)}"
: "${SPEC:?set SPEC (sweep spec file)}"
: "${OUTPUT:?set OUTPUT (a directory every executor can write)}"
: "${BEAM_VERSION:=2.77.0}"

run docker run --rm -d --name epscert-spark-job-server --network host \
  "apache/beam_spark3_job_server:${BEAM_VERSION}" --spark-master-url="$SPARK_MASTER"
trap 'run docker stop epscert-spark-job-server' EXIT

cd "$EPSCERT_ROOT"
run python -m pipelines.sweep "$SPEC" --output "$OUTPUT" \
  --runner PortableRunner --job_endpoint localhost:8099 --artifact_endpoint localhost:8098 \
  --environment_type DOCKER --environment_config "$IMAGE"
