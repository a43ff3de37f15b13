#!/usr/bin/env bash
# Runs a swarm of N SAPO nodes on this machine: one shared redis-server (the
# pool) and, per node, its own process set (Procfile without
# the redis line) with its own run folder and ipc endpoints.
#
#   scripts/swarm.sh start [--nodes N] [--ij I/J[,I/J...]] [--models M[,M...]] [--mixes F[,F...]]
#                          [--rounds R] [--run DIR]
#                          [--seed S] [--wait] [--generators G] [--redis URL]
#   scripts/swarm.sh stop [--run DIR] [--node NODE]
#   scripts/swarm.sh restart --node NODE [--run DIR]
#   scripts/swarm.sh progress [--run DIR]
#   scripts/swarm.sh wait [--run DIR] [--timeout S]   until every node has
#                          ended (its rounds run); status 1 after S seconds
#
# start checks what each node starts from (its base or model folder or
# file) before any process starts: a missing one is a line naming it and
# the command that makes it, and status 1; and, with a memory budget
# (SAPO_MEMORY), that each node fits in it (bin/learner budget): one that
# does not is a line with the least it needs, and status 1.
# --ij gives each node its local/external split (the last one repeats), so
# a mixed swarm is one flag; --models gives each node its model the same
# way (tiny, a model scripts/model.sh fetched, a model folder or a GGUF
# file: a heterogeneous swarm, e.g. --models
# tiny,run/base-2layer for the tiny model beside a smaller one made with
# SAPO_WARMSTART_SHAPE=config/tiny-2layer.json SAPO_BASE=run/base-2layer
# bin/learner warmstart). --mixes gives each node its task mix file the same
# way (a swarm of specialised nodes). Any SAPO_* variable in the environment reaches
# every node. With --wait the script shows a progress line until every node
# has run its rounds, then stops the swarm. --redis joins the nodes to a
# pool that is already running (not started, and not stopped, here).
# Each node's processes run under scripts/keep.sh (the Procfile), which
# restarts a crashed one. The Procfile runs under foreman, or under
# scripts/procfile.sh where SAPO_RUNNER=procfile or foreman is not
# installed (a lent GPU machine: scripts/gpu_kit.sh); stop --node ends one node, restart --node starts
# it again as it was started ($run/NODE/start holds its settings), and
# stop ends whatever the swarm started, a Redis restarted by hand on its
# port included.
set -euo pipefail
cd "$(dirname "$0")/.."

cmd=${1:-}; [ $# -gt 0 ] && shift
nodes=2 ij="4/4" models=${SAPO_MODEL:-} mixes= rounds=${SAPO_ROUNDS:-0} run=run/swarm seed=${SAPO_SEED:-1} wait=0 gens=${SAPO_GENERATORS:-1} redis= timeout=0 only=
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes=$2; shift 2 ;;
    --ij) ij=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --mixes) mixes=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --run) run=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --generators) gens=$2; shift 2 ;;
    --redis) redis=$2; shift 2 ;;
    --wait) wait=1; shift ;;
    --timeout) timeout=$2; shift 2 ;;
    --node) only=$2; shift 2 ;;
    *) echo "swarm: unknown flag '$1'" >&2; exit 2 ;;
  esac
done
[[ "$nodes" =~ ^[0-9]+$ ]] && [ "$nodes" -ge 1 ] || { echo "swarm: --nodes: '$nodes' is not a positive integer" >&2; exit 2; }

