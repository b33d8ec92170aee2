package nginx

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestLogSettings: each log key's values, as nginx.conf shows them, and what is refused.
func TestLogSettings(t *testing.T) {
	cases := map[string]struct {
		data map[string]string
		// access is RenderConfig.AccessLog before the ConfigMap applies.
		access string
		want   []string
		absent []string
		// problem is part of the one problem's reason, "" for none.
		problem string
	}{
		"default format, off without a path": {
			want: []string{"access_log off;", "set_log_default_backend(false)"}, absent: []string{"log_format"},
		},
		"default format on stdout": {
			access: "stdout",
			want: []string{`log_format upstreaminfo $remote_addr " - " $remote_user " [" $time_local "] \"" $request "\" " $status " " ` +
				`$body_bytes_sent " \"" $http_referer "\" \"" $http_user_agent "\" " $request_length " " $request_time " [" ` +
				`$proxy_upstream_name "] [] " $upstream_addr " " $upstream_response_length " " $upstream_response_time " " ` +
				`$upstream_status " " $ingress_reactor_request_id;`,
				`access_log "/dev/stdout" upstreaminfo if=$ingress_reactor_loggable;`},
		},
		"the ConfigMap's path turns the log on": {
			data: map[string]string{"access-log-path": "/var/log/nginx/access.log"},
			want: []string{`access_log "/var/log/nginx/access.log" upstreaminfo if=`},
		},
		"http-access-log-path wins": {
			data: map[string]string{"access-log-path": "/var/log/a.log", "http-access-log-path": "/var/log/b.log"},
			want: []string{`access_log "/var/log/b.log" upstreaminfo if=`},
		},
		"disable-access-log wins": {
			access: "stdout", data: map[string]string{"disable-access-log": "true", "access-log-path": "/var/log/a.log"},
			want: []string{"access_log off;"},
		},
		"JSON with braces": {
			access: "stdout", data: map[string]string{"log-format-upstream": `{"t": "${time_iso8601}", "s": $status}`, "log-format-escape-json": "true"},
			want: []string{`log_format upstreaminfo escape=json "{\"t\": \"" $time_iso8601 "\", \"s\": " $status "}";`},
		},
		"escape none wins over json": {
			access: "stdout", data: map[string]string{"log-format-escape-json": "true", "log-format-escape-none": "true"},
			want: []string{"log_format upstreaminfo escape=none $remote_addr"},
		},
		"header and argument families": {
			access: "stdout", data: map[string]string{"log-format-upstream": "$http_x_forwarded_for $sent_http_content_type $upstream_http_location $arg_page"},
			want: []string{`log_format upstreaminfo $http_x_forwarded_for " " $sent_http_content_type " " $upstream_http_location " " $arg_page;`},
		},
		"params, skipped URLs, default backend": {
			access: "stdout", data: map[string]string{"access-log-params": "buffer=32k, flush=1m", "skip-access-log-urls": "/healthz,/metrics?x=1",
				"enable-access-log-for-default-backend": "true"},
			want: []string{"upstreaminfo buffer=32768 flush=60s if=", "\"/healthz\" 1;", "\"/metrics?x=1\" 1;", "set_log_default_backend(true)"},
		},
		"error log path": {
			data: map[string]string{"error-log-path": "/var/log/nginx/error.log"},
			want: []string{`error_log "/var/log/nginx/error.log" notice;`},
		},
		"error log on stderr": {
			data: map[string]string{"error-log-path": "/dev/stderr"}, want: []string{`error_log "stderr" notice;`},
		},
		"Authorization refused":    {data: map[string]string{"log-format-upstream": "$status $http_authorization"}, problem: "never carry Authorization"},
		"Proxy-Authorization":      {data: map[string]string{"log-format-upstream": "${http_proxy_authorization}"}, problem: "never carry Authorization"},
		"Cookie refused":           {data: map[string]string{"log-format-upstream": "$http_cookie"}, problem: "cookies"},
		"a cookie refused":         {data: map[string]string{"log-format-upstream": "$cookie_session"}, problem: "cookies"},
		"upstream cookie refused":  {data: map[string]string{"log-format-upstream": "$upstream_cookie_sid"}, problem: "cookies"},
		"Set-Cookie refused":       {data: map[string]string{"log-format-upstream": "$sent_http_set_cookie"}, problem: "cookies"},
		"upstream Set-Cookie":      {data: map[string]string{"log-format-upstream": "$upstream_http_set_cookie"}, problem: "cookies"},
		"the status token refused": {data: map[string]string{"log-format-upstream": "$http_x_ingress_reactor_token"}, problem: "refused"},
		"controller variables":     {data: map[string]string{"log-format-upstream": "$ingress_reactor_token"}, problem: "not a variable this controller can log"},
		"request body refused":     {data: map[string]string{"log-format-upstream": "$request_body"}, problem: "credentials"},
		"raw certificate refused":  {data: map[string]string{"log-format-upstream": "$ssl_client_raw_cert"}, problem: "whole certificates"},
		"upper case refused":       {data: map[string]string{"log-format-upstream": "$HTTP_COOKIE"}, problem: "not a variable name"},
		"unknown variable":         {data: map[string]string{"log-format-upstream": "$namespace"}, problem: "not a variable this controller can log"},
		"a lone dollar":            {data: map[string]string{"log-format-upstream": "cost: $ 5"}, problem: "must start a variable name"},
		"unclosed brace":           {data: map[string]string{"log-format-upstream": "${status"}, problem: "without }"},
		"newline refused":          {data: map[string]string{"log-format-upstream": "$status\n$uri"}, problem: "control characters"},
		"relative path":            {data: map[string]string{"access-log-path": "access.log"}, problem: "absolute"},
		"path with a variable":     {data: map[string]string{"access-log-path": "/var/log/$host.log"}, problem: "letters, digits"},
		"syslog refused":           {data: map[string]string{"access-log-path": "syslog:server=x"}, problem: "absolute"},
		"gzip refused":             {data: map[string]string{"access-log-params": "buffer=16k gzip"}, problem: "want buffer=SIZE or flush=TIME"},
		"flush without buffer":     {data: map[string]string{"access-log-params": "flush=5s"}, problem: "flush needs buffer"},
		"buffer too small":         {data: map[string]string{"access-log-params": "buffer=1"}, problem: "buffer"},
		"skip URL with a space":    {data: map[string]string{"skip-access-log-urls": "/a /b\"c"}, problem: "not a valid request URI"},
		"skip URL without slash":   {data: map[string]string{"skip-access-log-urls": "~^/a"}, problem: "not a valid request URI"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, _, problems := ParseSettings(tc.data, nil)
			switch {
			case tc.problem == "" && len(problems) > 0:
				t.Fatalf("problems %v", problems)
			case tc.problem != "" && (len(problems) != 1 || !strings.Contains(problems[0].Reason, tc.problem)):
				t.Fatalf("problems %v, want one with %q", problems, tc.problem)
			}
			cfg := RenderConfig{HTTPPort: 80, StatusPort: 10246, StatusToken: testStatusToken, Paths: Paths{Prefix: "/nginx"},
				AccessLog: tc.access, Settings: s}
			conf, _, err := Render(Model{}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !bytes.Contains(conf, []byte(w)) {
					t.Errorf("nginx.conf lacks %s", w)
				}
			}
			for _, a := range tc.absent {
				if bytes.Contains(conf, []byte(a)) {
					t.Errorf("nginx.conf has %s", a)
				}
			}
		})
	}
}

