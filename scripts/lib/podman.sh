# shellcheck shell=bash
# podman on hosts that limit containers (docs/guides/INSTALL.md "The container image"). Some
# hosts (a container itself, cgroups v1 or hybrid, a process that may not raise its limits) refuse
# podman's defaults: crun cannot run in cgroups' hybrid mode, and neither runtime may set the
# rlimits podman asks for (RLIMIT_NOFILE 1048576, this process's RLIMIT_NPROC). These functions
# find flags that work, in order: none; explicit limits at or below this process's; the same with
# runc; for builds also --isolation=chroot (no runtime at all).
#
# fedsched_podman_run_flags IMAGE
#   Sets the array PODMAN_RUN_FLAGS to the first flags with which IMAGE runs /bin/true
#   works; returns 1 when none does, with the last error in PODMAN_WHY. PODMAN_RUN_FLAGS set in
#   the environment (a string) is taken as is.
# fedsched_podman_build ARGS...
#   `podman build ARGS...` with the first flags that build; returns podman's status otherwise.

# The rlimits a container may have here: this process's hard limits, nproc capped (setting
# RLIMIT_NPROC to the host's own value was refused where lower values were not).
_fedsched_podman_ulimits() {
  local nofile nproc
  nofile=$(ulimit -Hn)
  [ "$nofile" = unlimited ] || [ "$nofile" -gt 65536 ] && nofile=65536
  nproc=$(ulimit -Hu)
  [ "$nproc" = unlimited ] || [ "$nproc" -gt 4096 ] && nproc=4096
  echo "--ulimit=nofile=$nofile:$nofile --ulimit=nproc=$nproc:$nproc"
}

_fedsched_podman_candidates() {
  local limits
  limits=$(_fedsched_podman_ulimits)
  echo ""
  echo "$limits"
  command -v runc > /dev/null && echo "--runtime=runc $limits"
  return 0
}

# shellcheck disable=SC2034  # PODMAN_WHY is for the caller
fedsched_podman_run_flags() {
  local image=$1 flags
  if [ -n "${PODMAN_RUN_FLAGS:-}" ]; then
    read -r -a PODMAN_RUN_FLAGS <<< "$PODMAN_RUN_FLAGS"
    return 0
  fi
  while IFS= read -r flags; do
    # shellcheck disable=SC2086
    if PODMAN_WHY=$(timeout 120 podman run --rm --entrypoint=/bin/true $flags "$image" 2>&1); then
      read -r -a PODMAN_RUN_FLAGS <<< "$flags"
      return 0
    fi
  done < <(_fedsched_podman_candidates)
  return 1
}

fedsched_podman_build() {
  local flags rc=1
  while IFS= read -r flags; do
    # shellcheck disable=SC2086
    if podman build $flags "$@"; then
      [ -z "$flags" ] || echo "podman build worked with: $flags"
      return 0
    else
      rc=$?
    fi
    echo "podman build failed with flags '${flags}'; trying the next" >&2
  done < <(_fedsched_podman_candidates; echo "--isolation=chroot")
  return $rc
}
