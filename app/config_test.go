package app

import (
	"flag"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/ingress-reactor/ingress-reactor/nginx"
)

// parseFlags returns the configuration that args give.
func parseFlags(t *testing.T, args ...string) Config {
	t.Helper()
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	BindFlags(fs, &cfg)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// requireValidateError fails t unless cfg.Validate's error contains wantErr, or there is none and wantErr is "".
func requireValidateError(t *testing.T, cfg Config, wantErr string) {
	t.Helper()
	err := cfg.Validate()
	switch {
	case wantErr == "" && err != nil:
		t.Fatalf("want no error, got %v", err)
	case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
		t.Fatalf("want error containing %q, got %v", wantErr, err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := map[string]struct {
		args    []string
		wantErr string
	}{
		"defaults":                {},
		"local mode":              {args: []string{"--local-manifests", "examples/local"}},
		"both sources":            {args: []string{"--kubeconfig", "k", "--local-manifests", "d"}, wantErr: "mutually exclusive"},
		"bad log level":           {args: []string{"--log-level", "loud"}, wantErr: "--log-level"},
		"bad log format":          {args: []string{"--log-format", "xml"}, wantErr: "--log-format"},
		"port out of range":       {args: []string{"--http-port", "70000"}, wantErr: "--http-port"},
		"bad default backend":     {args: []string{"--default-backend-service", "nons"}, wantErr: "--default-backend-service"},
		"good default backend":    {args: []string{"--default-backend-service", "ns/svc"}},
		"bad default certificate": {args: []string{"--default-ssl-certificate", "a/b/c"}, wantErr: "--default-ssl-certificate"},
		"default certificate outside the watched namespace": {args: []string{"--watch-namespace", "web", "--default-ssl-certificate", "ops/cert"}, wantErr: "must be in --watch-namespace"},
		"default backend in the watched namespace":          {args: []string{"--watch-namespace", "web", "--default-backend-service", "web/fallback"}},
		"empty controller class":                            {args: []string{"--controller-class="}, wantErr: "--controller-class"},
		"dict sizes":                                        {args: []string{"--endpoints-dict-size", "1", "--certificates-dict-size", "128"}},
		"no endpoints dict":                                 {args: []string{"--endpoints-dict-size", "0"}, wantErr: "--endpoints-dict-size must be between 1 and 128"},
		"certificates dict larger than a push":              {args: []string{"--certificates-dict-size", "129"}, wantErr: "--certificates-dict-size must be between 1 and 128"},
		"two port flags with one port":                      {args: []string{"--healthz-port", "8080", "--http-port", "8080"}, wantErr: "--healthz-port and --http-port are both 8080"},
		"status port on the HTTPS port":                     {args: []string{"--nginx-status-port", "443"}, wantErr: "--https-port and --nginx-status-port are both 443"},
		"worker processes":                                  {args: []string{"--worker-processes", "4"}},
		"bad worker processes":                              {args: []string{"--worker-processes", "many"}, wantErr: `--worker-processes must be auto or a positive number, got "many"`},
		"no confirm timeout":                                {args: []string{"--nginx-confirm-timeout", "0s"}, wantErr: "--nginx-confirm-timeout must be positive"},
		"long start timeout":                                {args: []string{"--start-timeout", "20m"}},
		"no start timeout":                                  {args: []string{"--start-timeout", "0s"}, wantErr: "--start-timeout must be positive"},
		"TCP and UDP services":                              {args: []string{"--tcp-services-configmap", "ingress/tcp", "--udp-services-configmap", "ingress/udp"}},
		"bad TCP services ConfigMap":                        {args: []string{"--tcp-services-configmap", "tcp"}, wantErr: "--tcp-services-configmap"},
		"no UDP flow timeout":                               {args: []string{"--udp-services-idle-timeout", "0s"}, wantErr: "--udp-services-idle-timeout must be positive"},
		"no UDP flows":                                      {args: []string{"--udp-services-max-flows", "0"}, wantErr: "--udp-services-max-flows must be at least 1"},
		"metrics dict larger than a scrape reads":           {args: []string{"--metrics-dict-size", "65"}, wantErr: "--metrics-dict-size must be between 1 and 64"},
		"negative TCP idle timeout":                         {args: []string{"--tcp-services-idle-timeout", "-1s"}, wantErr: "--tcp-services-idle-timeout must not be negative"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := parseFlags(t, tc.args...)
			requireValidateError(t, cfg, tc.wantErr)
		})
	}
}

// TestDictSizeFlagsReachNginx checks that --endpoints-dict-size, --certificates-dict-size, --routes-dict-size and
// --limits-dict-size size the
// shared dicts in the nginx.conf the controller renders.
func TestDictSizeFlagsReachNginx(t *testing.T) {
	if _, err := nginx.DetectModules(false); err != nil {
		t.Skipf("NGINX's Lua module is not installed (run make deps): %v", err)
	}
	tests := map[string]struct {
		args []string
		want []string
	}{
		"defaults": {want: []string{"lua_shared_dict ingress_reactor_endpoints 32m;", "lua_shared_dict ingress_reactor_certificates 64m;",
			"lua_shared_dict ingress_reactor_routes 32m;", "lua_shared_dict ingress_reactor_limits 16m;"}},
		"set": {
			args: []string{"--endpoints-dict-size", "7", "--certificates-dict-size", "128", "--routes-dict-size", "9", "--limits-dict-size", "3"},
			want: []string{"lua_shared_dict ingress_reactor_endpoints 7m;", "lua_shared_dict ingress_reactor_certificates 128m;",
				"lua_shared_dict ingress_reactor_routes 9m;", "lua_shared_dict ingress_reactor_limits 3m;"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := parseFlags(t, tc.args...)
			cfg.NginxDir = t.TempDir()
			cfg.SSLDir = t.TempDir() + "/ssl"
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			dp, err := NewDataPlane(cfg, zaptest.NewLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			conf, _, err := nginx.Render(nginx.Model{}, dp.Render)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range tc.want {
				if !strings.Contains(string(conf), want) {
					t.Errorf("nginx.conf lacks %q", want)
				}
			}
		})
	}
}

// TestRelativeSSLDir: a relative --ssl-dir works; NGINX's configuration names the default certificate by
// absolute path.
func TestRelativeSSLDir(t *testing.T) {
	if _, err := nginx.DetectModules(false); err != nil {
		t.Skipf("NGINX's Lua module is not installed (run make deps): %v", err)
	}
	t.Chdir(t.TempDir())
	cfg := parseFlags(t, "--ssl-dir", "rel/ssl", "--nginx-dir", "rel/nginx")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	dp, err := NewDataPlane(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(dp.Render.DefaultCertificate) || !filepath.IsAbs(dp.Render.DefaultCertificateKey) {
		t.Errorf("default certificate files %q and %q are not absolute", dp.Render.DefaultCertificate, dp.Render.DefaultCertificateKey)
	}
	if _, _, err := nginx.Render(nginx.Model{}, dp.Render); err != nil {
		t.Errorf("render with a relative --ssl-dir: %v", err)
	}
}

// TestReservedPorts: TCP and UDP services cannot take the ports the controller and NGINX listen on; the
// passthrough proxy's loopback port only counts when passthrough is on.
func TestReservedPorts(t *testing.T) {
	cfg := parseFlags(t, "--http-port", "8080", "--https-port", "8443", "--healthz-port", "9254", "--nginx-status-port", "9246", "--ssl-passthrough-proxy-port", "9442")
	want := map[int]string{8080: "--http-port", 8443: "--https-port", 9254: "--healthz-port", 9246: "--nginx-status-port"}
	got := cfg.reservedPorts()
	if len(got) != len(want) {
		t.Fatalf("reserved = %v, want the ports of %v", got, want)
	}
	for port, flag := range want {
		if !strings.HasPrefix(got[port], flag) {
			t.Errorf("port %d reserved by %q, want %s", port, got[port], flag)
		}
	}
	cfg.EnableSSLPassthrough = true
	if got := cfg.reservedPorts()[9442]; got != "--ssl-passthrough-proxy-port" {
		t.Errorf("with passthrough, port 9442 reserved by %q, want --ssl-passthrough-proxy-port", got)
	}
}
