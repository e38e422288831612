# SPDX-License-Identifier: MIT
# Shared helpers for the setup scripts (sourced, not run).

log() { printf '\033[1m[fastmlip]\033[0m %s\n' "$*" >&2; }

# step NAME RETRY_HINT CMD...: runs CMD; on failure names the step and how to retry,
# so a failed network fetch or a held apt lock is never a bare exit code.
step() {
  local name=$1 hint=$2
  shift 2
  log "$name"
  local start=$SECONDS
  if ! "$@"; then
    log "FAILED: $name"
    log "  fix the cause above (network to the Debian mirror, apt lock, disk space), then retry:"
    log "    $hint"
    exit 1
  fi
  # Each step's wall time, so that a slow CI run shows where its minutes went.
  log "done: $name ($((SECONDS - start)) s)"
}

# Where built dependencies live: outside the checkout, so fresh clones on this machine share them.
fastmlip_cache_dir() { echo "${FASTMLIP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/fastmlip}"; }