// TestLogSettingsPassNginx: a format naming every variable the parser accepts, with every access log key
// set, is accepted by a real NGINX without a warning (a variable NGINX does not know would fail it).
func TestLogSettingsPassNginx(t *testing.T) {
	requireNginx(t)
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range logVariables {
			if !yield(n) {
				return
			}
		}
	})
	format := `{"all": "$` + strings.Join(names, `|$`) + `", "h": "$http_x_a$sent_http_x_b$sent_trailer_x_c$upstream_http_x_d$upstream_trailer_x_e$arg_f", ` +
		`"alias": "$req_id$proxy_alternative_upstream_name"}`
	for _, escape := range []string{"log-format-escape-json", "log-format-escape-none"} {
		s, _, problems := ParseSettings(map[string]string{"log-format-upstream": format, escape: "true", "access-log-path": "/dev/stdout",
			"access-log-params": "buffer=64k flush=10s", "skip-access-log-urls": "/healthz /a?b=c", "enable-access-log-for-default-backend": "true"}, nil)
		if len(problems) > 0 {
			t.Fatal(problems)
		}
		cfg := testRenderConfig(t, nginxDir(t))
		cfg.Settings = s
		conf := nginxTest(t, Model{}, cfg)
		if !bytes.Contains(conf, []byte(`access_log "/dev/stdout" upstreaminfo buffer=65536 flush=10s if=$ingress_reactor_loggable;`)) {
			t.Errorf("%s: nginx.conf lacks the access_log line", escape)
		}
	}
}

