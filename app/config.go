package app

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ingress-reactor/ingress-reactor/nginx"
)

// Config is everything the controller needs to start. It is filled from flags by BindFlags and checked by Validate.
// Flag names follow ingress-nginx wherever the concept is the same.
type Config struct {
	// Kubernetes source.
	KubeConfig     string
	LocalManifests string
	WatchNamespace string
	SyncPeriod     time.Duration

	// Process-level serving and logging.
	HealthzHost     string
	HealthzPort     int
	Profiling       bool
	LogLevel        string
	LogFormat       string
	StartTimeout    time.Duration
	ShutdownTimeout time.Duration
	// ShutdownGracePeriod is how long NGINX keeps serving after SIGTERM with /readyz failing, before the
	// graceful stop (bounded by ShutdownTimeout) begins.
	ShutdownGracePeriod time.Duration
	// AutoGoMemLimit sets the Go memory limit to AutoGoMemLimitRatio of the container's memory limit (memlimit.go).
	AutoGoMemLimit      bool
	AutoGoMemLimitRatio float64
	// ReleaseIdleMemory gives the heap's free memory back to the kernel once the controller is idle (memrelease.go).
	ReleaseIdleMemory bool

	// Which Ingresses are ours.
	IngressClass             string
	ControllerClass          string
	IngressClassByName       bool
	WatchIngressWithoutClass bool

	// Data plane.
	NginxBinary           string
	NginxDir              string
	NginxModulesDir       string
	NginxStatusPort       int
	HTTPPort              int
	HTTPSPort             int
	WorkerProcesses       string
	TemplatePath          string
	DefaultBackendService string
	// HostOwnership is shared (several namespaces may route one host) or namespace.
	HostOwnership       string
	ReloadRetries       int
	NginxConfirmTimeout time.Duration
	// EndpointsDictSize, CertificatesDictSize, RoutesDictSize and LimitsDictSize size NGINX's Lua shared dicts, in MB.
	EndpointsDictSize    int
	CertificatesDictSize int
	RoutesDictSize       int
	LimitsDictSize       int

	// TLS.
	SSLDir                string
	DefaultSSLCertificate string

	// Status.
	UpdateStatus           bool
	UpdateStatusOnShutdown bool
	ElectionID             string
	DisableLeaderElection  bool
	ElectionLeaseDuration  time.Duration
	ElectionRenewDeadline  time.Duration
	ElectionRetryPeriod    time.Duration
	PublishService         string
	PublishStatusAddress   string
	StatusUpdateInterval   time.Duration

	// Optional modules.
	EnableSSLPassthrough      bool
	SSLPassthroughProxyPort   int
	PassthroughHelloTimeout   time.Duration
	PassthroughMaxConnections int
	PassthroughIdleTimeout    time.Duration
	UseProxyProtocol          bool
	EnableAutoIngress         bool

	// ingress-nginx's flags (see compatflags.go).
	ConfigMap                  string
	APIServerHost              string
	CertificateAuthority       string
	AnnotationsPrefix          string
	HealthCheckPath            string
	DisableCatchAll            bool
	DisableServiceExternalName bool
	ReportNodeInternalIP       bool
	WatchNamespaceSelector     string
	KlogVerbosity              int
	// Request metrics (requestmetrics.go).
	EnableMetrics           bool
	MetricsPerHost          bool
	MetricsPerUndefinedHost bool
	TimeBuckets             floatList
	LengthBuckets           floatList
	SizeBuckets             floatList
	ExcludeSocketMetrics    stringList
	MetricsDictSize         int
	ReportStatusClasses     bool
	// IgnoredFlags are the ingress-nginx flags without effect that were given, in order.
	IgnoredFlags []string
	// TCP and UDP services.
	TCPServicesConfigMap      string
	UDPServicesConfigMap      string
	TCPServicesIdleTimeout    time.Duration
	TCPServicesMaxConnections int
	UDPServicesIdleTimeout    time.Duration
	UDPServicesMaxFlows       int
	// Admission webhook (webhook.go).
	ValidatingWebhook            string
	ValidatingWebhookCertificate string
	ValidatingWebhookKey         string

	// Version information, set by main from linker flags; not a flag.
	Version string
	Commit  string
}

