package nginx

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAnnotationLogging: enable-access-log and enable-rewrite-log -> route options; invalid values are
// ignored with a Warning.
func TestAnnotationLogging(t *testing.T) {
	tests := map[string]struct {
		kv      []string
		want    *RouteOptions
		warning string
	}{
		"none":                  {},
		"access log on":         {kv: []string{AnnotationEnableAccessLog, "true"}},
		"access log off":        {kv: []string{AnnotationEnableAccessLog, " false "}, want: &RouteOptions{NoAccessLog: true}},
		"rewrite log on":        {kv: []string{AnnotationEnableRewriteLog, "TRUE"}, want: &RouteOptions{RewriteLog: true}},
		"both":                  {kv: []string{AnnotationEnableAccessLog, "0", AnnotationEnableRewriteLog, "1"}, want: &RouteOptions{NoAccessLog: true, RewriteLog: true}},
		"invalid access log":    {kv: []string{AnnotationEnableAccessLog, "off"}, warning: `metadata.annotations[nginx.ingress.kubernetes.io/enable-access-log]: "off" is not a boolean (want "true" or "false"); ignored`},
		"invalid rewrite log":   {kv: []string{AnnotationEnableRewriteLog, "on;"}, warning: `metadata.annotations[nginx.ingress.kubernetes.io/enable-rewrite-log]: "on;" is not a boolean (want "true" or "false"); ignored`},
		"rewrite log off is ok": {kv: []string{AnnotationEnableRewriteLog, "false"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, errs := translateAnnotated(t, DefaultTranslateOptions(), tc.kv...)
			if got == nil {
				t.Fatalf("rejected: %q", errs)
			}
			if !got.Options.Equal(tc.want) {
				t.Errorf("options %+v, want %+v", got.Options, tc.want)
			}
			if tc.warning != "" && !slices.Contains(got.Warnings, tc.warning) {
				t.Errorf("warnings %q, want %q", got.Warnings, tc.warning)
			}
		})
	}
}

// TestLoggingThroughNginx: through real NGINX, a route with enable-access-log: false is not in the
// access log while its neighbour is, and a route with enable-rewrite-log writes its rewrites to the
// error log.
func TestLoggingThroughNginx(t *testing.T) {
	requireNginx(t)
	dir := t.TempDir()
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	cfg.AccessLog = filepath.Join(dir, "access.log")
	cfg.ErrorLog = filepath.Join(dir, "error.log")
	rt := testRuntime(t, cfg, nil)
	backend := httpServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, r.URL.Path) })
	m, _ := buildModel(t, []any{
		service("default", "web", port(80, "http")),
		ingress("default", "quiet", annotate(AnnotationEnableAccessLog, "false", AnnotationEnableRewriteLog, "true",
			AnnotationRewriteTarget, "/new/$1", AnnotationUseRegex, "true"), rule("quiet.example.com", prefix("/old/(.*)", "web", 80))),
		ingress("default", "loud", rule("loud.example.com", prefix("/", "web", 80))),
	}, nil)
	applyModel(t, rt, m, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{up("default", "web", 80).Name: {backend}}); err != nil {
		t.Fatal(err)
	}
	// One connection: NGINX logs a request before it reads the next one from the connection, so once
	// the second request is in the log, the first one would be too.
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxConnsPerHost: 1}}
	get := func(host, path, want string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", cfg.HTTPPort, path), nil)
		req.Host = host
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(body) != want {
			t.Fatalf("%s%s: %d %q, want 200 %q", host, path, resp.StatusCode, body, want)
		}
	}
	get("quiet.example.com", "/old/x", "/new/x")
	get("loud.example.com", "/loud-path", "/loud-path")
	var access string
	for ctx.Err() == nil {
		b, _ := os.ReadFile(cfg.AccessLog)
		if access = string(b); strings.Contains(access, "GET /loud-path ") {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(access, "GET /loud-path ") {
		t.Fatalf("the access log lacks the logged route's request:\n%s", access)
	}
	if strings.Contains(access, "/old/x") {
		t.Errorf("the access log has the request of the route with enable-access-log: false:\n%s", access)
	}
	errorLog, _ := os.ReadFile(cfg.ErrorLog)
	if !strings.Contains(string(errorLog), "rewrite-target of host quiet.example.com: /old/x -> /new/x") {
		t.Errorf("the error log lacks the rewrite of the route with enable-rewrite-log:\n%s", errorLog)
	}
}
