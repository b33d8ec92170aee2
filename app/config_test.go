package app

import (
	"flag"
	"strings"
	"testing"
)

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
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := DefaultConfig()
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			BindFlags(fs, &cfg)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := cfg.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("want no error, got %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("want error containing %q, got %v", tc.wantErr, err)
			}
		})
	}
}
