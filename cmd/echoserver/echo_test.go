package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// decode reads a Response from an HTTP response body and fails the test on any error.
func decode(t *testing.T, body io.Reader) Response {
	t.Helper()
	var got Response
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("decode response: %v", err)
	}
	return got
}

func TestEchoHandlerDescribesRequest(t *testing.T) {
	tests := map[string]struct {
		method   string
		target   string
		host     string
		headers  map[string][]string
		wantPath string
		wantRawQ string
		wantURI  string
	}{
		"plain GET": {
			method: "GET", target: "/", host: "demo.example",
			wantPath: "/", wantURI: "/",
		},
		"path and query": {
			method: "GET", target: "/api/v1/items?limit=10&sort=name", host: "api.example",
			wantPath: "/api/v1/items", wantRawQ: "limit=10&sort=name", wantURI: "/api/v1/items?limit=10&sort=name",
		},
		"escaped path is decoded, URI kept raw": {
			method: "POST", target: "/a%20b/c", host: "x.example",
			wantPath: "/a b/c", wantURI: "/a%20b/c",
		},
		"repeated and odd headers": {
			method: "PUT", target: "/h", host: "h.example",
			headers: map[string][]string{
				"X-Multi":  {"one", "two"},
				"X-Quote":  {`say "hi" \ bye`},
				"X-Ctl":    {"tab\there"},
				"X-Utf8":   {"grüße ✓"},
				"X-Empty":  {""},
				"X-Ls-Sep": {"a\u2028b"},
			},
			wantPath: "/h", wantURI: "/h",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(&echoHandler{name: "backend-a"})
			defer srv.Close()

			req, err := http.NewRequest(tc.method, srv.URL+tc.target, strings.NewReader("body"))
			if err != nil {
				t.Fatal(err)
			}
			req.Host = tc.host
			for k, vs := range tc.headers {
				for _, v := range vs {
					req.Header.Add(k, v)
				}
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status = %d, want 200", resp.StatusCode)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			if n := resp.Header.Get("X-Echo-Name"); n != "backend-a" {
				t.Errorf("X-Echo-Name = %q, want backend-a", n)
			}
			got := decode(t, resp.Body)

			want := Response{
				Name:     "backend-a",
				Listen:   srv.Listener.Addr().String(),
				Method:   tc.method,
				Proto:    "HTTP/1.1",
				Host:     tc.host,
				URI:      tc.wantURI,
				Path:     tc.wantPath,
				RawQuery: tc.wantRawQ,
			}
			if got.Name != want.Name || got.Listen != want.Listen || got.Method != want.Method ||
				got.Proto != want.Proto || got.Host != want.Host || got.URI != want.URI ||
				got.Path != want.Path || got.RawQuery != want.RawQuery || got.TLS || got.SNI != "" {
				t.Errorf("response = %+v\nwant fields %+v", got, want)
			}
			if got.RemoteAddr == "" {
				t.Error("remoteAddr is empty")
			}
			for k, vs := range tc.headers {
				if g := got.Headers[k]; !equalStrings(g, vs) {
					t.Errorf("header %s = %q, want %q", k, g, vs)
				}
			}
			if g := got.Headers["Content-Length"]; !equalStrings(g, []string{"4"}) {
				t.Errorf("Content-Length header = %q, want [4]", g)
			}
		})
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestEchoHandlerHEADHasNoBody(t *testing.T) {
	srv := httptest.NewServer(&echoHandler{name: "h"})
	defer srv.Close()
	resp, err := srv.Client().Head(srv.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || len(b) != 0 {
		t.Fatalf("HEAD: status %d, %d body bytes; want 200 and none", resp.StatusCode, len(b))
	}
}

func TestEchoHandlerReportsTLSAndSNI(t *testing.T) {
	srv := httptest.NewUnstartedServer(&echoHandler{name: "secure"})
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()

	client := srv.Client()
	client.Transport.(*http.Transport).TLSClientConfig.ServerName = "shop.example"
	client.Transport.(*http.Transport).TLSClientConfig.InsecureSkipVerify = true
	resp, err := client.Get(srv.URL + "/tls")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got := decode(t, resp.Body)
	if !got.TLS || got.SNI != "shop.example" || got.Proto != "HTTP/2.0" {
		t.Fatalf("tls=%v sni=%q proto=%q; want true, shop.example, HTTP/2.0", got.TLS, got.SNI, got.Proto)
	}
}

func TestEchoHandlerLogsRequestsOnlyWhenAsked(t *testing.T) {
	for _, enabled := range []bool{false, true} {
		core, logs := observer.New(zap.InfoLevel)
		h := &echoHandler{name: "n"}
		if enabled {
			h.log = zap.New(core)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "http://a.example/p", nil))
		want := 0
		if enabled {
			want = 1
		}
		if logs.Len() != want {
			t.Errorf("log-requests=%v: %d log entries, want %d", enabled, logs.Len(), want)
		}
	}
}

func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	inputs := []string{
		"", "plain", `quote " backslash \ slash /`, "\x00\x01\x1f\x7f", "\n\r\t\b\f",
		"ünïcödé ✓ 日本", "bad utf8 \xff\xfe end", "trunc \xe2\x82", "\u2028\u2029", "<script>&</script>",
	}
	for _, in := range inputs {
		enc := appendJSONString(nil, in)
		var back string
		if err := json.Unmarshal(enc, &back); err != nil {
			t.Errorf("appendJSONString(%q) = %s: not valid JSON: %v", in, enc, err)
			continue
		}
		std, _ := json.Marshal(in)
		var stdBack string
		_ = json.Unmarshal(std, &stdBack)
		if back != stdBack {
			t.Errorf("appendJSONString(%q) decodes to %q, encoding/json round-trips to %q", in, back, stdBack)
		}
	}
}

