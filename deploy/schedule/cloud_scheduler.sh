#!/usr/bin/env bash
# Schedule the sweep flex template with Cloud Scheduler. First build and push the image and the
# templates once: PROJECT=p BUCKET=b deploy/dataflow/build.sh (see deploy/README.md).
# Each run writes gs://BUCKET/epscert/sweeps/YYYY-MM-DD ('{date}' is expanded by the job, in UTC);
# running the scheduler job again the same day resumes that directory.
#   PROJECT=p BUCKET=b SERVICE_ACCOUNT=sa@p.iam.gserviceaccount.com deploy/schedule/cloud_scheduler.sh
# SPEC= picks the sweep spec: a local file (uploaded to gs://BUCKET/specs/) or a gs:// URI (used as it is);
# default: deploy/schedule/nightly-spec.yaml. BODY_OUT= keeps a copy of the launch body (for checking).
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

SPEC="${SPEC:-$HERE/nightly-spec.yaml}"
if [[ "$SPEC" == gs://* ]]; then
  spec_uri="$SPEC"
else
  [[ -f "$SPEC" ]] || { echo "cloud_scheduler.sh: SPEC=$SPEC is not a file (give a local spec or a gs:// URI)" >&2; exit 2; }
  spec_uri="gs://${BUCKET}/specs/$(basename "$SPEC")"
fi

body="$(mktemp)"
trap 'rm -f "$body"' EXIT
sed -e "s|@BUCKET@|${BUCKET}|g" -e "s|@IMAGE@|${IMAGE}|g" -e "s|@SPEC@|${spec_uri}|g" "$HERE/launch_body.json" > "$body"
if [[ -n "${BODY_OUT:-}" ]]; then cp "$body" "$BODY_OUT"; fi

if [[ "$SPEC" != gs://* ]]; then
  run gcloud storage cp "$SPEC" "$spec_uri"
fi
run gcloud scheduler jobs create http epscert-nightly-sweep \
  --project "$PROJECT" --location "$REGION" --schedule "$SCHEDULE" --time-zone UTC \
  --uri "https://dataflow.googleapis.com/v1b3/projects/${PROJECT}/locations/${REGION}/flexTemplates:launch" \
  --http-method POST --headers Content-Type=application/json \
  --oauth-service-account-email "$SERVICE_ACCOUNT" \
  --message-body-from-file "$body"
