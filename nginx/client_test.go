package nginx

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
)

// statusServer records what the Client posts, answering like the Lua endpoints do.
func statusServer(t *testing.T, status int, reply string) (*Client, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodPost && r.Header.Get(StatusTokenHeader) != testStatusToken {
			http.Error(w, "missing or wrong token", http.StatusForbidden)
			return
		}
		mu.Lock()
		bodies = append(bodies, r.Method+" "+r.URL.RequestURI()+" "+string(b))
		mu.Unlock()
		w.WriteHeader(status)
		_, _ = io.WriteString(w, reply)
	}))
	t.Cleanup(srv.Close)
	return NewClient(srv.Listener.Addr().(*net.TCPAddr).Port, testStatusToken), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(bodies)
	}
}

func TestClientRequests(t *testing.T) {
	ctx := context.Background()
	tests := map[string]struct {
		call     func(c *Client) error
		wantBody string
		wantErr  string
	}{
		"push endpoints": {
			call: func(c *Client) error {
				return c.PushEndpoints(ctx, map[UpstreamName][]Endpoint{"a-1": {{Address: "10.0.0.1", Port: 80}, {Address: "fd00::1", Port: 8080}}, "b-2": nil})
			},
			wantBody: `POST /configuration/endpoints {"full":false,"upstreams":{"a-1":[{"address":"10.0.0.1","port":80},{"address":"fd00::1","port":8080}],"b-2":[]}}`,
		},
		"replace endpoints": {
			call:     func(c *Client) error { return c.ReplaceEndpoints(ctx, map[UpstreamName][]Endpoint{}) },
			wantBody: `POST /configuration/endpoints {"full":true,"upstreams":{}}`,
		},
		"a DNS name is refused before sending": {
			call: func(c *Client) error {
				return c.PushEndpoints(ctx, map[UpstreamName][]Endpoint{"a": {{Address: "db.example.com", Port: 80}}})
			},
			wantErr: `push endpoints of a: endpoint address "db.example.com" is not an IP address`,
		},
		"an IPv6 zone is refused": {
			call: func(c *Client) error {
				return c.PushEndpoints(ctx, map[UpstreamName][]Endpoint{"a": {{Address: "fe80::1%eth0", Port: 80}}})
			},
			wantErr: `is not an IP address`,
		},
		"a port out of range is refused": {
			call: func(c *Client) error {
				return c.PushEndpoints(ctx, map[UpstreamName][]Endpoint{"a": {{Address: "10.0.0.1", Port: 0}}})
			},
			wantErr: `port 0 out of range`,
		},
		"an invalid upstream name is refused": {
			call:    func(c *Client) error { return c.PushEndpoints(ctx, map[UpstreamName][]Endpoint{`a"b`: nil}) },
			wantErr: `invalid upstream name "a\"b"`,
		},
		"push certificates: nil removes a certificate, an empty id removes a host": {
			call: func(c *Client) error {
				return c.PushCertificates(ctx, CertificateUpdate{
					Certificates: map[string]*CertificatePEM{"ns/a": {Cert: []byte("C"), Key: []byte("K")}, "ns/old": nil},
					Hosts:        map[Hostname]string{"a.example.com": "ns/a", "gone.example.com": ""},
				})
			},
			wantBody: `POST /configuration/certificates {"full":false,"certificates":{"ns/a":{"cert":"C","key":"K"},"ns/old":null},"hosts":{"a.example.com":"ns/a","gone.example.com":null}}`,
		},
		"replace certificates drops removals": {
			call: func(c *Client) error {
				return c.ReplaceCertificates(ctx, CertificateUpdate{Certificates: map[string]*CertificatePEM{"ns/old": nil}, Hosts: map[Hostname]string{"x": ""}})
			},
			wantBody: `POST /configuration/certificates {"full":true,"certificates":{},"hosts":{}}`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, sent := statusServer(t, 200, `{}`)
			err := tc.call(c)
			bodies := sent()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				if len(bodies) != 0 {
					t.Errorf("sent %v despite the error", bodies)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(bodies) != 1 || !sameJSONRequest(bodies[0], tc.wantBody) {
				t.Errorf("sent %v\nwant %s", bodies, tc.wantBody)
			}
		})
	}
}

