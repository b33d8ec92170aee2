{{/* The controller's command line. extraArgs may override any flag the chart sets. */}}
{{- define "ingress-reactor.controller.args" -}}
{{- $ns := include "ingress-reactor.namespace" . -}}
{{- $c := .Values.controller -}}
{{- $args := dict -}}
{{- $_ := set $args "ingress-class" $c.ingressClass -}}
{{- $_ := set $args "controller-class" $c.ingressClassResource.controllerValue -}}
{{- $_ := set $args "configmap" (printf "%s/%s" (include "ingress-reactor.configMapNamespace" .) (include "ingress-reactor.controller.fullname" .)) -}}
{{- if $c.publishService.enabled -}}
{{- $_ := set $args "publish-service" (default (printf "%s/%s" $ns (include "ingress-reactor.controller.fullname" .)) $c.publishService.pathOverride) -}}
{{- end -}}
{{- $_ := set $args "election-id" (default (printf "%s-leader" (include "ingress-reactor.fullname" .)) $c.electionID) -}}
{{- if $c.electionTTL }}{{ $_ := set $args "election-ttl" $c.electionTTL }}{{ end -}}
{{- if $c.disableLeaderElection }}{{ $_ := set $args "disable-leader-election" "true" }}{{ end -}}
{{- if $c.watchIngressWithoutClass }}{{ $_ := set $args "watch-ingress-without-class" "true" }}{{ end -}}
{{- if $c.ingressClassByName }}{{ $_ := set $args "ingress-class-by-name" "true" }}{{ end -}}
{{- if $c.reportNodeInternalIp }}{{ $_ := set $args "report-node-internal-ip-address" "true" }}{{ end -}}
{{- with include "ingress-reactor.watchNamespace" . }}{{ $_ := set $args "watch-namespace" . }}{{ end -}}
{{- if .Values.tcp }}{{ $_ := set $args "tcp-services-configmap" (printf "%s/%s-tcp" (include "ingress-reactor.tcpConfigMapNamespace" .) (include "ingress-reactor.fullname" .)) }}{{ end -}}
{{- if .Values.udp }}{{ $_ := set $args "udp-services-configmap" (printf "%s/%s-udp" (include "ingress-reactor.udpConfigMapNamespace" .) (include "ingress-reactor.fullname" .)) }}{{ end -}}
{{- if .Values.defaultBackend.enabled }}{{ $_ := set $args "default-backend-service" (printf "%s/%s" $ns (include "ingress-reactor.defaultBackend.fullname" .)) }}{{ end -}}
{{- $_ := set $args "http-port" (toString $c.containerPort.http) -}}
{{- $_ := set $args "https-port" (toString $c.containerPort.https) -}}
{{- $_ := set $args "healthz-port" (toString $c.metrics.port) -}}
{{- with $c.healthCheckHost }}{{ $_ := set $args "healthz-host" . }}{{ end -}}
{{- if ne $c.healthCheckPath "/healthz" }}{{ $_ := set $args "health-check-path" $c.healthCheckPath }}{{ end -}}
{{- $_ := set $args "shutdown-grace-period" $c.shutdownGracePeriod -}}
{{- $_ := set $args "enable-metrics" (toString $c.metrics.enabled) -}}
{{- range $k, $v := $c.extraArgs }}{{ $_ := set $args $k (toString $v) }}{{ end -}}
{{- range $k := keys $args | sortAlpha }}
{{- $v := index $args $k }}
- {{ if $v }}{{ printf "--%s=%s" $k $v | quote }}{{ else }}{{ printf "--%s" $k | quote }}{{ end }}
{{- end }}
{{- end -}}