// TestLogFormatInjection: text of a log format never leaves its quoted string: NGINX accepts the
// configuration and the text is one argument of log_format.
func TestLogFormatInjection(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.AccessLog = "stdout"
	for _, p := range []string{"1; include /etc/passwd", "4 8k;}", "text/html\"; server_tokens on; #", "msie6 } http {",
		"x`y", "a'b", `\"; }`, `a\`, "# comment"} {
		s, _, problems := ParseSettings(map[string]string{"log-format-upstream": p}, nil)
		if len(problems) > 0 {
			t.Fatalf("%q: %v", p, problems)
		}
		cfg.Settings = s
		conf := nginxTest(t, Model{}, cfg)
		quoted, _ := Quote(p)
		if !bytes.Contains(conf, []byte("log_format upstreaminfo "+quoted+";\n")) {
			t.Errorf("%q: log_format is not the quoted text", p)
		}
	}
	for _, p := range []string{"on\r\nx", "$status\x00", "$http_evil_payload$"} {
		if _, good, _ := ParseSettings(map[string]string{"log-format-upstream": p}, nil); good["log-format-upstream"] != "" {
			t.Errorf("%q accepted", p)
		}
	}
}

// TestAccessLogThroughNginx: through real NGINX, lines in ingress-nginx's default format and in JSON
// (escaped), never an Authorization header or a cookie, skip-access-log-urls, and the default backend's
// requests logged only with enable-access-log-for-default-backend.
func TestAccessLogThroughNginx(t *testing.T) {
	requireNginx(t)
	dir := t.TempDir()
	cfg := testRenderConfig(t, nginxDir(t))
	cfg.HTTPSPort = 0
	logFile := filepath.Join(dir, "access.log")
	rt := testRuntime(t, cfg, nil)
	backend := httpServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, r.URL.Path) })
	m, _ := buildModel(t, []any{
		service("default", "web", port(80, "http")),
		ingress("default", "web", rule("web.example", prefix("/app", "web", 80))),
	}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// One connection: NGINX logs a request before it reads the next one from the connection, so once
	// a request is in the log, the ones before it would be too.
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxConnsPerHost: 1}}
	get := func(path string, header ...string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", cfg.HTTPPort, path), nil)
		req.Host = "web.example"
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// waitLine returns the log's lines once one contains marker.
	waitLine := func(marker string) []string {
		t.Helper()
		for {
			b, _ := os.ReadFile(logFile)
			if bytes.Contains(b, []byte(marker)) {
				return strings.Split(strings.TrimSpace(string(b)), "\n")
			}
			if ctx.Err() != nil {
				t.Fatalf("the access log lacks %q:\n%s", marker, b)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	apply := func(data map[string]string) {
		t.Helper()
		data["access-log-path"] = logFile
		s, _, problems := ParseSettings(data, nil)
		if len(problems) > 0 {
			t.Fatal(problems)
		}
		cfg.Settings = s
		applyModel(t, rt, m, cfg)
		if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{up("default", "web", 80).Name: {backend}}); err != nil {
			t.Fatal(err)
		}
	}

	apply(map[string]string{"skip-access-log-urls": "/app/skipped"})
	get("/nothing-matches")
	get("/app/skipped")
	get("/app/x?q=1", "Authorization", "Bearer secret-token-1", "Cookie", "session=secret-cookie-2", "User-Agent", "agent/1",
		"X-Request-ID", "req-42", "Referer", "http://ref.example/")
	lines := waitLine("GET /app/x?q=1 ")
	if len(lines) != 1 {
		t.Fatalf("want only the routed, not skipped request in the log, got:\n%s", strings.Join(lines, "\n"))
	}
	defaultLine := regexp.MustCompile(`^127\.0\.0\.1 - - \[[^]]+\] "GET /app/x\?q=1 HTTP/1\.1" 200 6 "http://ref\.example/" "agent/1" \d+ [\d.]+ ` +
		`\[` + regexp.QuoteMeta(string(up("default", "web", 80).Name)) + `\] \[\] 127\.0\.0\.1:\d+ 6 [\d.]+ 200 req-42$`)
	if !defaultLine.MatchString(lines[0]) {
		t.Errorf("line %q is not in ingress-nginx's default format", lines[0])
	}

	if strings.Contains(lines[0], "secret") {
		t.Errorf("the access log carries a credential: %s", lines[0])
	}

	// Every header, in JSON: the credentials are still absent.
	if err := os.Remove(logFile); err != nil {
		t.Fatal(err)
	}
	apply(map[string]string{"log-format-escape-json": "true", "enable-access-log-for-default-backend": "true",
		"log-format-upstream": `{"uri": "$request_uri", "ua": "$http_user_agent", "status": $status, "upstream": "$proxy_upstream_name"}`})
	get("/nothing-matches")
	get("/app/y", "Authorization", "Basic c2VjcmV0LTM=", "Cookie", "secret-cookie-4", "User-Agent", `quote" back\ tab`+"\tend")
	lines = waitLine(`"/app/y"`)
	if len(lines) != 2 {
		t.Fatalf("want the default backend's request and the routed one, got:\n%s", strings.Join(lines, "\n"))
	}
	var entries []map[string]any
	for _, l := range lines {
		var e map[string]any
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("line %q is not JSON: %v", l, err)
		}
		entries = append(entries, e)
	}
	if entries[0]["uri"] != "/nothing-matches" || entries[0]["status"] != float64(404) {
		t.Errorf("default backend's entry %v", entries[0])
	}
	if entries[1]["ua"] != `quote" back\ tab`+"\tend" || entries[1]["status"] != float64(200) || entries[1]["upstream"] != string(up("default", "web", 80).Name) {
		t.Errorf("routed entry %v", entries[1])
	}
	all, _ := os.ReadFile(logFile)
	for _, secret := range []string{"secret", "c2VjcmV0", "session="} {
		if bytes.Contains(all, []byte(secret)) {
			t.Errorf("the access log carries %q:\n%s", secret, all)
		}
	}
}
