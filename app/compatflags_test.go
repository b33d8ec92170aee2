package app

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// ingressNginxFlags are the 71 flags of ingress-nginx's command-line reference
// (docs/user-guide/cli-arguments.md of its last release), written out here so that a flag dropped from
// BindFlags fails the test.
var ingressNginxFlags = strings.Fields(`annotations-prefix apiserver-host bucket-factor certificate-authority configmap
controller-class deep-inspect default-backend-service default-server-port default-ssl-certificate enable-annotation-validation
disable-catch-all disable-full-test disable-svc-external-name disable-sync-events dynamic-configuration-retries election-id
election-ttl enable-metrics enable-ssl-chain-completion enable-ssl-passthrough disable-leader-election
enable-topology-aware-routing exclude-socket-metrics health-check-path health-check-timeout healthz-port healthz-host
http-port https-port ingress-class ingress-class-by-name internal-logger-address kubeconfig length-buckets max-buckets
maxmind-edition-ids maxmind-retries-timeout maxmind-retries-count maxmind-license-key maxmind-mirror metrics-per-host
metrics-per-undefined-host monitor-max-batch-size post-shutdown-grace-period profiler-port profiling publish-service
publish-status-address report-node-internal-ip-address report-status-classes ssl-passthrough-proxy-port status-port
status-update-interval stream-port sync-period sync-rate-limit tcp-services-configmap time-buckets udp-services-configmap
update-status update-status-on-shutdown shutdown-grace-period size-buckets validating-webhook
validating-webhook-certificate validating-webhook-key version watch-ingress-without-class watch-namespace
watch-namespace-selector`)

// TestEveryIngressNginxFlagIsAccepted: a Deployment written for ingress-nginx may pass any of its flags.
// --version is bound by main.
func TestEveryIngressNginxFlagIsAccepted(t *testing.T) {
	if len(ingressNginxFlags) != 71 {
		t.Fatalf("the list has %d flags, ingress-nginx documents 71", len(ingressNginxFlags))
	}
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	BindFlags(fs, &cfg)
	for _, name := range ingressNginxFlags {
		if name == "version" {
			continue
		}
		if fs.Lookup(name) == nil {
			t.Errorf("--%s is not accepted", name)
		}
	}
}

// TestHelmChartArguments: the arguments the official chart passes by default (its _params.tpl with default
// values and the admission webhook on) start the controller, with the webhook on and no Warning about them.
func TestHelmChartArguments(t *testing.T) {
	cfg := parseFlags(t,
		"--publish-service=ingress-nginx/ingress-nginx-controller",
		"--election-id=ingress-nginx-leader",
		"--controller-class=k8s.io/ingress-nginx",
		"--ingress-class=nginx",
		"--configmap=ingress-nginx/ingress-nginx-controller",
		"--validating-webhook=:8443",
		"--validating-webhook-certificate=/usr/local/certificates/cert",
		"--validating-webhook-key=/usr/local/certificates/key",
		"--v=2",
	)
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if cfg.ElectionID != "ingress-nginx-leader" || cfg.ControllerClass != "k8s.io/ingress-nginx" || cfg.IngressClass != "nginx" {
		t.Errorf("flags with an equivalent not applied: %+v", cfg)
	}
	w := cfg.IgnoredFlagsWarning()
	if cfg.ValidatingWebhook != ":8443" || cfg.ValidatingWebhookCertificate != "/usr/local/certificates/cert" || cfg.ValidatingWebhookKey != "/usr/local/certificates/key" {
		t.Errorf("admission webhook flags not applied: %q %q %q", cfg.ValidatingWebhook, cfg.ValidatingWebhookCertificate, cfg.ValidatingWebhookKey)
	}
	if cfg.ConfigMap != "ingress-nginx/ingress-nginx-controller" {
		t.Errorf("--configmap: %q", cfg.ConfigMap)
	}
	if strings.Contains(w, "--election-id") || strings.Contains(w, "--configmap") || strings.Contains(w, "--v ") || strings.Contains(w, "--validating-webhook") {
		t.Errorf("the Warning names a flag that has an effect: %s", w)
	}
	if cfg.logLevel() != "info" {
		t.Errorf("--v=2: log level %s, want info", cfg.logLevel())
	}
}