func FuzzAppendJSONString(f *testing.F) {
	f.Add("hello")
	f.Add("\xff\"\\\x00")
	f.Fuzz(func(t *testing.T, s string) {
		enc := appendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(enc, &back); err != nil {
			t.Fatalf("invalid JSON %s for %q: %v", enc, s, err)
		}
		std, _ := json.Marshal(s)
		var stdBack string
		_ = json.Unmarshal(std, &stdBack)
		if back != stdBack {
			t.Fatalf("%q decodes to %q, encoding/json gives %q", s, back, stdBack)
		}
	})
}

func TestParseFlags(t *testing.T) {
	tests := map[string]struct {
		args       []string
		wantListen []string
		wantErr    string
	}{
		"default listen":       {args: nil, wantListen: []string{"127.0.0.1:9000"}},
		"repeated":             {args: []string{"--listen", "127.0.0.1:1", "--listen", "127.0.0.1:2"}, wantListen: []string{"127.0.0.1:1", "127.0.0.1:2"}},
		"comma list":           {args: []string{"--listen=127.0.0.1:1, 127.0.0.1:2"}, wantListen: []string{"127.0.0.1:1", "127.0.0.1:2"}},
		"empty listen":         {args: []string{"--listen="}, wantErr: "at least one address"},
		"cert without key":     {args: []string{"--tls-cert", "c.pem"}, wantErr: "together"},
		"tls and cert":         {args: []string{"--tls", "--tls-cert", "c", "--tls-key", "k"}, wantErr: "cannot be combined"},
		"positional arguments": {args: []string{"extra"}, wantErr: "unexpected arguments"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg, err := parseFlags(tc.args, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !equalStrings(cfg.listen, tc.wantListen) {
				t.Errorf("listen = %q, want %q", cfg.listen, tc.wantListen)
			}
		})
	}
}

// startRun runs the server in the background and returns its addresses and a stop
// function that cancels it and returns run's error.
func startRun(t *testing.T, cfg config) ([]net.Addr, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrsCh := make(chan []net.Addr, 1)
	errCh := make(chan error, 1)
	go func() { errCh <- run(ctx, cfg, zap.NewNop(), func(a []net.Addr) { addrsCh <- a }) }()
	select {
	case a := <-addrsCh:
		return a, func() error { cancel(); return <-errCh }
	case err := <-errCh:
		cancel()
		t.Fatalf("run: %v", err)
		return nil, nil
	}
}

func TestRunServesEveryListenerAndStopsGracefully(t *testing.T) {
	cfg, err := parseFlags([]string{"--name", "multi", "--listen", "127.0.0.1:0,127.0.0.1:0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	addrs, stop := startRun(t, cfg)
	if len(addrs) != 2 {
		t.Fatalf("%d listeners, want 2", len(addrs))
	}
	for _, a := range addrs {
		resp, err := http.Get("http://" + a.String() + "/")
		if err != nil {
			t.Fatal(err)
		}
		got := decode(t, resp.Body)
		resp.Body.Close()
		if got.Listen != a.String() || got.Name != "multi" {
			t.Errorf("via %s: listen=%q name=%q", a, got.Listen, got.Name)
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("run returned %v after cancel, want nil", err)
	}
	if _, err := net.DialTimeout("tcp", addrs[0].String(), time.Second); err == nil {
		t.Error("listener still accepts connections after shutdown")
	}
}

func TestRunSelfSignedTLS(t *testing.T) {
	cfg, err := parseFlags([]string{"--name", "tls-backend", "--tls", "--listen", "127.0.0.1:0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	addrs, stop := startRun(t, cfg)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	var peer *tls.ConnectionState
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true, ServerName: "sni.example"},
		ForceAttemptHTTP2: true,
	}}
	resp, err := client.Get("https://" + addrs[0].String() + "/secure")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	peer = resp.TLS
	got := decode(t, resp.Body)
	if !got.TLS || got.SNI != "sni.example" {
		t.Errorf("tls=%v sni=%q, want true and sni.example", got.TLS, got.SNI)
	}
	if peer == nil || len(peer.PeerCertificates) == 0 || peer.PeerCertificates[0].Subject.CommonName != "tls-backend" {
		t.Errorf("peer certificate does not name the server: %+v", peer)
	}
	if err := peer.PeerCertificates[0].VerifyHostname("127.0.0.1"); err != nil {
		t.Errorf("self-signed certificate does not cover the listen address: %v", err)
	}
}

func TestRunFailsOnBusyAddress(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cfg := config{listen: []string{l.Addr().String()}, name: "x", shutdownTimeout: time.Second}
	err = run(context.Background(), cfg, zap.NewNop(), nil)
	if err == nil || !strings.Contains(err.Error(), l.Addr().String()) {
		t.Fatalf("err = %v, want a listen error naming %s", err, l.Addr())
	}
}

func BenchmarkAppendResponse(b *testing.B) {
	req := httptest.NewRequest("GET", "http://demo.example/api/v1/items?limit=10", nil)
	req.Header.Set("User-Agent", "bench/1.0")
	req.Header.Set("Accept", "*/*")
	req.Header.Set("X-Forwarded-For", "192.0.2.10")
	req.Header.Set("X-Request-Id", "0123456789abcdef0123456789abcdef")
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = appendResponse(buf[:0], "backend", req)
	}
	if !bytes.HasSuffix(buf, []byte("}")) {
		b.Fatal("truncated")
	}
}
