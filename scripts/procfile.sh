#!/usr/bin/env bash
# Runs the processes of a Procfile as foreman does, for a machine that has
# no foreman (a lent GPU machine has bash and no Debian packages): each
# line "name: command" runs under sh, as many copies as the formation
# says; their output, each line behind "HH:MM:SS name.N | ", goes to
# standard output; when one process ends, the others are asked to stop
# (SIGTERM, then SIGKILL after 10 s), and so they are on SIGTERM or SIGINT.
# Exits with the status of the process that ended first.
#
#   scripts/procfile.sh [-f PROCFILE] [-d DIR] [-m all=1,redis=0,generator=2]
#
# Each process gets PORT as foreman gives it (5000 for the first line,
# 100 more for each line after, 1 more for each copy).
set -u
file=Procfile dir=. formation=all=1
while [ $# -gt 0 ]; do
  case "$1" in
    -f) file=$2; shift 2 ;;
    -d) dir=$2; shift 2 ;;
    -m) formation=$2; shift 2 ;;
    start) shift ;;
    *) echo "procfile: unknown flag '$1' (usage: scripts/procfile.sh [-f PROCFILE] [-d DIR] [-m FORMATION])" >&2; exit 2 ;;
  esac
done
[ -f "$file" ] || { echo "procfile: $file not found" >&2; exit 2; }
file=$(cd "$(dirname "$file")" && pwd)/$(basename "$file")
cd "$dir" || exit 2

declare -A count
IFS=, read -r -a pairs <<< "$formation"
for p in "${pairs[@]}"; do
  [[ "$p" =~ ^([A-Za-z0-9_-]+)=([0-9]+)$ ]] || { echo "procfile: -m: '$p' is not NAME=COUNT" >&2; exit 2; }
  count[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
done

# each line of a process's output behind its time and name
label() {
  local name=$1 line
  while IFS= read -r line || [ -n "$line" ]; do printf '%(%H:%M:%S)T %s | %s\n' -1 "$name" "$line"; done
}

pids=() names=()
stop_all() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2> /dev/null; done
  for _ in $(seq 100); do
    local up=0
    for p in "${pids[@]}"; do kill -0 "$p" 2> /dev/null && up=1; done
    [ $up = 0 ] && return
    sleep 0.1
  done
  for p in "${pids[@]}"; do kill -KILL "$p" 2> /dev/null; done
}
trap 'stop_all; wait; exit 130' TERM INT

port=5000
while IFS= read -r entry || [ -n "$entry" ]; do
  [[ "$entry" =~ ^([A-Za-z0-9_-]+):[[:space:]]*(.+)$ ]] || continue
  name=${BASH_REMATCH[1]} cmd=${BASH_REMATCH[2]}
  n=${count[$name]:-${count[all]:-1}}
  for i in $(seq 1 "$n"); do
    PORT=$((port + i - 1)) sh -c "$cmd" > >(label "$name.$i") 2>&1 &
    pids+=($!)
    names+=("$name.$i")
    echo "$(date +%H:%M:%S) procfile | $name.$i started (pid $!)"
  done
  port=$((port + 100))
done < "$file"
[ ${#pids[@]} -gt 0 ] || { echo "procfile: $file starts no process under -m $formation" >&2; exit 2; }

wait -n -p done "${pids[@]}"
rc=$?
for k in "${!pids[@]}"; do [ "${pids[$k]}" = "$done" ] && echo "$(date +%H:%M:%S) procfile | ${names[$k]} ended (status $rc): stopping the others"; done
stop_all
wait
exit $rc