func TestCompatFlags(t *testing.T) {
	tests := map[string]struct {
		args    []string
		wantErr string
		check   func(t *testing.T, c Config)
	}{
		"no ignored flag, no Warning": {check: func(t *testing.T, c Config) {
			if w := c.IgnoredFlagsWarning(); w != "" {
				t.Errorf("Warning without flags: %s", w)
			}
		}},
		"bool flag without value": {args: []string{"--enable-ssl-chain-completion", "--disable-full-test"}, check: func(t *testing.T, c Config) {
			if len(c.IgnoredFlags) != 2 {
				t.Errorf("IgnoredFlags = %v", c.IgnoredFlags)
			}
		}},
		"a flag given twice is named once": {args: []string{"--sync-rate-limit=1", "--sync-rate-limit=2"}, check: func(t *testing.T, c Config) {
			if len(c.IgnoredFlags) != 1 {
				t.Errorf("IgnoredFlags = %v", c.IgnoredFlags)
			}
		}},
		"klog flags": {args: []string{"--logtostderr", "--stderrthreshold=1", "--v=5"}, check: func(t *testing.T, c Config) {
			if c.logLevel() != "debug" {
				t.Errorf("--v=5: log level %s, want debug", c.logLevel())
			}
		}},
		"--log-level wins over --v": {args: []string{"--v=5", "--log-level=warn"}, check: func(t *testing.T, c Config) {
			if c.logLevel() != "warn" {
				t.Errorf("log level %s, want warn", c.logLevel())
			}
		}},
		"status-port is nginx-status-port": {args: []string{"--status-port=10300"}, check: func(t *testing.T, c Config) {
			if c.NginxStatusPort != 10300 {
				t.Errorf("NginxStatusPort = %d", c.NginxStatusPort)
			}
		}},
		"flags with an effect reach the config": {args: []string{"--disable-catch-all", "--disable-svc-external-name", "--report-node-internal-ip-address"},
			check: func(t *testing.T, c Config) {
				o := translateOptions(c)
				if !o.DisableCatchAll || !o.DisableExternalName || !c.ReportNodeInternalIP {
					t.Errorf("options %+v, config %+v", o, c)
				}
			}},
		"default annotations prefix": {args: []string{"--annotations-prefix=nginx.ingress.kubernetes.io"}},
		"other annotations prefix":   {args: []string{"--annotations-prefix=example.com"}, wantErr: `--annotations-prefix "example.com": only nginx.ingress.kubernetes.io`},
		"bad configmap":              {args: []string{"--configmap=settings"}, wantErr: "--configmap: want namespace/name"},
		"namespace selector":         {args: []string{"--watch-namespace-selector=team=a"}, wantErr: "--watch-namespace-selector"},
		"CA without API server":      {args: []string{"--certificate-authority=/ca.pem"}, wantErr: "--certificate-authority needs --apiserver-host"},
		"API server in local mode":   {args: []string{"--apiserver-host=https://10.0.0.1:6443", "--local-manifests=d"}, wantErr: "mutually exclusive"},
		"health path":                {args: []string{"--health-check-path=/live"}},
		"health path not a path":     {args: []string{"--health-check-path=live"}, wantErr: "--health-check-path must be a path"},
		"health path taken":          {args: []string{"--health-check-path=/metrics"}, wantErr: "already served"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := parseFlags(t, tc.args...)
			requireValidateError(t, cfg, tc.wantErr)
			if tc.check != nil {
				tc.check(t, cfg)
			}
		})
	}
}

// TestIgnoredFlagsParseTheirValue: an ignored flag still checks its value's type, as ingress-nginx would.
func TestIgnoredFlagsParseTheirValue(t *testing.T) {
	for _, args := range [][]string{
		{"--enable-metrics=maybe"}, {"--max-buckets=many"}, {"--sync-rate-limit=fast"},
		{"--maxmind-retries-timeout=10"}, {"--time-buckets=0.1,x"},
	} {
		cfg := DefaultConfig()
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		BindFlags(fs, &cfg)
		if err := fs.Parse(args); err == nil {
			t.Errorf("%v parsed without error", args)
		}
	}
}