// sameJSONRequest compares "METHOD PATH JSON" lines with the JSON parts compared as values.
func sameJSONRequest(got, want string) bool {
	gp := strings.SplitN(got, " ", 3)
	wp := strings.SplitN(want, " ", 3)
	if len(gp) != 3 || len(wp) != 3 || gp[0] != wp[0] || gp[1] != wp[1] {
		return false
	}
	var g, w any
	if json.Unmarshal([]byte(gp[2]), &g) != nil || json.Unmarshal([]byte(wp[2]), &w) != nil {
		return false
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	return string(gb) == string(wb)
}

func TestClientErrors(t *testing.T) {
	c, _ := statusServer(t, 507, `{"error":"storing endpoints of a: no memory (increase the endpoints shared dict)"}`)
	err := c.PushEndpoints(context.Background(), map[UpstreamName][]Endpoint{"a": nil})
	if err == nil || !strings.Contains(err.Error(), "507 Insufficient Storage: storing endpoints of a: no memory") {
		t.Errorf("err = %v, want the data plane's message", err)
	}
	c, _ = statusServer(t, 500, `<html>`)
	if _, err := c.ConfigHash(context.Background()); err == nil || !strings.Contains(err.Error(), "500 Internal Server Error") {
		t.Errorf("err = %v", err)
	}
	if err := NewClient(freePort(t), testStatusToken).Healthz(context.Background()); err == nil {
		t.Error("Healthz of nothing succeeded")
	}
}

// A 507 answer is a partial success: the Client returns it as a *DictFullError that lists what did not
// fit, so that callers can tell it from a failed push.
func TestClientDictFull(t *testing.T) {
	ctx := context.Background()
	c, _ := statusServer(t, 507, `{"changed":3,"not_stored":["ns/a","ns/b"],"hosts_not_stored":["a.example.com"],`+
		`"error":"certificates dict full: raise --certificates-dict-size (now 1 MB)"}`)
	err := c.ReplaceCertificates(ctx, CertificateUpdate{})
	var full *DictFullError
	if !errors.As(err, &full) {
		t.Fatalf("err = %v, want a *DictFullError", err)
	}
	if full.Dict != "certificates" || !slices.Equal(full.NotStored, []string{"ns/a", "ns/b"}) ||
		!slices.Equal(full.HostsNotStored, []Hostname{"a.example.com"}) || !strings.Contains(err.Error(), "raise --certificates-dict-size") {
		t.Errorf("DictFullError %+v (%v)", full, err)
	}

	c, _ = statusServer(t, 507, `{"not_stored":["up-1"],"error":"endpoints dict full: raise --endpoints-dict-size (now 1 MB)"}`)
	err = c.PushEndpoints(ctx, map[UpstreamName][]Endpoint{"up-1": nil})
	if !errors.As(err, &full) || full.Dict != "endpoints" || !slices.Equal(full.NotStored, []string{"up-1"}) {
		t.Errorf("endpoints: err = %v (%+v), want a *DictFullError naming up-1", err, full)
	}

	// Other failures are not partial successes.
	for status, reply := range map[int]string{500: `{"error":"boom"}`, 400: `{"error":"invalid host"}`, 507: `<html>`} {
		c, _ = statusServer(t, status, reply)
		if err := c.PushEndpoints(ctx, map[UpstreamName][]Endpoint{"a": nil}); err == nil || errors.As(err, &full) {
			t.Errorf("%d %s: err = %v, want a plain error", status, reply, err)
		}
	}
}

func TestClientFilled(t *testing.T) {
	tests := map[string]struct {
		reply string
		want  Filled
	}{
		"filled":                          {`{"filled":true}`, Filled{Endpoints: true, Certificates: true, Routes: true}},
		"emptied by a reload":             {`{"filled":false}`, Filled{}},
		"a data plane that does not tell": {`{"upstreams":{}}`, Filled{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, sent := statusServer(t, 200, tc.reply)
			got, err := c.Filled(context.Background())
			if err != nil || got != tc.want {
				t.Errorf("Filled() = %+v, %v; want %+v", got, err, tc.want)
			}
			want := []string{"GET /configuration/endpoints?only=filled ", "GET /configuration/certificates?only=filled ", "GET /configuration/routes?only=filled "}
			if !slices.Equal(sent(), want) {
				t.Errorf("requests %q, want %q", sent(), want)
			}
		})
	}
}