// DefaultConfig returns the configuration used when no flag is given.
func DefaultConfig() Config {
	return Config{
		SyncPeriod:                0,
		HealthzPort:               10254,
		LogLevel:                  "info",
		AnnotationsPrefix:         ingressNginxAnnotationsPrefix,
		HealthCheckPath:           "/healthz",
		LogFormat:                 "json",
		StartTimeout:              5 * time.Minute,
		ShutdownTimeout:           30 * time.Second,
		AutoGoMemLimit:            true,
		AutoGoMemLimitRatio:       0.5,
		ReleaseIdleMemory:         true,
		IngressClass:              "ingress-reactor",
		ControllerClass:           "k8s.io/ingress-reactor",
		NginxBinary:               "nginx",
		NginxDir:                  "/tmp/ingress-reactor/nginx",
		NginxStatusPort:           10246,
		HTTPPort:                  80,
		HTTPSPort:                 443,
		WorkerProcesses:           "auto",
		HostOwnership:             string(nginx.HostsShared),
		ReloadRetries:             10,
		NginxConfirmTimeout:       10 * time.Second,
		EndpointsDictSize:         32,
		CertificatesDictSize:      64,
		RoutesDictSize:            32,
		LimitsDictSize:            16,
		SSLDir:                    "/tmp/ingress-reactor/ssl",
		UpdateStatus:              true,
		UpdateStatusOnShutdown:    true,
		ElectionID:                "ingress-reactor-leader",
		ElectionLeaseDuration:     30 * time.Second,
		ElectionRenewDeadline:     20 * time.Second,
		ElectionRetryPeriod:       4 * time.Second,
		StatusUpdateInterval:      60 * time.Second,
		SSLPassthroughProxyPort:   442,
		PassthroughHelloTimeout:   10 * time.Second,
		PassthroughMaxConnections: 10000,
		PassthroughIdleTimeout:    10 * time.Minute,
		TCPServicesIdleTimeout:    10 * time.Minute,
		TCPServicesMaxConnections: 10000,
		UDPServicesIdleTimeout:    time.Minute,
		UDPServicesMaxFlows:       10000,
		EnableMetrics:             true,
		MetricsPerHost:            true,
		TimeBuckets:               slices.Clone(nginx.DefaultTimeBuckets),
		LengthBuckets:             slices.Clone(nginx.DefaultLengthBuckets),
		SizeBuckets:               slices.Clone(nginx.DefaultSizeBuckets),
		MetricsDictSize:           16,
	}
}

