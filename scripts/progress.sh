#!/usr/bin/env bash
# Progress of long steps: a line at least every SAPO_PROGRESS_SECONDS
# (default 20) while one runs, saying what runs, how far it is and the
# time gone. Sourced by bench/run.sh, scripts/model.sh and
# scripts/experiment.sh; run as a command by `make bench`:
#
#   scripts/progress.sh [--detail SHELL] LABEL COMMAND [ARGS...]
#
#   progress_run [--detail SHELL] [--limit SECONDS] LABEL COMMAND [ARGS...]
#       runs COMMAND with its output (stdout and stderr together) passed to
#       progress_line line by line as it comes (echo; a caller may define
#       its own after sourcing this file), and after each
#       SAPO_PROGRESS_SECONDS without a line prints "LABEL: 1 min 40 s,
#       at: ..." with COMMAND's last line, or what the shell code SHELL
#       prints (how far a download is, say). The status is COMMAND's.
#       With --limit, COMMAND runs in a session of its own, and it and
#       every process it started are ended (SIGTERM, SIGKILL 10 s later)
#       once it has run that long: status 124. A caller that is
#       interrupted meanwhile ends them with progress_stop.
#   progress_stop
#       ends the session of the command progress_run --limit is running
#   progress_elapsed SECONDS
#       "1 min 40 s"
#   progress_every
#       SAPO_PROGRESS_SECONDS, checked (status 2 and a line when it is not
#       a positive whole number)

progress_every() {
  local s=${SAPO_PROGRESS_SECONDS:-20}
  [[ "$s" =~ ^[1-9][0-9]*$ ]] || { echo "progress: SAPO_PROGRESS_SECONDS '$s' is not a positive whole number of seconds" >&2; return 2; }
  echo "$s"
}

progress_elapsed() {
  if [ "$1" -ge 60 ]; then echo "$(($1 / 60)) min $(($1 % 60)) s"; else echo "$1 s"; fi
}

progress_line() { printf '%s\n' "$1"; }

progress_session=
progress_stop() {
  [ -n "$progress_session" ] || return 0
  kill -TERM -- "-$progress_session" 2> /dev/null || return 0
  for _ in $(seq 100); do
    kill -0 -- "-$progress_session" 2> /dev/null || return 0
    sleep 0.1
  done
  kill -KILL -- "-$progress_session" 2> /dev/null || true
}

progress_run() {
  local detail="" limit="" label every t0=$SECONDS patience line partial="" last="" fd status dir quiet_since cut left
  while :; do
    case "${1:-}" in
      --detail) detail=$2; shift 2 ;;
      --limit) limit=$2; shift 2 ;;
      *) break ;;
    esac
  done
  label=$1
  shift
  every=$(progress_every) || return 2
  dir=$(mktemp -d)
  if [ -n "$limit" ]; then
    # a session of its own (the subshell below is no group leader, so
    # setsid execs the command in place): its process id names the
    # session's group, which ends it and all it started
    exec {fd}< <(sh -c 'echo $$ > "$0"; exec setsid "$@"' "$dir/pid" "$@" 2>&1; echo $? > "$dir/status")
    for _ in $(seq 50); do [ -s "$dir/pid" ] && break; sleep 0.02; done
    progress_session=$(cat "$dir/pid" 2> /dev/null || true)
  else
    exec {fd}< <("$@" 2>&1; echo $? > "$dir/status")
  fi
  quiet_since=$SECONDS cut=0
  while :; do
    if [ -n "$limit" ] && [ $cut = 0 ] && [ $((SECONDS - t0)) -ge "$limit" ]; then
      progress_stop
      cut=1
    fi
    # until the next progress line is due, or the limit
    patience=$((every - (SECONDS - quiet_since)))
    if [ -n "$limit" ] && [ $cut = 0 ]; then
      left=$((limit - (SECONDS - t0)))
      [ "$left" -lt "$patience" ] && patience=$left
    fi
    [ "$patience" -ge 1 ] || patience=1
    if IFS= read -r -t "$patience" -u "$fd" line; then
      line=$partial$line partial=""
      last=$line quiet_since=$SECONDS
      progress_line "$line"
    else
      status=$?
      # a time-out keeps what came of a line so far; anything else is the end
      [ "$status" -gt 128 ] || break
      partial+=$line
      if [ $((SECONDS - quiet_since)) -ge "$every" ]; then
        echo "$label: $(progress_elapsed $((SECONDS - t0))), at: $(if [ -n "$detail" ]; then eval "$detail"; else echo "${last:-its start}"; fi)"
        quiet_since=$SECONDS
      fi
    fi
  done
  [ -z "$partial$line" ] || progress_line "$partial$line"
  exec {fd}<&-
  progress_session=
  # the process substitution writes the status after the output ends
  for _ in $(seq 100); do [ -s "$dir/status" ] && break; sleep 0.05; done
  status=$(cat "$dir/status" 2> /dev/null || true)
  rm -rf "$dir"
  [ $cut = 0 ] || return 124
  return "${status:-1}"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  progress_run "$@"
fi
