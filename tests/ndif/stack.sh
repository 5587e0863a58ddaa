#!/usr/bin/env bash
# `make test-ndif`: a real NDIF 0.1.2 stack on this machine, and attnwidget's remote reads against it.
#
# Redis, a Ray head (with ndif's controller and one CPU model actor per model) and ndif's API (gunicorn),
# every one bound to 127.0.0.1 (checked below), serve tiny random models saved to a local folder with the
# Hub kept offline. The server runs in .venv-ndif (Python 3.12, tests/ndif/requirements.txt); the client,
# attnwidget with nnsight, in the project's .venv. Each service runs in a session of its own, and on any
# exit (success, failure, Ctrl-C) every process of those sessions is stopped.
#
# Phases: (1) reads equal to local ones, a model the server does not host, an execution time-out, a
# server that is not there; (2) the API stopped while a read waits on it; (3) the API started again to
# accept only newer nnsight clients. Ports: NDIF_TEST_PORT (default 26300) and the 120 above it, and
# those Ray picks for each client's server (on 127.0.0.1 too).
# `stack.sh serve [FILE]` starts the same stack and leaves it running (its address in FILE) until stopped.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SERVER=${NDIF_SERVER_VENV:-$ROOT/.venv-ndif}/bin
CLIENT=${NDIF_CLIENT_PYTHON:-$ROOT/.venv/bin/python}
BASE=${NDIF_TEST_PORT:-26300}
LOOPBACK=127.0.0.1
REDIS_PORT=$BASE API_PORT=$((BASE + 1)) GCS_PORT=$((BASE + 2)) RAY_CLIENT_PORT=$((BASE + 3))
RUN=$(mktemp -d /tmp/ndif-test.XXXXXX)
SESSIONS=()  # the session id of every service started (its leader's pid)
STARTED=$(date +%s)

say() { printf '[test-ndif %3ss] %s\n' $(($(date +%s) - STARTED)) "$*"; }

# Every process this script started and that is still its descendant.
descendants() {
  ps -e -o pid=,ppid= | awk -v root=$$ '{up[$1] = $2} END {
    for (p in up) { q = p; while (q in up && q != root && q > 1) q = up[q]; if (q == root && p != root) print p } }'
}

# The memory (PSS, kB) of this script's processes: every service, and the client.
memory() {
  descendants | while read -r pid; do awk '/^Pss:/ {print $2}' "/proc/$pid/smaps_rollup" 2>/dev/null || true; done |
    awk '{s += $1} END {print s + 0}'
}
(
  set +e  # (a process may end while it is measured)
  peak=0
  while sleep 2; do
    now=$(memory)
    if [ "$now" -gt "$peak" ]; then peak=$now && echo "$peak" >"$RUN/peak"; fi
  done
) &
SAMPLER=$!

