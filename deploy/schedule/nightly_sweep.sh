#!/usr/bin/env bash
# Cron entry point: one sweep per UTC day into OUT_ROOT/YYYY-MM-DD, on this machine's cores.
# A second run the same day resumes that directory (only configurations without a complete
# part are computed); a run still in progress makes the next one exit quietly.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

: "${OUT_ROOT:?set OUT_ROOT (directory for the dated results)}"
: "${SPEC:=$EPSCERT_ROOT/deploy/schedule/nightly-spec.yaml}"
: "${EPSCERT:=epscert}"
: "${LOCK:=${TMPDIR:-/tmp}/epscert-nightly-sweep.lock}"
read -r -a runner <<< "${RUNNER_FLAGS:---direct_num_workers=0 --direct_running_mode=multi_processing}"

if command -v flock > /dev/null; then
  exec 9>"$LOCK"
  if ! flock -n 9; then
    echo "epscert: a sweep is still running (lock $LOCK); not starting another" >&2
    exit 0
  fi
else
  echo "epscert: flock not found; running without the overlap guard" >&2
fi
run "$EPSCERT" sweep "$SPEC" --output "${OUT_ROOT}/{date}" --no-progress ${runner[@]+"${runner[@]}"}
