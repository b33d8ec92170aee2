#!/usr/bin/env bash
# The local demo behind `make run`: two echo backends on 127.0.0.1 and the controller in local mode on
# examples/local, serving through real NGINX. Ctrl-C stops everything this script started.
# Usage: hack/run-local.sh BIN_DIR RUN_DIR HTTP_PORT HTTPS_PORT
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$1" run="$2" http_port="$3" https_port="$4"
mkdir -p "$run"
pids=()
cleanup() {
  trap - INT TERM EXIT
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup INT TERM EXIT

"$bin/echoserver" --listen 127.0.0.1:9001 --name demo-web &
pids+=($!)
"$bin/echoserver" --listen 127.0.0.1:9002 --name demo-api &
pids+=($!)

cat <<MSG
Starting ingress-reactor in local mode on examples/local. Try, in another terminal:
  curl -H 'Host: demo.localhost' http://127.0.0.1:${http_port}/
  curl -H 'Host: demo.localhost' http://127.0.0.1:${http_port}/api
Edit files in examples/local/ and the controller follows. Ctrl-C stops everything.
MSG

"$bin/ingress-reactor" \
  --local-manifests examples/local \
  --http-port "$http_port" --https-port "$https_port" \
  --healthz-host 127.0.0.1 --healthz-port 10254 \
  --nginx-dir "$run/nginx" --ssl-dir "$run/ssl" \
  --log-format console &
pids+=($!)
wait "${pids[-1]}"