// BindFlags registers every configuration flag on fs, with c's current values as defaults.
func BindFlags(fs *flag.FlagSet, c *Config) {
	fs.StringVar(&c.KubeConfig, "kubeconfig", c.KubeConfig, "Path to a kubeconfig file. Empty means in-cluster configuration.")
	fs.StringVar(&c.LocalManifests, "local-manifests", c.LocalManifests, "Run without a cluster: load every YAML manifest in this directory into an in-process API and follow file changes.")
	fs.StringVar(&c.WatchNamespace, "watch-namespace", c.WatchNamespace, "Namespace to watch for Ingresses and their objects. Empty means all namespaces.")
	fs.DurationVar(&c.SyncPeriod, "sync-period", c.SyncPeriod, "Period at which informers re-deliver every cached object. 0 disables resyncs.")

	fs.StringVar(&c.HealthzHost, "healthz-host", c.HealthzHost, "Address the health, metrics and profiling server binds to. Empty means all interfaces.")
	fs.IntVar(&c.HealthzPort, "healthz-port", c.HealthzPort, "Port of the /healthz, /readyz and /metrics server.")
	fs.BoolVar(&c.Profiling, "profiling", c.Profiling, "Serve Go profiling data under /debug/pprof/ on the healthz port, to loopback clients only (reach it with kubectl port-forward).")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "Log level: debug, info, warn or error.")
	fs.StringVar(&c.LogFormat, "log-format", c.LogFormat, "Log format: json or console.")
	fs.DurationVar(&c.StartTimeout, "start-timeout", c.StartTimeout, "Upper bound for starting every module, in local mode including loading --local-manifests (1–2 s per 10,000 objects); "+
		"a start that takes longer fails with an error naming this flag. Must be positive. Through an API server, waiting for the informer caches is not part of the start: /readyz reports it.")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout, "Upper bound for a graceful stop after SIGTERM or SIGINT.")
	fs.Var(&secondsOrDuration{&c.ShutdownGracePeriod}, "shutdown-grace-period", "After SIGTERM, keep serving this long with /readyz failing, so that Endpoints and load balancers stop sending new connections before NGINX stops (a `duration` such as 10s, or a number of seconds as in ingress-nginx). The pod's terminationGracePeriodSeconds must exceed it plus --shutdown-timeout.")

	fs.StringVar(&c.IngressClass, "ingress-class", c.IngressClass, "Name of the IngressClass (and legacy kubernetes.io/ingress.class value) this controller serves.")
	fs.StringVar(&c.ControllerClass, "controller-class", c.ControllerClass, "IngressClass spec.controller value this controller serves. Use k8s.io/ingress-nginx to keep ingress-nginx's IngressClass.")
	fs.BoolVar(&c.IngressClassByName, "ingress-class-by-name", c.IngressClassByName, "Also accept Ingresses whose spec.ingressClassName equals --ingress-class, whatever the IngressClass's controller.")
	fs.BoolVar(&c.WatchIngressWithoutClass, "watch-ingress-without-class", c.WatchIngressWithoutClass, "Serve Ingresses that name no class at all.")

	fs.StringVar(&c.NginxBinary, "nginx-binary", c.NginxBinary, "NGINX executable to run (looked up in PATH).")
	fs.StringVar(&c.NginxDir, "nginx-dir", c.NginxDir, "Working directory for NGINX: prefix, nginx.conf, Lua files, temp paths, logs.")
	fs.StringVar(&c.NginxModulesDir, "nginx-modules-dir", c.NginxModulesDir, "Directory holding NGINX dynamic modules (Lua, stream). Empty means detect Debian's locations.")
	fs.IntVar(&c.NginxStatusPort, "nginx-status-port", c.NginxStatusPort, "Loopback-only port of NGINX's internal server used by the controller for dynamic configuration.")
	fs.IntVar(&c.HTTPPort, "http-port", c.HTTPPort, "Port NGINX serves HTTP on.")
	fs.IntVar(&c.HTTPSPort, "https-port", c.HTTPSPort, "Port NGINX serves HTTPS on.")
	fs.StringVar(&c.WorkerProcesses, "worker-processes", c.WorkerProcesses, "NGINX worker_processes: a number or auto.")
	fs.StringVar(&c.TemplatePath, "template", c.TemplatePath, "Path to an nginx.conf template that replaces the embedded one, nginx/nginx.tmpl in the source; the file is watched for changes. "+
		"The syntax is Go's text/template; a template reads fields (no method calls) and may call and, or, not, len, index, eq, ne, lt, le, gt, ge, print, printf and println. "+
		"It must keep the status server's /configuration/hash location, its \"set $ingress_reactor_token {{.StatusToken}};\" line and the access_by_lua_block that calls require(\"ingress_reactor.configuration\").authorize(), "+
		"the status server's location = /configuration/routes, \"lua_shared_dict ingress_reactor_routes\", and the public location's rewrite_by_lua_block that calls require(\"ingress_reactor.router\").route() "+
		"and \"set $ingress_reactor_https 1;\", its header_filter_by_lua_block that calls require(\"ingress_reactor.router\").header_filter(), and the http block's log_by_lua_block that calls "+
		"require(\"ingress_reactor.router\").log(), among others (the error names what is missing), or it is refused. Hosts and paths are not in the template: the Lua router serves them.")
	fs.StringVar(&c.HostOwnership, "host-ownership", c.HostOwnership, "Who may route paths of a host: shared (Ingresses of every namespace, as in ingress-nginx; "+
		"a path that takes requests from another namespace's path gets a Normal PathTakeover Event on both Ingresses) or namespace "+
		"(the namespace of the oldest Ingress routing a host owns it; other namespaces' rules for it are not served and get a Warning Conflict Event naming the owner).")
	fs.StringVar(&c.DefaultBackendService, "default-backend-service", c.DefaultBackendService, "Service (namespace/name) that answers requests no rule matches. Empty means a built-in 404.")
	fs.IntVar(&c.ReloadRetries, "reload-retries", c.ReloadRetries, "How often a failing NGINX configuration is retried before the controller gives up on that version (0: it is tried once).")
	fs.DurationVar(&c.NginxConfirmTimeout, "nginx-confirm-timeout", c.NginxConfirmTimeout, "How long a reload or start may take until NGINX serves the new configuration before it counts as failed "+
		"(a configuration NGINX refuses fails at once). Raise it when very large configurations take longer to load. "+
		"A start that has not answered after 30 times this (at least 5 minutes; doubled after each such restart in a row), or whose workers cannot be respawned after this long, is restarted.")
	fs.IntVar(&c.EndpointsDictSize, "endpoints-dict-size", c.EndpointsDictSize, fmt.Sprintf("Size in MB of NGINX's shared memory for endpoint lists, which change without reloads "+
		"(ingress-nginx: configuration_data in the lua-shared-dicts ConfigMap key). 1 MB holds about 2,700 upstreams of a few endpoints each, or 25,000 endpoints in long lists. When it is full, "+
		"upstreams whose endpoints do not fit keep their previous ones and the controller logs \"endpoints dict full\". %d to %d.", 1, maxDictSizeMB))
	fs.IntVar(&c.CertificatesDictSize, "certificates-dict-size", c.CertificatesDictSize, fmt.Sprintf("Size in MB of NGINX's shared memory for the TLS certificates of "+
		"Secrets, which change without reloads (ingress-nginx: certificate_data in the lua-shared-dicts ConfigMap key). 1 MB holds about 230 "+
		"RSA-2048 certificates with a two-certificate chain. When it is full, hosts whose certificate does not fit get the default "+
		"certificate and the controller logs \"certificates dict full\". Memory is used as certificates are stored. %d to %d.", 1, maxDictSizeMB))
	fs.IntVar(&c.RoutesDictSize, "routes-dict-size", c.RoutesDictSize, fmt.Sprintf("Size in MB of NGINX's shared memory for host and path routes, which change without reloads "+
		"(no ingress-nginx equivalent: it writes routes into nginx.conf). 1 MB holds about 2,500 hosts of two paths each. When it is full, a host whose changed routes do not fit "+
		"answers 503 rather than keep its previous rules, a new host that does not fit is served by the wildcard or catch-all rules, and the controller logs \"routes dict full\". %d to %d.", 1, maxDictSizeMB))
	fs.IntVar(&c.LimitsDictSize, "limits-dict-size", c.LimitsDictSize, fmt.Sprintf("Size in MB of NGINX's shared memory for the counters of the limit-rps, limit-rpm and "+
		"limit-connections annotations, one per client address, Ingress and limit (ingress-nginx: a 5 MB zone per Ingress and limit, in nginx.conf). 1 MB holds about 8,000 counters. "+
		"When it is full, NGINX drops the least recently used counters: a client whose counter was dropped starts again with a full allowance. %d to %d.", 1, maxDictSizeMB))

	fs.StringVar(&c.SSLDir, "ssl-dir", c.SSLDir, "Directory (mode 0700) for the default certificate file NGINX reads (mode 0600); Secret certificates reach NGINX without files.")
	fs.StringVar(&c.DefaultSSLCertificate, "default-ssl-certificate", c.DefaultSSLCertificate, "Secret (namespace/name) with the certificate for hosts without one. Empty means a generated self-signed certificate.")

	bindAutoIngressFlags(fs, c)
	bindStatusFlags(fs, c)
	bindPassthroughFlags(fs, c)
	bindCompatFlags(fs, c)
	bindStreamsFlags(fs, c)
	bindWebhookFlags(fs, c)
	bindMetricsFlags(fs, c)
	bindMemoryLimitFlags(fs, c)
	bindIdleMemoryFlags(fs, c)
}

