#!/usr/bin/env bash
# `make demo`: the main job the way production runs it. A local Ray instance (head node with its
# dashboard, on loopback, token auth on) and a throwaway Airflow home (SQLite) under DEMO_DIR;
# `airflow dags test pmc_dataset` then runs the real DAG: discover → [LLM health] → the build as
# a Ray job submitted through the Job Submission API → validate → publish the Asset event.
# Ray is stopped at the end, whatever happens; `pmcvl report` then writes the report.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="$ROOT/.venv/bin"
mkdir -p "${DEMO_DIR:-demo-output}"
DEMO="$(cd "${DEMO_DIR:-demo-output}" && pwd)"
N="${DEMO_N:-40}"
export PATH="$BIN:$PATH"  # airflow, ray, pmcvl, and the `python` the Ray job runs

# -- per-user state lives in the demo's folder, never the home folder -----------------------
# What a shell exports for Ray, ultralytics or pmcvl must not steer the demo.
DASHBOARD_PORT="${RAY_DASHBOARD_PORT:-8265}"
for name in $(compgen -e | grep -E '^(RAY_|YOLO_|PMCVL_|AIRFLOW_CONN_PMCVL|AIRFLOW__)' || true); do
    unset "$name"
done
STATE="$DEMO/.state"
export YOLO_CONFIG_DIR="$STATE/yolo" MPLCONFIGDIR="$STATE/matplotlib"
export TORCH_HOME="$STATE/torch" HF_HOME="$STATE/hf"
# Ray's token auth wants a token; a fresh machine has none, and `ray get-auth-token --generate`
# writes only ~/.ray. The demo makes its own, once, and every Ray process reads it from here.
export RAY_AUTH_TOKEN_PATH="$DEMO/ray/auth_token"
if [ ! -s "$RAY_AUTH_TOKEN_PATH" ]; then
    mkdir -p "$(dirname "$RAY_AUTH_TOKEN_PATH")"
    (umask 077 && python -c 'import secrets; print(secrets.token_hex(32))' >"$RAY_AUTH_TOKEN_PATH")
fi

# the corpus is generated once (same seed, same articles): a rerun finds nothing new to build
test -d "$DEMO/corpus" || pmcvl sample-corpus --out "$DEMO/corpus" --n "$N" --layout folders --seed 0

free_port() { python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# -- Ray: one head node, stopped with this script (`--block` ties it to one process) -----------
RAY_TMP="$(mktemp -d /tmp/pmcvl-ray.XXXXXX)"  # short: Ray's socket paths have a length limit
export RAY_USAGE_STATS_ENABLED=0 RAY_AUTH_MODE=token RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S=0
ray start --head --block --node-ip-address=127.0.0.1 --port="$(free_port)" --num-cpus="$(nproc)" \
    --include-dashboard=true --dashboard-host=127.0.0.1 --dashboard-port="$DASHBOARD_PORT" \
    --dashboard-agent-listen-port="$(free_port)" --ray-client-server-port="$(free_port)" \
    --temp-dir="$RAY_TMP" --disable-usage-stats >"$DEMO/ray.log" 2>&1 &
RAY_PID=$!
RUN_PID=
stop_ray() {
    [ -z "$RUN_PID" ] || kill -TERM "$RUN_PID" 2>/dev/null || true  # an interrupted run goes too
    kill -TERM "$RAY_PID" 2>/dev/null && wait "$RAY_PID" 2>/dev/null || true
    rm -rf "$RAY_TMP"
}
trap stop_ray EXIT
for _ in $(seq 1 180); do
    grep -qs "Ray runtime started" "$DEMO/ray.log" && break
    kill -0 "$RAY_PID" 2>/dev/null || { cat "$DEMO/ray.log"; exit 1; }
    sleep 1
done
grep -q "Ray runtime started" "$DEMO/ray.log" || { echo "Ray did not start" >&2; exit 1; }
echo "Ray dashboard: http://127.0.0.1:$DASHBOARD_PORT (token: $RAY_AUTH_TOKEN_PATH)"

# -- Airflow: a throwaway home with SQLite; connections from the environment ------------------
export AIRFLOW_HOME="$DEMO/airflow"
export AIRFLOW__CORE__DAGS_FOLDER="$ROOT/dags" AIRFLOW__CORE__LOAD_EXAMPLES=False
export PMCVL_DATASET_URI="$DEMO/dataset" PMCVL_CONFIG="$ROOT/configs/demo.yaml" PMCVL_DAG_RETRIES=0
export AIRFLOW_CONN_PMCVL_RAY="{\"conn_type\": \"http\", \"host\": \"http://127.0.0.1:$DASHBOARD_PORT\", \"extra\": {\"token_path\": \"$RAY_AUTH_TOKEN_PATH\"}}"
airflow db migrate >"$DEMO/airflow-db.log" 2>&1 || { cat "$DEMO/airflow-db.log"; exit 1; }

CONF="{\"output_uri\": \"$DEMO/dataset\", \"source\": {\"path\": \"$DEMO/corpus\"}}"
airflow dags test pmc_dataset --conf "$CONF" >"$DEMO/airflow-run.log" 2>&1 &
RUN_PID=$!
# the highlights as they come: tasks ending, the build job's own log lines (streamed from Ray
# into the task log), the publish; everything else is in airflow-run.log
tail -n +1 -f --pid="$RUN_PID" "$DEMO/airflow-run.log" \
    | grep --line-buffered -E "end task|\[ray\] .*__main__|new or changed|published|DagRun Fin|rror" \
    | sed -u -E 's/^[0-9]{4}-[0-9-]+T[0-9:.]+Z +(\[[a-z ]+\] +)?//; s/ +\[[A-Za-z._]+\] loc=.*$//' \
    | cut -c1-160 || true
wait "$RUN_PID" || { echo "the DAG run failed: see $DEMO/airflow-run.log" >&2; exit 1; }
RUN_PID=
stop_ray
trap - EXIT

pmcvl report "$DEMO/dataset"
