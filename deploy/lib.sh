# Shared by the deploy scripts: `run CMD...` executes CMD, or with DRY_RUN=1 prints it, one
# shell-quoted word per argument, so the recipes can be checked without a cloud or a cluster.
# shellcheck shell=bash

run() {
  if [[ "${DRY_RUN:-0}" == "1" ]]; then
    printf '%q ' "$@"
    printf '\n'
  else
    "$@"
  fi
}

# The repository root (deploy scripts live two levels below it).
EPSCERT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export EPSCERT_ROOT
