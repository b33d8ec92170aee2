package app

import "testing"

func TestWebhookFlags(t *testing.T) {
	withCert := []string{"--validating-webhook-certificate=/c", "--validating-webhook-key=/k"}
	for name, tc := range map[string]struct {
		args    []string
		wantErr string
	}{
		"off":                {},
		"on":                 {args: append([]string{"--validating-webhook=:8443"}, withCert...)},
		"host and port":      {args: append([]string{"--validating-webhook=127.0.0.1:8443"}, withCert...)},
		"without the files":  {args: []string{"--validating-webhook=:8443"}, wantErr: "needs --validating-webhook-certificate and --validating-webhook-key"},
		"without a key":      {args: []string{"--validating-webhook=:8443", "--validating-webhook-certificate=/c"}, wantErr: "needs"},
		"no port":            {args: append([]string{"--validating-webhook=8443"}, withCert...), wantErr: "want [host]:port"},
		"port out of range":  {args: append([]string{"--validating-webhook=:70000"}, withCert...), wantErr: "between 1 and 65535"},
		"port of the health": {args: append([]string{"--validating-webhook=:10254"}, withCert...), wantErr: "--validating-webhook and --healthz-port"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := parseFlags(t, tc.args...)
			requireValidateError(t, cfg, tc.wantErr)
			if tc.wantErr == "" && len(cfg.IgnoredFlags) != 0 {
				t.Fatalf("flags reported as without effect: %v", cfg.IgnoredFlags)
			}
		})
	}
}