free_port() {
  local p=$1
  while (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null; do p=$((p + 1)); done
  echo $p
}

# A progress line: rewritten in place on a terminal; elsewhere (a log
# file, a pipe) printed once per change, one line each.
show() {
  if [ -t 1 ]; then printf '\r%s' "$1"
  elif [ "$1" != "${shown:-}" ]; then echo "$1"; shown=$1; fi
}

progress() {
  local line="" f r w last g
  for f in "$run"/*/metrics.jsonl; do
    [ -s "$f" ] || continue
    last=$(tail -n 1 "$f")
    r=$(grep -o '"round":[0-9]*' <<< "$last" | head -n 1 | cut -d: -f2)
    # in the game a batch is a stage: its game round and stage instead
    g=$(grep -o '"game":{"round":[0-9]*,"stage":"[a-z]*"' <<< "$last" | tr -dc 'a-z0-9,:' | cut -d: -f3- || true)
    [ -n "$g" ] && r="${g%%,*} ${g##*:}"
    w=$(grep -o '"reward_mean":[-0-9.e]*' <<< "$last" | head -n 1 | cut -d: -f2)
    line+="$(basename "$(dirname "$f")") r${r:-?} reward ${w:0:5}  "
  done
  echo "${line:-waiting for the first round...}"
}

# whether any node's runner (foreman or procfile.sh) still runs
alive() {
  local kind pid
  [ -f "$run/pids" ] || return 1
  while read -r kind pid _; do [ "$kind" = node ] && kill -0 "$pid" 2>/dev/null && return 0; done < "$run/pids"
  return 1
}

# the processes of node folder $1 that outlived their runner (keep.sh
# writes each one's pid; the pid counts only while that process runs with
# SAPO_RUN=$1): asked to stop, then killed after 10 s
reap() {
  local f pid left=()
  for f in "$1"/*.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    if [[ "$pid" =~ ^[0-9]+$ ]] && tr '\0' '\n' 2>/dev/null < "/proc/$pid/environ" | grep -qxF "SAPO_RUN=$1"; then
      kill -TERM "$pid" 2>/dev/null && left+=("$pid")
    fi
    rm -f "$f"
  done
  [ ${#left[@]} = 0 ] && return 0
  for _ in $(seq 50); do
    kill -0 "${left[@]}" 2>/dev/null || return 0
    sleep 0.2
  done
  kill -KILL "${left[@]}" 2>/dev/null || true
}

# ends the runner of one node (and its processes), and forgets it
stop_node() {
  local kind pid node
  while read -r kind pid node; do
    [ "$kind" = node ] && [ "$node" = "$1" ] && kill -TERM "$pid" 2>/dev/null
  done < "$run/pids"
  for _ in $(seq 100); do
    local up=0
    while read -r kind pid node; do [ "$kind" = node ] && [ "$node" = "$1" ] && kill -0 "$pid" 2>/dev/null && up=1; done < "$run/pids"
    [ $up = 0 ] && break
    sleep 0.2
  done
  reap "$run/$1"
  grep -v "^node [0-9]* $1\$" "$run/pids" > "$run/pids.new" || true
  mv "$run/pids.new" "$run/pids"
}

stop() {
  [ -f "$run/pids" ] || { echo "swarm: nothing running under $run"; return 0; }
  run=$(cd "$run" && pwd)
  if [ -n "$only" ]; then
    grep -q "^node [0-9]* $only\$" "$run/pids" || { echo "swarm: no node $only runs under $run" >&2; return 1; }
    stop_node "$only"
    echo "swarm: stopped node $only ($run)"
    return 0
  fi
  while read -r kind pid node; do
    [ "$kind" = node ] && kill -TERM "$pid" 2>/dev/null || true
  done < "$run/pids"
  for _ in $(seq 50); do
    alive || break
    sleep 0.2
  done
  local d
  for d in "$run"/*/; do reap "${d%/}"; done
  # the Redis this script started, and one restarted by hand on its port
  while read -r kind pid port; do
    [ "$kind" = redis ] || continue
    kill -TERM "$pid" 2>/dev/null || true
    [ -n "$port" ] && redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  done < "$run/pids"
  rm -f "$run/pids"
  echo "swarm: stopped ($run)"
}

# why a node cannot start from $1 (a model folder or file), on stdout;
# status 1 when it can
start_missing() {
  if [ -d "$1" ]; then
    [ -f "$1/config.json" ] || { echo "no config.json in the folder"; return 0; }
    [ -r "$1/config.json" ] || { echo "its config.json cannot be read"; return 0; }
  elif [ -e "$1" ]; then
    [ -r "$1" ] || { echo "cannot be read"; return 0; }
  else
    echo "no such folder or file"; return 0
  fi
  return 1
}

# starts node $1 from its start file and records its runner
launch() {
  bash "$run/$1/start" &
  echo "node $! $1" >> "$run/pids"
}

case "$cmd" in
  start)
    [ -x "${SAPO_BIN:-bin}/broker" ] || { echo "swarm: ${SAPO_BIN:-bin}/broker missing: run make first" >&2; exit 1; }
    [ -f "$run/pids" ] && { echo "swarm: $run/pids exists: a swarm runs there (scripts/swarm.sh stop --run $run)" >&2; exit 1; }
    IFS=, read -r -a splits <<< "$ij"
    IFS=, read -r -a kinds <<< "$models"
    # none given: every node takes the model setting's default (tiny, or a preset's)
    [ ${#kinds[@]} -gt 0 ] || kinds=("")
    IFS=, read -r -a mix_list <<< "$mixes"
    [ ${#mix_list[@]} -gt 0 ] || mix_list=("")
    for x in "${mix_list[@]}"; do
      [ -z "$x" ] || [ -f "$x" ] || { echo "swarm: --mixes: no file '$x'" >&2; exit 2; }
    done
    # each node's settings as it will run them (its model, its I/J), and
    # what it starts from, before any process starts: a learner that cannot
    # open its start fails until its keeper gives up, and the swarm ends
    # with the reason in node.log alone
    missing=0 seen=" " errf=$(mktemp)
    for i in $(seq 0 $((nodes - 1))); do
      s=${splits[$(( i < ${#splits[@]} ? i : ${#splits[@]} - 1 ))]}
      m=${kinds[$(( i < ${#kinds[@]} ? i : ${#kinds[@]} - 1 ))]}
      from=$(SAPO_MODEL=$m SAPO_LOCAL_GROUPS=${s%/*} SAPO_EXTERNAL_GROUPS=${s#*/} "${SAPO_BIN:-bin}/learner" start 2> "$errf") ||
        { echo "swarm: node n$i (I/J $s${m:+, model $m}): $(sed 's/^learner\[[^]]*\] error: //' "$errf")" >&2; rm -f "$errf"; exit 2; }
      [[ "$seen" == *" $from "* ]] && continue
      seen+="$from "
      why=$(start_missing "$from") || continue
      missing=1
      if [ -n "$m" ] && [ "$from" = "$m" ]; then
        echo "swarm: node n$i: model $from: $why (a model folder, a GGUF file, or a model scripts/model.sh fetched)" >&2
      else
        echo "swarm: node n$i: base model $from: $why; make it with: ${m:+SAPO_MODEL=$m }${SAPO_BASE:+SAPO_BASE=$SAPO_BASE }${SAPO_BIN:-bin}/learner warmstart" >&2
      fi
    done
    [ $missing = 0 ] || { rm -f "$errf"; exit 1; }
    # a memory budget (SAPO_MEMORY) each node's model and batches fit in,
    # or the least each needs, before any process starts
    if [ -n "${SAPO_MEMORY:-}" ]; then
      for i in $(seq 0 $((nodes - 1))); do
        m=${kinds[$(( i < ${#kinds[@]} ? i : ${#kinds[@]} - 1 ))]}
        x=${mix_list[$(( i < ${#mix_list[@]} ? i : ${#mix_list[@]} - 1 ))]}
        SAPO_MODEL=$m SAPO_GENERATORS=$gens ${x:+SAPO_TASK_MIX=$x} "${SAPO_BIN:-bin}/learner" budget > /dev/null 2> "$errf" ||
          { echo "swarm: node n$i: $(sed 's/^learner\[[^]]*\] error: //' "$errf" | tail -n 1)" >&2; rm -f "$errf"; exit 1; }
      done
    fi
    rm -f "$errf"
    mkdir -p "$run/redis"
    run=$(cd "$run" && pwd)
    if [ -z "$redis" ]; then
      # two swarms started at once can pick the same free port: the
      # Redis that answers must be ours (its process id), else the next port
      port=6390 ours=""
      for _ in $(seq 20); do
        port=$(free_port "$port")
        redis-server --port "$port" --bind 127.0.0.1 --dir "$run/redis" --save "" --appendonly no \
          --logfile "$run/redis/redis.log" --daemonize no >/dev/null 2>&1 &
        pid=$!
        for _ in $(seq 50); do
          kill -0 "$pid" 2>/dev/null || break
          redis-cli -p "$port" ping >/dev/null 2>&1 && break
          sleep 0.1
        done
        if redis-cli -p "$port" info server 2>/dev/null | grep -q "^process_id:$pid"$'\r'; then ours=$pid; break; fi
        kill "$pid" 2>/dev/null || true
        port=$((port + 1))
      done
      echo "redis ${ours:-$pid} $port" > "$run/pids"
      [ -n "$ours" ] || { echo "swarm: redis-server did not start on a free port (see $run/redis/redis.log)" >&2; stop; exit 1; }
      redis=redis://127.0.0.1:$port
    else
      : > "$run/pids"
    fi
    runner=${SAPO_RUNNER:-}
    if [ -z "$runner" ]; then
      runner=foreman
      command -v foreman > /dev/null || { runner=procfile; echo "swarm: foreman is not installed: the nodes run under scripts/procfile.sh"; }
    fi
    case "$runner" in
      foreman) runner_cmd=(foreman start) ;;
      procfile) runner_cmd=(scripts/procfile.sh) ;;
      *) echo "swarm: SAPO_RUNNER: '$runner' is neither foreman nor procfile" >&2; stop; exit 2 ;;
    esac
    for i in $(seq 0 $((nodes - 1))); do
      s=${splits[$(( i < ${#splits[@]} ? i : ${#splits[@]} - 1 ))]}
      m=${kinds[$(( i < ${#kinds[@]} ? i : ${#kinds[@]} - 1 ))]}
      x=${mix_list[$(( i < ${#mix_list[@]} ? i : ${#mix_list[@]} - 1 ))]}
      [ -z "$x" ] || x=$(realpath "$x")
      [ -z "$m" ] || [ ! -e "$m" ] || m=$(realpath "$m")
      node=n$i
      mkdir -p "$run/$node"
      {
        echo "# node $node as scripts/swarm.sh started it (swarm.sh restart --node $node runs this again)"
        printf 'cd %q\n' "$PWD"
        for v in $(compgen -e | grep '^SAPO_' | sort); do printf 'export %s=%q\n' "$v" "${!v}"; done
        printf 'export SAPO_NODE=%q SAPO_RUN=%q SAPO_BROKER=%q SAPO_REDIS=%q\n' "$node" "$run/$node" "$run/$node" "$redis"
        printf 'export SAPO_LOCAL_GROUPS=%q SAPO_EXTERNAL_GROUPS=%q SAPO_ROUNDS=%q SAPO_SEED=%q SAPO_MODEL=%q SAPO_GENERATORS=%q\n' \
          "${s%/*}" "${s#*/}" "$rounds" "$((seed * 1000 + i))" "$m" "$gens"
        [ -z "$x" ] || printf 'export SAPO_TASK_MIX=%q\n' "$x"
        # the runner in a process group of its own, in this session: a session
        # of its own (setsid) would put the node in a scheduler autogroup
        # of its own, and the kernel shares the cores between autogroups
        # before nice counts, so a node's broker or verifier waited up to
        # 0.2 s for a core behind the other nodes' model threads
        printf 'exec perl -e %q %s -f Procfile -d . -m %q >> %q 2>&1 < /dev/null\n' \
          'setpgrp(0, 0); exec @ARGV or die "$ARGV[0]: $!\n"' "${runner_cmd[*]}" \
          "all=1,redis=0,generator=$gens" "$run/$node/node.log"
      } > "$run/$node/start"
      : > "$run/$node/node.log"
      launch "$node"
      echo "swarm: node $node (I/J ${s}, model ${m:-$(${SAPO_BIN:-bin}/learner start)}) log $run/$node/node.log"
    done
    echo "swarm: $nodes nodes, pool $redis, run folder $run"
    if [ $wait = 1 ]; then
      trap 'echo; stop; exit 130' INT TERM
      while :; do
        running=0
        alive && running=1
        show "$(progress | cut -c1-200)"
        [ $running = 0 ] && break
        sleep 2
      done
      if [ -t 1 ]; then echo; fi
      stop
    fi
    ;;
  stop) stop ;;
  restart)
    [ -n "$only" ] || { echo "swarm: restart needs --node NODE" >&2; exit 2; }
    [ -f "$run/$only/start" ] || { echo "swarm: $run/$only/start missing: node $only was not started here" >&2; exit 1; }
    [ -f "$run/pids" ] || { echo "swarm: nothing running under $run" >&2; exit 1; }
    run=$(cd "$run" && pwd)
    grep -q "^node [0-9]* $only\$" "$run/pids" && stop_node "$only"
    launch "$only"
    echo "swarm: node $only started again (log $run/$only/node.log)" ;;
  progress) progress ;;
  wait)
    start_s=$SECONDS
    while alive; do
      [ "$timeout" != 0 ] && [ $((SECONDS - start_s)) -ge "$timeout" ] && exit 1
      sleep 0.2
    done ;;
  *) echo "usage: scripts/swarm.sh start|stop|progress|wait [flags] (see the top of this file)" >&2; exit 2 ;;
esac
