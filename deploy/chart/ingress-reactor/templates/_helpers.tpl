{{/* Names and labels shared by every template. */}}

{{- define "ingress-reactor.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ingress-reactor.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "ingress-reactor.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{- define "ingress-reactor.controller.fullname" -}}
{{- printf "%s-%s" (include "ingress-reactor.fullname" .) .Values.controller.name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ingress-reactor.defaultBackend.fullname" -}}
{{- printf "%s-%s" (include "ingress-reactor.fullname" .) .Values.defaultBackend.name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ingress-reactor.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "ingress-reactor.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "ingress-reactor.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "ingress-reactor.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: {{ include "ingress-reactor.name" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "ingress-reactor.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ingress-reactor.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "ingress-reactor.controller.selectorLabels" -}}
{{ include "ingress-reactor.selectorLabels" . }}
app.kubernetes.io/component: controller
{{- end -}}

{{- define "ingress-reactor.defaultBackend.selectorLabels" -}}
{{ include "ingress-reactor.selectorLabels" . }}
app.kubernetes.io/component: default-backend
{{- end -}}

{{/* registry/image:tag@digest from an image dict; $ is the root context. */}}
{{- define "ingress-reactor.image" -}}
{{- $img := .image -}}
{{- $ref := $img.image -}}
{{- if $img.registry }}{{ $ref = printf "%s/%s" $img.registry $img.image }}{{ end -}}
{{- $tag := default .root.Chart.AppVersion $img.tag -}}
{{- if $img.digest -}}
{{- printf "%s:%s@%s" $ref $tag $img.digest -}}
{{- else -}}
{{- printf "%s:%s" $ref $tag -}}
{{- end -}}
{{- end -}}

{{- define "ingress-reactor.configMapNamespace" -}}
{{- default (include "ingress-reactor.namespace" .) .Values.controller.configMapNamespace -}}
{{- end -}}

{{- define "ingress-reactor.tcpConfigMapNamespace" -}}
{{- default (include "ingress-reactor.namespace" .) .Values.controller.tcp.configMapNamespace -}}
{{- end -}}

{{- define "ingress-reactor.udpConfigMapNamespace" -}}
{{- default (include "ingress-reactor.namespace" .) .Values.controller.udp.configMapNamespace -}}
{{- end -}}

{{/* The namespace the controller watches: empty (all) unless controller.scope.enabled. */}}
{{- define "ingress-reactor.watchNamespace" -}}
{{- if .Values.controller.scope.enabled -}}
{{- default (include "ingress-reactor.namespace" .) .Values.controller.scope.namespace -}}
{{- end -}}
{{- end -}}

{{/* Whether status addresses come from nodes (no Service to publish, no static address). */}}
{{- define "ingress-reactor.statusFromNodes" -}}
{{- if and (not .Values.controller.publishService.enabled) (not (hasKey .Values.controller.extraArgs "publish-status-address")) -}}true{{- end -}}
{{- end -}}
