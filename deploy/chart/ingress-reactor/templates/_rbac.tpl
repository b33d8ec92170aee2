{{/*
The controller's rights. Each rule is one thing the controller reads or writes; the chart test removes
each rule in turn and shows the controller fails without it. The cluster-wide rules are split in two:
"ingress-reactor.rbac.namespacedRules" (Ingresses and the objects they name) go into a Role of the watched
namespace with rbac.scope, the others always stay in the ClusterRole.
*/}}
{{- define "ingress-reactor.rbac.namespacedRules" -}}
- apiGroups: ["networking.k8s.io"]
  resources: ["ingresses"]
  verbs: ["list", "watch"{{ if hasKey .Values.controller.extraArgs "enable-auto-ingress" }}, "create", "patch", "delete"{{ end }}]
{{- if and (not .Values.controller.disableLeaderElection) (ne (toString (index .Values.controller.extraArgs "update-status" | default "true")) "false") }}
- apiGroups: ["networking.k8s.io"]
  resources: ["ingresses/status"]
  verbs: ["patch"]
{{- end }}
- apiGroups: [""]
  resources: ["services"]
  verbs: ["list", "watch"]
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["list", "watch"]
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["list", "watch"]
- apiGroups: ["discovery.k8s.io"]
  resources: ["endpointslices"]
  verbs: ["list", "watch"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end -}}

{{- define "ingress-reactor.rbac.clusterRules" -}}
- apiGroups: ["networking.k8s.io"]
  resources: ["ingressclasses"]
  verbs: ["list", "watch"]
{{- if include "ingress-reactor.statusFromNodes" . }}
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["list", "watch"]
{{- end }}
{{- end -}}

{{/* Rights in the controller's own namespace: leader election and finding its sibling pods. */}}
{{- define "ingress-reactor.rbac.ownRules" -}}
{{- if not .Values.controller.disableLeaderElection }}
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "create", "update"]
{{- end }}
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list"{{ if include "ingress-reactor.statusFromNodes" . }}, "watch"{{ end }}]
{{- end -}}
