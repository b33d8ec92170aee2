package nginx

import "strings"

// The ingress-nginx ConfigMap keys this controller does not apply, with the reason. A ConfigMap that sets
// one gets a Warning naming it; everything else in the ConfigMap still applies.

// SettingStatus says what happens to a ConfigMap key of ingress-nginx that is not (yet) supported.
type SettingStatus string

const (
	// SettingPlanned keys are accepted without effect until an open issue builds them.
	SettingPlanned SettingStatus = "planned"
	// SettingIgnored keys are accepted without effect for good, for the reason given.
	SettingIgnored SettingStatus = "ignored"
	// SettingRefused keys are snippets: their text is never used.
	SettingRefused SettingStatus = "refused"
)

type unsupportedSetting struct {
	status SettingStatus
	reason string
}

var unsupportedSettings = map[string]unsupportedSetting{}

func unsupported(status SettingStatus, reason string, names ...string) {
	for _, n := range names {
		if _, dup := unsupportedSettings[n]; dup {
			panic("ConfigMap key listed twice: " + n)
		}
		unsupportedSettings[n] = unsupportedSetting{status, reason}
	}
}

func init() {
	unsupported(SettingIgnored, "the proxy-ssl-* annotations always apply to their Ingress's own paths only (its profile), never to "+
		"the other paths of its host: what true asked for", "proxy-ssl-location-only")

	unsupported(SettingRefused, "snippets are configuration text that reaches nginx.conf unchecked; this controller never uses them "+
		"(ingress-nginx's CVE-2021-25742 and CVE-2025-1974 went through them)",
		"main-snippet", "http-snippet", "server-snippet", "stream-snippet", "location-snippet", "global-auth-snippet", "modsecurity-snippet")

	unsupported(SettingIgnored, "ModSecurity is not part of Debian's NGINX packages this controller runs on",
		"enable-modsecurity", "enable-owasp-modsecurity-crs")
	unsupported(SettingIgnored, "GeoIP databases are not supported", "use-geoip", "use-geoip2", "geoip2-autoreload-in-minutes")
	unsupported(SettingIgnored, "the Brotli module is not part of Debian's NGINX packages; use-gzip compresses",
		"enable-brotli", "brotli-level", "brotli-min-length", "brotli-types")
	unsupported(SettingIgnored, "tracing (OpenTelemetry, Jaeger) is not supported",
		"jaeger-collector-host", "jaeger-collector-port", "jaeger-endpoint", "jaeger-service-name", "jaeger-propagation-format",
		"jaeger-sampler-type", "jaeger-sampler-param", "jaeger-sampler-host", "jaeger-sampler-port", "jaeger-trace-context-header-name",
		"jaeger-debug-header", "jaeger-baggage-header", "jaeger-trace-baggage-header-prefix", "enable-opentelemetry",
		"opentelemetry-trust-incoming-span", "opentelemetry-operation-name", "opentelemetry-config", "otlp-collector-host",
		"otlp-collector-port", "otel-max-queuesize", "otel-schedule-delay-millis", "otel-max-export-batch-size", "otel-service-name",
		"otel-sampler", "otel-sampler-parent-based", "otel-sampler-ratio")
	unsupported(SettingIgnored, "TCP and UDP services are proxied by the controller itself, not by NGINX's stream module (see docs/tcp-udp.md)",
		"log-format-stream", "stream-access-log-path", "proxy-stream-timeout", "proxy-stream-next-upstream",
		"proxy-stream-next-upstream-timeout", "proxy-stream-next-upstream-tries", "proxy-stream-responses")
	unsupported(SettingIgnored, "NGINX has one server block here (hosts are routed in Lua), so its server name hash is not used",
		"server-name-hash-max-size", "server-name-hash-bucket-size")
	unsupported(SettingIgnored, "obsolete since NGINX 1.19.7: HTTP/2 uses large-client-header-buffers and keep-alive-requests",
		"http2-max-field-size", "http2-max-header-size", "http2-max-requests")
	unsupported(SettingIgnored, "NGINX's status page is served on the loopback status port only, to the controller",
		"nginx-status-ipv4-whitelist", "nginx-status-ipv6-whitelist")
	unsupported(SettingIgnored, "the passthrough proxy reads the PROXY header and the ClientHello within --passthrough-hello-timeout "+
		"(default 10s), and NGINX within client-header-timeout", "proxy-protocol-header-timeout")
	unsupported(SettingIgnored, "with use-proxy-protocol the client address comes from the PROXY header; no intermediate header is set",
		"forwarded-for-proxy-protocol-header")
	unsupported(SettingIgnored, "NGINX's defaults apply", "proxy-headers-hash-max-size", "proxy-headers-hash-bucket-size",
		"enable-multi-accept", "max-worker-open-files", "worker-cpu-affinity", "enable-aio-write", "disable-ipv6-dns", "debug-connections")
	unsupported(SettingIgnored, "ssl-session-tickets uses NGINX's own ticket key, which a start renews; a key from the ConfigMap is not read",
		"ssl-session-ticket-key")
	unsupported(SettingIgnored, "syslog is not supported: NGINX logs to the pod's output", "enable-syslog", "syslog-host", "syslog-port")
	unsupported(SettingIgnored, "changes are applied by lanes of their own, and reloads one at a time already", "enable-serial-reloads")
	unsupported(SettingIgnored, "Ingresses never read objects of other namespaces here (cross-namespace references are refused)",
		"allow-cross-namespace-resources")
	unsupported(SettingIgnored, "every annotation value is validated by a parser of its own; a word list adds nothing", "annotation-value-word-blocklist")
	unsupported(SettingIgnored, "path types are always validated strictly (Exact and Prefix paths must be plain paths)", "strict-validate-path-type")
	unsupported(SettingIgnored, "limit-connections counts per client address in Lua; the variable is not configurable", "limit-conn-zone-variable")
}

// unsupportedSettingReason is the Warning text of a key this controller does not apply.
func unsupportedSettingReason(key string) string {
	if u, ok := unsupportedSettings[key]; ok {
		switch u.status {
		case SettingRefused:
			return "refused: " + u.reason
		default:
			return "without effect: " + u.reason
		}
	}
	if strings.TrimSpace(key) != key || key == "" {
		return "unknown key (it has spaces around it)"
	}
	return "unknown key: not one of ingress-nginx's ConfigMap keys"
}
