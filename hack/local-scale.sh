#!/usr/bin/env bash
# Local mode at scale: writes N sets (an Ingress with one host, two Prefix paths and TLS, its Service, its
# EndpointSlice with two endpoints and its TLS Secret, one file per set) and starts the controller BINARY
# on them with real NGINX, then reports the seconds from start until the informer caches synced (the
# manifests are loaded before that) and until /readyz answered 200. Waits at most 10 minutes; stops the
# controller it started. Run it in a network namespace, so its ports touch nothing else:
#
#   go build -o /tmp/ingress-reactor ./cmd/ingress-reactor
#   hack/in-netns.sh hack/local-scale.sh 3000 /tmp/ingress-reactor [extra flags]
set -euo pipefail
if (($# < 2)); then
	echo "usage: $0 N BINARY [FLAGS...]" >&2
	exit 2
fi
n="$1" bin="$2"
shift 2
work=$(mktemp -d /tmp/local-scale.XXXXXX)
chmod 755 "$work" # NGINX's workers run as another user and must reach the nginx directory
pid=
cleanup() {
	if [[ -n "$pid" ]]; then
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj /CN=local-scale \
	-keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
crt=$(base64 -w0 "$work/cert.pem")
key=$(base64 -w0 "$work/key.pem")
dir="$work/manifests"
mkdir -p "$dir"
printf 'apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: ingress-reactor}\nspec: {controller: k8s.io/ingress-reactor}\n' >"$dir/class.yaml"
for ((i = 0; i < n; i++)); do
	name="app-$i" host="app-$i.scale.example.com" net="10.$((i / 250)).$((i % 250))"
	cat >"$dir/$name.yaml" <<YAML
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: $name, namespace: scale}
spec:
  ingressClassName: ingress-reactor
  tls: [{hosts: [$host], secretName: $name-tls}]
  rules:
  - host: $host
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: $name, port: {number: 80}}}}
      - {path: /api, pathType: Prefix, backend: {service: {name: $name, port: {name: http}}}}
---
apiVersion: v1
kind: Service
metadata: {name: $name, namespace: scale}
spec: {ports: [{name: http, port: 80, targetPort: 8080}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: $name-1, namespace: scale, labels: {kubernetes.io/service-name: $name}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
- {addresses: ["$net.1"], conditions: {ready: true}}
- {addresses: ["$net.2"], conditions: {ready: true}}
---
apiVersion: v1
kind: Secret
metadata: {name: $name-tls, namespace: scale}
type: kubernetes.io/tls
data: {tls.crt: $crt, tls.key: $key}
YAML
done

healthz=18254
began=$(date +%s.%N)
"$bin" --local-manifests "$dir" --http-port 18080 --https-port 18443 --nginx-status-port 18246 \
	--healthz-host 127.0.0.1 --healthz-port "$healthz" --nginx-dir "$work/nginx" --ssl-dir "$work/ssl" \
	--update-status=false --log-format json "$@" >"$work/log" 2>&1 &
pid=$!
result="not ready after 10 minutes"
for ((t = 0; t < 1200; t++)); do
	if ! kill -0 "$pid" 2>/dev/null; then
		result="exited: $(tail -1 "$work/log")"
		break
	fi
	if [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$healthz/readyz" || true) == 200 ]]; then
		result="ready after $(echo "$(date +%s.%N) - $began" | bc) s"
		break
	fi
	sleep 0.5
done
synced=$(grep -m1 '"informer caches synced"' "$work/log" | sed -n 's/.*"ts":"\([^"]*\)".*/\1/p' || true)
echo "sets: $n ($((4 * n)) objects)"
if [[ -n "$synced" ]]; then
	echo "informer caches synced after $(echo "$(date -d "$synced" +%s.%N) - $began" | bc) s"
fi
echo "$result"