// maxDictSizeMB bounds --endpoints-dict-size, --certificates-dict-size, --routes-dict-size and
// --limits-dict-size. A full
// push of endpoints, certificates or routes is one request to NGINX's status server, which accepts bodies up to 128 MB (nginx.tmpl), and
// what such a body holds fits into 128 MB of dict: a larger dict could never be filled.
const maxDictSizeMB = 128

// Validate reports configuration errors an operator must fix before the controller can start.
func (c *Config) Validate() error {
	var errs []error
	if c.KubeConfig != "" && c.LocalManifests != "" {
		errs = append(errs, errors.New("--kubeconfig and --local-manifests are mutually exclusive"))
	}
	if _, err := zapcore.ParseLevel(c.logLevel()); err != nil {
		errs = append(errs, fmt.Errorf("--log-level: %w", err))
	}
	if _, err := nginx.ParseHostOwnership(c.HostOwnership); err != nil {
		errs = append(errs, fmt.Errorf("--host-ownership: %w", err))
	}
	if c.LogFormat != "json" && c.LogFormat != "console" {
		errs = append(errs, fmt.Errorf("--log-format must be json or console, got %q", c.LogFormat))
	}
	usedBy := map[int]string{}
	for _, f := range []struct {
		name string
		port int
	}{{"--healthz-port", c.HealthzPort}, {"--http-port", c.HTTPPort}, {"--https-port", c.HTTPSPort}, {"--nginx-status-port", c.NginxStatusPort}} {
		if f.port < 1 || f.port > 65535 {
			errs = append(errs, fmt.Errorf("%s must be between 1 and 65535, got %d", f.name, f.port))
		} else if other, taken := usedBy[f.port]; taken {
			errs = append(errs, fmt.Errorf("%s and %s are both %d; each needs a port of its own", other, f.name, f.port))
		}
		usedBy[f.port] = f.name
	}
	if c.WorkerProcesses != "auto" {
		if n, err := strconv.Atoi(c.WorkerProcesses); err != nil || n < 1 {
			errs = append(errs, fmt.Errorf("--worker-processes must be auto or a positive number, got %q", c.WorkerProcesses))
		}
	}
	if c.SyncPeriod < 0 {
		errs = append(errs, errors.New("--sync-period must not be negative"))
	}
	if c.ShutdownGracePeriod < 0 {
		errs = append(errs, errors.New("--shutdown-grace-period must not be negative"))
	}
	if c.StartTimeout <= 0 {
		errs = append(errs, errors.New("--start-timeout must be positive"))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("--shutdown-timeout must be positive"))
	}
	if c.ControllerClass == "" {
		errs = append(errs, errors.New("--controller-class must not be empty"))
	}
	if c.NginxConfirmTimeout <= 0 {
		errs = append(errs, errors.New("--nginx-confirm-timeout must be positive"))
	}
	if c.ReloadRetries < 0 {
		errs = append(errs, errors.New("--reload-retries must not be negative"))
	}
	for name, mb := range map[string]int{"--endpoints-dict-size": c.EndpointsDictSize, "--certificates-dict-size": c.CertificatesDictSize,
		"--routes-dict-size": c.RoutesDictSize, "--limits-dict-size": c.LimitsDictSize} {
		if mb < 1 || mb > maxDictSizeMB {
			errs = append(errs, fmt.Errorf("%s must be between 1 and %d (MB), got %d", name, maxDictSizeMB, mb))
		}
	}
	for name, v := range map[string]string{"--default-backend-service": c.DefaultBackendService, "--default-ssl-certificate": c.DefaultSSLCertificate} {
		if v == "" {
			continue
		}
		key, err := ParseNamespacedName(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		if c.WatchNamespace != "" && key.Namespace != c.WatchNamespace {
			errs = append(errs, fmt.Errorf("%s %s: must be in --watch-namespace %s, the only namespace the controller watches", name, v, c.WatchNamespace))
		}
	}
	errs = append(errs, validateStatus(c)...)
	errs = append(errs, c.validatePassthrough()...)
	errs = append(errs, c.validateCompat()...)
	errs = append(errs, c.validateStreams()...)
	errs = append(errs, c.validateWebhook()...)
	errs = append(errs, c.validateMetrics()...)
	errs = append(errs, c.validateMemoryLimit()...)
	return errors.Join(errs...)
}

// ParseNamespacedName parses "namespace/name".
func ParseNamespacedName(s string) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, fmt.Errorf("want namespace/name, got %q", s)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}
