{{/*
ingress-nginx chart values that have no equivalent here. A value left at ingress-nginx's default (or
absent) passes; any other value stops the install with the reason, so that nothing a user relied on is
dropped silently. README.md lists every ingress-nginx value and what happens to it.
*/}}
{{- define "ingress-reactor.compat" -}}
{{- $v := .Values -}}
{{- $c := $v.controller -}}
{{- $fail := list -}}
{{- if eq (toString $c.image.image) "ingress-nginx/controller" -}}
{{- $fail = append $fail "controller.image.image is ingress-nginx's controller image; set it to the ingress-reactor image (docs/image.md), and drop controller.image.tag and controller.image.digest" -}}
{{- end -}}
{{- if $c.image.chroot -}}
{{- $fail = append $fail "controller.image.chroot: there is no chroot variant; NGINX runs unprivileged in the controller's container" -}}
{{- end -}}
{{- if not (has (toString $c.kind) (list "Deployment" "DaemonSet")) -}}
{{- $fail = append $fail (printf "controller.kind %q: only Deployment and DaemonSet" (toString $c.kind)) -}}
{{- end -}}
{{- if $c.enableTopologyAwareRouting -}}
{{- $fail = append $fail "controller.enableTopologyAwareRouting: endpoints are picked from every zone (no topology-aware routing)" -}}
{{- end -}}
{{- if $c.hostname -}}
{{- $fail = append $fail "controller.hostname: not supported" -}}
{{- end -}}
{{- if and $c.networkPolicy $c.networkPolicy.enabled -}}
{{- $fail = append $fail "controller.networkPolicy.enabled: the chart has no NetworkPolicy yet; write one for your cluster" -}}
{{- end -}}
{{- if $c.ingressClassResource.aliases -}}
{{- $fail = append $fail "controller.ingressClassResource.aliases: one IngressClass per release" -}}
{{- end -}}
{{- if $c.scope.namespaceSelector -}}
{{- $fail = append $fail "controller.scope.namespaceSelector: --watch-namespace-selector is refused (docs/flags.md); use controller.scope.namespace" -}}
{{- end -}}
{{- if $c.maxmindLicenseKey -}}
{{- $fail = append $fail "controller.maxmindLicenseKey: GeoIP2 is not supported" -}}
{{- end -}}
{{- if and $c.keda $c.keda.enabled -}}
{{- $fail = append $fail "controller.keda.enabled: no KEDA ScaledObject; use controller.autoscaling (an HPA)" -}}
{{- end -}}
{{- if and $c.customTemplate $c.customTemplate.configMapName -}}
{{- $fail = append $fail "controller.customTemplate: ingress-nginx's nginx.tmpl does not apply; ingress-reactor's own template can be replaced with --template (docs/flags.md)" -}}
{{- end -}}
{{- if and $c.service.internal $c.service.internal.enabled -}}
{{- $fail = append $fail "controller.service.internal.enabled: no second (internal) Service yet; create one selecting the controller pods" -}}
{{- end -}}
{{- if $c.extraModules -}}
{{- $fail = append $fail "controller.extraModules: NGINX modules cannot be added at run time" -}}
{{- end -}}
{{- $d := $v.defaultBackend -}}
{{- if and $d.autoscaling $d.autoscaling.enabled -}}
{{- $fail = append $fail "defaultBackend.autoscaling.enabled: set defaultBackend.replicaCount" -}}
{{- end -}}
{{- if and $d.networkPolicy $d.networkPolicy.enabled -}}
{{- $fail = append $fail "defaultBackend.networkPolicy.enabled: not supported" -}}
{{- end -}}
{{- if or $d.extraConfigMaps $d.extraVolumes $d.extraVolumeMounts -}}
{{- $fail = append $fail "defaultBackend.extraConfigMaps, extraVolumes and extraVolumeMounts: not supported" -}}
{{- end -}}
{{- if $v.dhParam -}}
{{- $fail = append $fail "dhParam: set the ConfigMap key ssl-dh-param to a Secret of yours (docs/configmap.md)" -}}
{{- end -}}
{{- $grace := 0 -}}
{{- $g := toString $c.shutdownGracePeriod -}}
{{- if regexMatch "^[0-9]+s$" $g }}{{ $grace = trimSuffix "s" $g | int }}{{ else if regexMatch "^[0-9]+m$" $g }}{{ $grace = mul (trimSuffix "m" $g | int) 60 }}{{ else if ne $g "0" }}
{{- $fail = append $fail (printf "controller.shutdownGracePeriod %q: a whole number of seconds (10s) or minutes (1m)" $g) -}}
{{- end -}}
{{- if lt (int $c.terminationGracePeriodSeconds) (add $grace 30) -}}
{{- $fail = append $fail (printf "controller.terminationGracePeriodSeconds %v is shorter than shutdownGracePeriod (%ds) plus the 30s NGINX gets to finish requests" $c.terminationGracePeriodSeconds $grace) -}}
{{- end -}}
{{- if $fail -}}
{{- fail (printf "\n\nThese values have no equivalent in ingress-reactor (deploy/chart/ingress-reactor/README.md):\n- %s\n" (join "\n- " $fail)) -}}
{{- end -}}
{{- end -}}
