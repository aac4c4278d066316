#!/usr/bin/env bash
# Schedule the sweep flex template (deploy/dataflow/build.sh) with Cloud Scheduler.
# Each run writes gs://BUCKET/epscert/sweeps/YYYY-MM-DD ('{date}' is expanded by the job, in UTC);
# running the scheduler job again the same day resumes that directory.
#   PROJECT=p BUCKET=b SERVICE_ACCOUNT=sa@p.iam.gserviceaccount.com deploy/schedule/cloud_scheduler.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

: "${PROJECT:?set PROJECT}"
: "${BUCKET:?set BUCKET (without gs://)}"
: "${SERVICE_ACCOUNT:?set SERVICE_ACCOUNT (may launch Dataflow jobs and read the bucket)}"
: "${REGION:=us-central1}"
: "${SCHEDULE:=0 3 * * *}"
: "${TAG:=0.1.0}"
IMAGE="${IMAGE:-${REGION}-docker.pkg.dev/${PROJECT}/epscert/epscert:${TAG}}"
HERE="$EPSCERT_ROOT/deploy/schedule"

body="$(mktemp)"
trap 'rm -f "$body"' EXIT
sed -e "s|@BUCKET@|${BUCKET}|g" -e "s|@IMAGE@|${IMAGE}|g" "$HERE/launch_body.json" > "$body"

run gcloud storage cp "$HERE/nightly-spec.yaml" "gs://${BUCKET}/specs/nightly-spec.yaml"
run gcloud scheduler jobs create http epscert-nightly-sweep \
  --project "$PROJECT" --location "$REGION" --schedule "$SCHEDULE" --time-zone UTC \
  --uri "https://dataflow.googleapis.com/v1b3/projects/${PROJECT}/locations/${REGION}/flexTemplates:launch" \
  --http-method POST --headers Content-Type=application/json \
  --oauth-service-account-email "$SERVICE_ACCOUNT" \
  --message-body-from-file "$body"
