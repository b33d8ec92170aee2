package app

import (
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ingress-nginx's command line. A Deployment or Helm chart written for ingress-nginx passes its flags; every
// one of them is accepted here, so such a Deployment starts unchanged. Flags with an equivalent are bound
// to it (see BindFlags and bindCompatFlags); the rest are in ignoredFlags: they parse their value as
// ingress-nginx does (a typo still stops the controller), have no effect, and the controller logs one
// Warning at start naming those that were set (Config.IgnoredFlags).

// ingressNginxAnnotationsPrefix is the only --annotations-prefix accepted.
const ingressNginxAnnotationsPrefix = "nginx.ingress.kubernetes.io"

// flagKind is the type of an ignored flag's value, so that "--enable-metrics=maybe" fails as it would with
// ingress-nginx.
type flagKind int

const (
	kindString flagKind = iota
	kindBool
	kindInt
	kindFloat
	kindDuration
	kindFloatList
	kindStringList
)

// ignoredFlag is an ingress-nginx flag that is accepted and has no effect.
type ignoredFlag struct {
	name string
	kind flagKind
	// def is ingress-nginx's default, as --help shows it.
	def string
	// why says what replaces it here or why it does nothing; the start-up Warning and docs/flags.md show it.
	why string
}

// ignoredFlags are ingress-nginx's flags without an effect here. The list is kept in the order of
// ingress-nginx's command-line reference; TestEveryIngressNginxFlagIsAccepted checks that every one of
// its flags is bound.
var ignoredFlags = []ignoredFlag{
	{"bucket-factor", kindFloat, "0", "request metrics are classic histograms with the buckets of --time-buckets, --length-buckets and --size-buckets; there are no native histograms"},
	{"deep-inspect", kindBool, "true", "every annotation value is always validated and Ingresses that fail are rejected"},
	{"default-server-port", kindInt, "8181", "the catch-all server answers on --http-port and --https-port; there is no separate port"},
	{"disable-full-test", kindBool, "false", "nginx.conf carries no Ingress rules (the Lua router serves them), so every test is a full one and cheap"},
	{"disable-sync-events", kindBool, "false", "the controller records no Sync Events (ingress-nginx's Event per applied Ingress); it records Events for rejections, conflicts and path takeovers"},
	{"dynamic-configuration-retries", kindInt, "15", "pushes to NGINX are retried by the lanes' work queues (see docs/architecture.md)"},
	{"enable-annotation-validation", kindBool, "true", "annotation values are always validated"},
	{"enable-ssl-chain-completion", kindBool, "false", "certificates are served with the chain their Secret holds; missing intermediates are not fetched"},
	{"enable-topology-aware-routing", kindBool, "false", "endpoints are picked from every zone"},
	{"health-check-timeout", kindInt, "10", "/healthz answers from the controller's state without a request to NGINX"},
	{"internal-logger-address", kindString, "127.0.0.1:11514", "NGINX logs to the pod's stderr directly"},
	{"max-buckets", kindInt, "100", "there are no native histograms (see --bucket-factor)"},
	{"maxmind-edition-ids", kindString, "GeoLite2-City,GeoLite2-ASN", "GeoIP2 is not supported"},
	{"maxmind-license-key", kindString, "", "GeoIP2 is not supported"},
	{"maxmind-mirror", kindString, "", "GeoIP2 is not supported"},
	{"maxmind-retries-count", kindInt, "1", "GeoIP2 is not supported"},
	{"maxmind-retries-timeout", kindDuration, "0s", "GeoIP2 is not supported"},
	{"monitor-max-batch-size", kindInt, "10000", "NGINX aggregates request metrics in shared memory (--metrics-dict-size) instead of sending batches to the controller"},
	{"post-shutdown-grace-period", kindInt, "10", "the controller exits once NGINX has stopped; see --shutdown-grace-period and --shutdown-timeout"},
	{"profiler-port", kindInt, "10245", "profiles are served on --healthz-port with --profiling"},
	{"stream-port", kindInt, "10247", "there is no stream configuration server"},
	{"sync-rate-limit", kindFloat, "0.3", "changes are applied as they come, each lane at its own pace (see docs/architecture.md)"},
}

// klogFlags are the logging flags ingress-nginx's binary accepts from klog. --v picks the log level when
// --log-level is not given (see Config.klogVerbosity); the others are accepted and ignored: logs go to
// stderr in --log-format.
var klogFlags = []ignoredFlag{
	{"add_dir_header", kindBool, "false", "logs go to stderr in --log-format"},
	{"alsologtostderr", kindBool, "false", "logs go to stderr in --log-format"},
	{"log_backtrace_at", kindString, ":0", "logs go to stderr in --log-format"},
	{"log_dir", kindString, "", "logs go to stderr in --log-format"},
	{"log_file", kindString, "", "logs go to stderr in --log-format"},
	{"log_file_max_size", kindInt, "1800", "logs go to stderr in --log-format"},
	{"logtostderr", kindBool, "true", "logs go to stderr in --log-format"},
	{"one_output", kindBool, "false", "logs go to stderr in --log-format"},
	{"skip_headers", kindBool, "false", "logs go to stderr in --log-format"},
	{"skip_log_headers", kindBool, "false", "logs go to stderr in --log-format"},
	{"stderrthreshold", kindInt, "2", "logs go to stderr in --log-format"},
	{"vmodule", kindString, "", "logs go to stderr in --log-format"},
}

// ignoredValue parses an ignored flag's value and records that it was set.
type ignoredValue struct {
	flag  ignoredFlag
	value string
	set   *[]string
}

func (v *ignoredValue) String() string {
	if v == nil || v.set == nil {
		return ""
	}
	return v.value
}

func (v *ignoredValue) IsBoolFlag() bool { return v.flag.kind == kindBool }

func (v *ignoredValue) Set(s string) error {
	if err := checkKind(v.flag.kind, s); err != nil {
		return err
	}
	v.value = s
	if !slices.Contains(*v.set, v.flag.name) {
		*v.set = append(*v.set, v.flag.name)
	}
	return nil
}

func checkKind(k flagKind, s string) error {
	var err error
	switch k {
	case kindBool:
		_, err = strconv.ParseBool(s)
	case kindInt:
		_, err = strconv.Atoi(s)
	case kindFloat:
		_, err = strconv.ParseFloat(s, 64)
	case kindDuration:
		_, err = time.ParseDuration(s)
	case kindFloatList:
		for _, f := range strings.Split(s, ",") {
			if _, err = strconv.ParseFloat(strings.TrimSpace(f), 64); err != nil {
				break
			}
		}
	}
	if err != nil {
		return fmt.Errorf("invalid value %q", s)
	}
	return nil
}

// bindCompatFlags registers ingress-nginx's flags that have no flag of the same name here: the aliases and
// the flags that change behaviour are bound to Config, the rest to ignoredValue.
func bindCompatFlags(fs *flag.FlagSet, c *Config) {
	fs.StringVar(&c.ConfigMap, "configmap", c.ConfigMap, "ingress-nginx's ConfigMap (namespace/name) with controller-wide NGINX settings, watched; "+
		"docs/configmap.md lists its keys. The controller reads it in its own namespace even outside --watch-namespace. Empty means ingress-nginx's defaults.")
	fs.StringVar(&c.APIServerHost, "apiserver-host", c.APIServerHost, "Address of the Kubernetes API server (https://host:port), used instead of the in-cluster "+
		"configuration or the server of --kubeconfig. Without --kubeconfig no credentials are sent, as in ingress-nginx.")
	fs.StringVar(&c.CertificateAuthority, "certificate-authority", c.CertificateAuthority, "PEM file with the CA that signs the API server's certificate; only with --apiserver-host.")
	fs.StringVar(&c.AnnotationsPrefix, "annotations-prefix", c.AnnotationsPrefix, "Prefix of ingress-nginx's annotations. Only "+ingressNginxAnnotationsPrefix+
		" is accepted: with another prefix, annotations such as auth-url would be ignored and their paths served without them.")
	fs.IntVar(&c.NginxStatusPort, "status-port", c.NginxStatusPort, "ingress-nginx's name for --nginx-status-port.")
	fs.StringVar(&c.HealthCheckPath, "health-check-path", c.HealthCheckPath, "Path on --healthz-port that answers like /healthz (which keeps answering too).")
	fs.BoolVar(&c.DisableCatchAll, "disable-catch-all", c.DisableCatchAll, "Reject Ingresses with spec.defaultBackend (catch-all Ingresses), with a Warning Event; "+
		"ingress-nginx ignored them without one.")
	fs.BoolVar(&c.DisableServiceExternalName, "disable-svc-external-name", c.DisableServiceExternalName, "Reject Ingresses whose backend is a Service of type ExternalName, with a Warning Event "+
		"(ingress-nginx served such a path with 503).")
	fs.BoolVar(&c.ReportNodeInternalIP, "report-node-internal-ip-address", c.ReportNodeInternalIP, "Publish nodes' InternalIP addresses in Ingress status even where they "+
		"have ExternalIP ones (without --publish-service and --publish-status-address).")
	fs.StringVar(&c.WatchNamespaceSelector, "watch-namespace-selector", c.WatchNamespaceSelector, "Not supported: a non-empty value stops the controller, since serving "+
		"Ingresses of namespaces the selector excludes would break the isolation it was set for. Use --watch-namespace.")
	fs.IntVar(&c.KlogVerbosity, "v", c.KlogVerbosity, "klog verbosity, accepted from ingress-nginx's command line: 3 or more selects --log-level debug when --log-level is info.")
	for _, list := range [][]ignoredFlag{ignoredFlags, klogFlags} {
		for _, f := range list {
			v := &ignoredValue{flag: f, value: f.def, set: &c.IgnoredFlags}
			fs.Var(v, f.name, "Accepted from ingress-nginx's command line and ignored: "+f.why+".")
			fs.Lookup(f.name).DefValue = f.def
		}
	}
}

// validateCompat reports the ingress-nginx flags whose value cannot be honoured.
func (c *Config) validateCompat() []error {
	var errs []error
	if c.AnnotationsPrefix != ingressNginxAnnotationsPrefix {
		errs = append(errs, fmt.Errorf("--annotations-prefix %q: only %s is supported", c.AnnotationsPrefix, ingressNginxAnnotationsPrefix))
	}
	if c.ConfigMap != "" {
		if _, err := ParseNamespacedName(c.ConfigMap); err != nil {
			errs = append(errs, fmt.Errorf("--configmap: %w", err))
		}
	}
	if c.WatchNamespaceSelector != "" {
		errs = append(errs, fmt.Errorf("--watch-namespace-selector %q: not supported; use --watch-namespace", c.WatchNamespaceSelector))
	}
	if c.CertificateAuthority != "" && c.APIServerHost == "" {
		errs = append(errs, fmt.Errorf("--certificate-authority needs --apiserver-host"))
	}
	if c.APIServerHost != "" && c.LocalManifests != "" {
		errs = append(errs, fmt.Errorf("--apiserver-host and --local-manifests are mutually exclusive"))
	}
	switch p := c.HealthCheckPath; {
	case !strings.HasPrefix(p, "/") || strings.ContainsAny(p, " ?#\t\r\n"):
		errs = append(errs, fmt.Errorf("--health-check-path must be a path starting with /, got %q", p))
	case p == "/readyz" || p == "/metrics" || strings.HasPrefix(p, "/debug/"):
		errs = append(errs, fmt.Errorf("--health-check-path %s is already served with another meaning", p))
	}
	return errs
}

// IgnoredFlagsWarning is the start-up Warning naming the ignored ingress-nginx flags that were set, or ""
// when none was.
func (c *Config) IgnoredFlagsWarning() string {
	if len(c.IgnoredFlags) == 0 {
		return ""
	}
	why := map[string]string{}
	for _, list := range [][]ignoredFlag{ignoredFlags, klogFlags} {
		for _, f := range list {
			why[f.name] = f.why
		}
	}
	parts := make([]string, 0, len(c.IgnoredFlags))
	for _, name := range c.IgnoredFlags {
		parts = append(parts, fmt.Sprintf("--%s (%s)", name, why[name]))
	}
	return "ingress-nginx flags accepted without effect: " + strings.Join(parts, "; ")
}

// logLevel is --log-level, or debug when klog's --v asks for verbose logs and --log-level is at its default.
func (c *Config) logLevel() string {
	if c.LogLevel == DefaultConfig().LogLevel && c.KlogVerbosity >= 3 {
		return "debug"
	}
	return c.LogLevel
}
