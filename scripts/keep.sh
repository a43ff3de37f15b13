#!/usr/bin/env bash
# keep: runs one process of a node and starts it again when it dies, so a
# crash of one process does not take the node down (foreman, which the
# Procfile is written for, stops every process when one exits).
#
#   scripts/keep.sh NAME COMMAND [ARGS...]
#
# - A process that exits 0 (the learner after SAPO_ROUNDS, or any process
#   asked to stop) ends keep with 0.
# - Any other end (a signal, a nonzero status) is one line on stderr, naming
#   the process, how it ended and the restart, then a restart after a pause
#   of 1 s, doubling to 30 s; a run of more than 60 s resets the pause.
# - A crash loop ends keep with the process's status: SAPO_RESTARTS (default
#   5) restarts within 60 s.
# - SIGTERM or SIGINT to keep goes to the process, and keep ends when it does.
set -u
[ $# -ge 2 ] || { echo "usage: scripts/keep.sh NAME COMMAND [ARGS...]" >&2; exit 2; }
name=$1
shift
limit=${SAPO_RESTARTS:-5}
[[ "$limit" =~ ^[0-9]+$ ]] || { echo "keep: SAPO_RESTARTS '$limit' is not a count" >&2; exit 2; }
child=0 stopping=0 pause=1 restarts=()
stop() {
  stopping=1
  [ "$child" != 0 ] && kill -TERM "$child" 2> /dev/null
}
trap stop TERM INT
while :; do
  started=$(date +%s)
  "$@" &
  child=$!
  # for scripts/swarm.sh stop: a process busy in a long step (a large
  # model's batch or load) can outlive this script when foreman kills it
  [ -n "${SAPO_RUN:-}" ] && [ -d "$SAPO_RUN" ] && echo "$child" > "$SAPO_RUN/$name.pid"
  # wait returns early when a trapped signal arrives: wait until the child is gone
  while :; do
    wait "$child"
    rc=$?
    kill -0 "$child" 2> /dev/null || break
  done
  child=0
  [ "$stopping" = 1 ] && exit "$rc"
  [ "$rc" = 0 ] && exit 0
  now=$(date +%s)
  [ $((now - started)) -gt 60 ] && pause=1
  how="exited with status $rc"
  [ "$rc" -gt 128 ] && how="was killed by signal $((rc - 128)) ($(kill -l $((rc - 128)) 2> /dev/null || echo '?'))"
  recent=()
  for t in "${restarts[@]+"${restarts[@]}"}"; do [ $((now - t)) -lt 60 ] && recent+=("$t"); done
  restarts=("${recent[@]+"${recent[@]}"}")
  if [ "${#restarts[@]}" -ge "$limit" ]; then
    echo "keep: $name $how; it was restarted $limit times in 60 s, giving up (SAPO_RESTARTS)" >&2
    exit "$rc"
  fi
  restarts+=("$now")
  echo "keep: $name $how; restarting it in $pause s (restart ${#restarts[@]} in 60 s, at most $limit)" >&2
  sleep "$pause" &
  wait $!
  [ "$stopping" = 1 ] && exit "$rc"
  pause=$((pause * 2 > 30 ? 30 : pause * 2))
done
