#!/usr/bin/env bash
# A real two-node Ray cluster for ralph's remote tests (issue 23), inside a
# network namespace with only loopback: `ray start` binds every address of
# the host, so outside a namespace it would be reachable (and clash with any
# other cluster). Needs root (ip netns) and Python 3.
#
#   tests/ray/cluster.sh start DIR [PATH_PREFIX]   # prints KEY=VALUE lines (also DIR/cluster.env)
#   tests/ray/cluster.sh stop DIR
#
# start: installs ray[default]==2.60.0 once into target/ray-venv (or
# $RALPH_RAY_VENV), creates the namespace, starts a `git daemon` relay over
# DIR/git (push enabled), a token-auth head node ("head": 2 ralph_slot) and a
# second node ("w2": 2 ralph_slot) with distinct ports. Each node's
# environment names it (RALPH_TEST_NODE for the fake agent, RALPH_NODE for
# ralph, with the per-node resource ralph_node_<name> that pins a fix-up
# resuming a session there) and gives it its own worker cache
# (DIR/cache-<node>); PATH_PREFIX goes first on the nodes' PATH (the fake agent).
# RALPH_RAY_SLOTS (default 2) is each node's number of ralph_slot.
# stop: kills every process of each started group, then every process left
# in the namespace, and deletes the namespace.
set -euo pipefail
cmd=${1:?start|stop}
dir=${2:?state directory}
here=$(cd "$(dirname "$0")/../.." && pwd)
venv=${RALPH_RAY_VENV:-$here/target/ray-venv}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

stop() {
  [ -f "$dir/cluster.env" ] || [ -f "$dir/ns" ] || return 0
  ns=$(cat "$dir/ns" 2>/dev/null || true)
  for f in "$dir"/*.pgid; do
    [ -f "$f" ] || continue
    kill -KILL -- "-$(cat "$f")" 2>/dev/null || true
    rm -f "$f"
  done
  if [ -n "$ns" ]; then
    for _ in 1 2 3; do
      pids=$(ip netns pids "$ns" 2>/dev/null || true)
      [ -z "$pids" ] && break
      kill -KILL $pids 2>/dev/null || true
      sleep 0.2
    done
    ip netns del "$ns" 2>/dev/null || true
  fi
  rm -rf "$(cat "$dir/tmp" 2>/dev/null || echo /nonexistent)"
  rm -f "$dir/ns" "$dir/tmp" "$dir/cluster.env"
}

install_ray() {
  [ -x "$venv/bin/ray" ] && return 0
  mkdir -p "$(dirname "$venv")"
  (
    flock 9
    if [ ! -x "$venv/bin/ray" ]; then
      python3 -m venv "$venv"
      "$venv/bin/pip" install -q "ray[default]==2.60.0"
    fi
  ) 9>"$venv.lock"
}

# Runs "$@" in the namespace as the leader of a new process group, its
# output in DIR/<name>.log; the group ID goes to DIR/<name>.pgid.
spawn() {
  local name=$1
  shift
  ip netns exec "$ns" setsid "$@" >"$dir/$name.log" 2>&1 </dev/null &
  echo $! >"$dir/$name.pgid"
}

wait_for() { # what, tries (0.2 s apart), command...
  local what=$1 tries=$2
  shift 2
  for _ in $(seq "$tries"); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  echo "cluster.sh: $what did not come up; logs in $dir" >&2
  return 1
}

start() {
  stop
  install_ray
  ns="ralph-ray-$$"
  echo "$ns" >"$dir/ns"
  # Ray's socket paths must stay short: its temp dir is under /tmp.
  tmp=$(mktemp -d /tmp/rray.XXXX)
  echo "$tmp" >"$dir/tmp"
  ip netns add "$ns"
  ip netns exec "$ns" ip link set lo up
  mkdir -p "$dir/git"
  spawn git-daemon git daemon --reuseaddr --listen=127.0.0.1 --port=9418 \
    --base-path="$dir/git" --export-all --enable=receive-pack "$dir/git"
  slots=${RALPH_RAY_SLOTS:-2}
  token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
  local path_prefix=${3:-}
  local common=(env RAY_AUTH_MODE=token "RAY_AUTH_TOKEN=$token" RAY_USAGE_STATS_ENABLED=0
    "PATH=${path_prefix:+$path_prefix:}$venv/bin:$PATH")
  spawn head "${common[@]}" RALPH_TEST_NODE=head RALPH_NODE=head "RALPH_WORKER_CACHE=$dir/cache-head" \
    "$venv/bin/ray" start --block --head --node-ip-address=127.0.0.1 --port=6379 \
    --dashboard-host=127.0.0.1 --dashboard-port=8265 --num-cpus=2 \
    --resources="{\"ralph_slot\": $slots, \"node_head\": 1, \"ralph_node_head\": 1}" --temp-dir="$tmp" --disable-usage-stats
  wait_for "the head's Jobs API" 300 ip netns exec "$ns" \
    curl -sf -H "Authorization: Bearer $token" http://127.0.0.1:8265/api/version
  spawn w2 "${common[@]}" RALPH_TEST_NODE=w2 RALPH_NODE=w2 "RALPH_WORKER_CACHE=$dir/cache-w2" \
    "$venv/bin/ray" start --block --address=127.0.0.1:6379 --node-ip-address=127.0.0.1 \
    --num-cpus=2 --resources="{\"ralph_slot\": $slots, \"node_w2\": 1, \"ralph_node_w2\": 1}" \
    --node-manager-port=6380 --object-manager-port=6381 \
    --min-worker-port=20000 --max-worker-port=20999 \
    --dashboard-agent-listen-port=52366 --dashboard-agent-grpc-port=52367 \
    --runtime-env-agent-port=52368 --metrics-export-port=52369 --disable-usage-stats
  alive_nodes() {
    ip netns exec "$ns" curl -sf -H "Authorization: Bearer $token" \
      http://127.0.0.1:8265/nodes?view=summary | python3 -c '
import json,sys
d=json.load(sys.stdin)["data"]["summary"]
sys.exit(0 if sum(1 for n in d if n["raylet"]["state"]=="ALIVE")>=2 else 1)'
  }
  wait_for "the second node" 300 alive_nodes
  {
    echo "RAY_NS=$ns"
    echo "RAY_ADDRESS=http://127.0.0.1:8265"
    echo "RAY_TOKEN=$token"
    echo "RELAY_DIR=$dir/git"
    echo "RELAY_URL_BASE=git://127.0.0.1:9418"
    echo "W2_PGID=$(cat "$dir/w2.pgid")"
  } | tee "$dir/cluster.env"
}

case $cmd in
  start) start "$@" ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
