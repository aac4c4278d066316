#!/usr/bin/env bash
# Build and push the epscert SDK/launcher image, then the certify and sweep flex templates.
#   PROJECT=my-project BUCKET=my-bucket deploy/dataflow/build.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

: "${PROJECT:?set PROJECT (Google Cloud project id)}"
: "${BUCKET:?set BUCKET (a GCS bucket name, without gs://)}"
: "${REGION:=us-central1}"
: "${REPOSITORY:=epscert}"
: "${TAG:=0.1.0}"
IMAGE="${IMAGE:-${REGION}-docker.pkg.dev/${PROJECT}/${REPOSITORY}/epscert:${TAG}}"

run docker build -f "$EPSCERT_ROOT/deploy/dataflow/Dockerfile" -t "$IMAGE" "$EPSCERT_ROOT"
run docker push "$IMAGE"
for job in certify sweep; do
  run gcloud dataflow flex-template build "gs://${BUCKET}/templates/epscert-${job}.json" \
    --project "$PROJECT" --image "$IMAGE" --sdk-language PYTHON \
    --metadata-file "$EPSCERT_ROOT/deploy/dataflow/${job}-metadata.json"
done