# Every process of every session started here, TERM then KILL; logs kept in tests/artifacts/ndif on failure.
stop() {
  local status=$? sid left
  trap - EXIT INT TERM
  pkill -P "$SAMPLER" 2>/dev/null || true
  kill "$SAMPLER" 2>/dev/null || true
  say "peak memory $(($(cat "$RUN/peak" 2>/dev/null || echo 0) / 1024)) MB (PSS of the services and the client)"
  say "stopping ${#SESSIONS[@]} services"
  for sid in "${SESSIONS[@]}"; do pkill -TERM -s "$sid" 2>/dev/null || true; done
  for _ in $(seq 20); do
    left=0
    for sid in "${SESSIONS[@]}"; do pgrep -s "$sid" >/dev/null && left=1; done
    [ "$left" = 0 ] && break
    sleep 0.5
  done
  for sid in "${SESSIONS[@]}"; do pkill -KILL -s "$sid" 2>/dev/null || true; done
  for pid in $(descendants); do kill -KILL "$pid" 2>/dev/null || true; done  # (any that left its session)
  if [ "$status" != 0 ]; then
    mkdir -p "$ROOT/tests/artifacts/ndif"
    cp -r "$RUN"/*.log "$RUN"/ray/session_latest/logs "$ROOT/tests/artifacts/ndif/" 2>/dev/null || true
    say "failed ($status): logs in tests/artifacts/ndif"
  fi
  rm -rf "$RUN"
  say "done"
  exit "$status"
}
trap stop EXIT
trap 'exit 130' INT TERM

# start NAME COMMAND...: COMMAND in a session of its own, its output in $RUN/NAME.log
start() {
  local name=$1
  shift
  setsid "$@" >"$RUN/$name.log" 2>&1 </dev/null &
  SESSIONS+=($!)
  eval "${name}_SID=$!"
}

wait_port() {
  for _ in $(seq "${2:-120}"); do
    (exec 3<>"/dev/tcp/$LOOPBACK/$1") 2>/dev/null && return 0
    sleep 0.5
  done
  say "nothing listens on port $1"
  return 1
}

# Every socket a process of these sessions listens on is on the loopback address.
check_loopback() {
  local sid pid pids="" bad
  for sid in "${SESSIONS[@]}"; do
    for pid in $(pgrep -s "$sid"); do pids="$pids|pid=$pid,"; done
  done
  bad=$(ss -Hltunp | grep -E "${pids#|}" | awk '{print $5}' | grep -vE '^(127\.0\.0\.1|\[::1\]|\[::ffff:127\.0\.0\.1\]):' || true)
  if [ -n "$bad" ]; then
    say "listening beyond the loopback address: $bad"
    return 1
  fi
  say "$(ss -Hltunp | grep -cE "${pids#|}") listening sockets, every one on $LOOPBACK"
}

for port in $REDIS_PORT $API_PORT $GCS_PORT $RAY_CLIENT_PORT; do
  if (exec 3<>"/dev/tcp/$LOOPBACK/$port") 2>/dev/null; then
    say "port $port is taken: set NDIF_TEST_PORT to a free range"
    exit 1
  fi
done

say "models in $RUN/models"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HOME=$RUN/hf
KEYS=$(PYTHONPATH=$ROOT/src "$CLIENT" "$ROOT/tests/ndif/ndif_models.py" "$RUN/models" 2>"$RUN/models.log") ||
  { cat "$RUN/models.log"; exit 1; }
IFS='|' read -r -a KEYS <<<"$KEYS"

# What every server process reads (the Ray workers inherit it from the head).
export PYTHONPATH=$ROOT/tests/ndif/server
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0  # Ray's own address is then 127.0.0.1, not the machine's
export RAY_USAGE_STATS_ENABLED=0 GRPC_ENABLE_FORK_SUPPORT=0
export NDIF_REDIS_URL=redis://$LOOPBACK:$REDIS_PORT
export NDIF_RAY_ADDRESS=ray://$LOOPBACK:$RAY_CLIENT_PORT
export NDIF_OBJECT_STORE_URL=http://$LOOPBACK:$((BASE + 20))  # none runs: results stay under 8 MiB, blocking
export NDIF_CONTROLLER_IMPORT_PATH=ndif_cpu.Controller NDIF_MODEL_IMPORT_PATH=ndif_cpu.ModelActor
export NDIF_DEFAULT_DTYPE=float32 NDIF_DEFAULT_PADDING_BIAS=0 NDIF_DEPLOYMENTS=""

say "redis on $LOOPBACK:$REDIS_PORT"
start redis redis-server --bind $LOOPBACK --port "$REDIS_PORT" --save "" --appendonly no --dir "$RUN"
wait_port "$REDIS_PORT"

say "ray head on $LOOPBACK:$GCS_PORT (one GPU declared, never used)"
start ray "$SERVER/ray" start --head --block --node-ip-address=$LOOPBACK --port="$GCS_PORT" \
  --ray-client-server-port="$RAY_CLIENT_PORT" --object-manager-port=$((BASE + 4)) --node-manager-port=$((BASE + 5)) \
  --include-dashboard=true --dashboard-host=$LOOPBACK --dashboard-port=$((BASE + 6)) \
  --dashboard-agent-listen-port=$((BASE + 7)) --dashboard-agent-grpc-port=$((BASE + 8)) \
  --metrics-export-port=$((BASE + 9)) --runtime-env-agent-port=$((BASE + 10)) \
  --min-worker-port=$((BASE + 21)) --max-worker-port=$((BASE + 120)) \
  --num-cpus=4 --num-gpus=1 --object-store-memory=100000000 --temp-dir="$RUN/ray" --disable-usage-stats \
  --resources="{\"head\": 10, \"cuda_memory_bytes\": 8000000000, \"cpu_memory_bytes\": 8000000000}"
wait_port "$RAY_CLIENT_PORT" 240

say "controller"
RAY_ADDRESS=$LOOPBACK:$GCS_PORT "$SERVER/python" -m ndif.services.ray.deployments.controller.controller

say "api on $LOOPBACK:$API_PORT"
start_api() {
  start api env "$@" "$SERVER/gunicorn" --config python:ndif.services.api.gunicorn_conf \
    --bind "$LOOPBACK:$API_PORT" ndif.services.api.app:app
  wait_port "$API_PORT" 120
  for _ in $(seq 240); do  # its dispatcher connected to Ray
    curl -sf "http://$LOOPBACK:$API_PORT/connected" >/dev/null && return 0
    sleep 0.5
  done
  say "the API did not connect to Ray"
  return 1
}
start_api

say "deploying ${KEYS[*]}"
RAY_ADDRESS=$NDIF_RAY_ADDRESS "$SERVER/python" "$ROOT/tests/ndif/server/deploy.py" \
  "${KEYS[0]}" "${KEYS[1]}" "${KEYS[2]}" 0.001 >"$RUN/deploy.log" 2>&1 || { cat "$RUN/deploy.log"; exit 1; }
check_loopback
say "the stack is up and holds $(($(memory) / 1024)) MB"

if [ "${1:-}" = serve ]; then  # for working on the remote path by hand
  say "serving at http://$LOOPBACK:$API_PORT, models in $RUN/models (Ray session $ray_SID, API session $api_SID)"
  echo "http://$LOOPBACK:$API_PORT $RUN/models $ray_SID $api_SID" >"${2:-/dev/null}"
  say "stop with Ctrl-C or: kill $$"
  wait "$SAMPLER"  # (until a signal ends the script)
fi

run_tests() {
  ATTNWIDGET_NDIF_HOST=http://$LOOPBACK:$API_PORT ATTNWIDGET_NDIF_MODELS=$RUN/models \
    ATTNWIDGET_NDIF_API_SESSION=$api_SID ATTNWIDGET_NDIF_RAY_SESSION=$ray_SID \
    PYTHONPATH=$ROOT/src "$CLIENT" -m pytest -q -p no:cacheprovider "$ROOT/tests/ndif/test_ndif_stack.py" "$@"
}
say "phase 1: reads and the errors of a running server"
run_tests -m "not other_version and not stopped"

say "phase 2: the API stopped while a read waits"
run_tests -m stopped
while pgrep -s "$api_SID" >/dev/null; do sleep 0.2; done

say "phase 3: the API started again, accepting only nnsight 99 and newer"
start_api NDIF_MIN_NNSIGHT_VERSION=99.0
run_tests -m other_version
