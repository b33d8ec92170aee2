package nginx

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestListenSettings: reuse-port, disable-ipv6 and bind-address -> the public server's listen lines.
func TestListenSettings(t *testing.T) {
	tests := map[string]struct {
		data          map[string]string
		ipv6          bool
		listenAddress string
		want          []string
		wantProblem   string
	}{
		"defaults":       {want: []string{`listen "80" default_server reuseport;`, `listen "443" ssl http2 default_server reuseport;`}},
		"IPv6 host":      {ipv6: true, want: []string{`listen "80" default_server reuseport;`, `listen "[::]:80" default_server reuseport;`, `listen "443" ssl http2 default_server reuseport;`, `listen "[::]:443" ssl http2 default_server reuseport;`}},
		"reuse-port off": {data: map[string]string{"reuse-port": "false"}, want: []string{`listen "80" default_server;`, `listen "443" ssl http2 default_server;`}},
		"disable-ipv6":   {data: map[string]string{"disable-ipv6": "true"}, ipv6: true, want: []string{`listen "80" default_server reuseport;`, `listen "443" ssl http2 default_server reuseport;`}},
		"bind-address IPv4 only on an IPv6 host: the IPv6 wildcard stays": {data: map[string]string{"bind-address": "10.0.0.1, 10.0.0.2,10.0.0.1"}, ipv6: true,
			want: []string{`listen "10.0.0.1:80" default_server reuseport;`, `listen "10.0.0.2:80" default_server reuseport;`, `listen "[::]:80" default_server reuseport;`,
				`listen "10.0.0.1:443" ssl http2 default_server reuseport;`, `listen "10.0.0.2:443" ssl http2 default_server reuseport;`, `listen "[::]:443" ssl http2 default_server reuseport;`}},
		"bind-address both families": {data: map[string]string{"bind-address": "10.0.0.1, 2001:DB8::1, ::ffff:10.0.0.3"}, ipv6: true,
			want: []string{`listen "10.0.0.1:80" default_server reuseport;`, `listen "10.0.0.3:80" default_server reuseport;`, `listen "[2001:db8::1]:80" default_server reuseport;`,
				`listen "10.0.0.1:443" ssl http2 default_server reuseport;`, `listen "10.0.0.3:443" ssl http2 default_server reuseport;`, `listen "[2001:db8::1]:443" ssl http2 default_server reuseport;`}},
		"bind-address IPv6 without IPv6": {data: map[string]string{"bind-address": "2001:db8::1"},
			want: []string{`listen "80" default_server reuseport;`, `listen "443" ssl http2 default_server reuseport;`}},
		"bind-address replaces the listen address": {data: map[string]string{"bind-address": "10.0.0.1"}, listenAddress: "127.0.0.1",
			want: []string{`listen "10.0.0.1:80" default_server reuseport;`, `listen "10.0.0.1:443" ssl http2 default_server reuseport;`}},
		"the listen address without bind-address": {listenAddress: "127.0.0.1", ipv6: true,
			want: []string{`listen "127.0.0.1:80" default_server reuseport;`, `listen "127.0.0.1:443" ssl http2 default_server reuseport;`}},
		"bind-address not an address": {data: map[string]string{"bind-address": "10.0.0.1, localhost"},
			want:        []string{`listen "80" default_server reuseport;`, `listen "443" ssl http2 default_server reuseport;`},
			wantProblem: `bind-address: invalid value "10.0.0.1, localhost": "localhost" is not an IP address`},
		"bind-address with a zone": {data: map[string]string{"bind-address": "fe80::1%eth0"},
			want:        []string{`listen "80" default_server reuseport;`, `listen "443" ssl http2 default_server reuseport;`},
			wantProblem: `bind-address: invalid value "fe80::1%eth0": "fe80::1%eth0" is not an IP address`},
		"bind-address a CIDR": {data: map[string]string{"bind-address": "10.0.0.0/8"},
			want:        []string{`listen "80" default_server reuseport;`, `listen "443" ssl http2 default_server reuseport;`},
			wantProblem: `bind-address: invalid value "10.0.0.0/8"`},
		"reuse-port invalid": {data: map[string]string{"reuse-port": "on"},
			want:        []string{`listen "80" default_server reuseport;`, `listen "443" ssl http2 default_server reuseport;`},
			wantProblem: `reuse-port: invalid value "on": want true or false`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, _, problems := ParseSettings(tc.data, nil)
			checkProblem(t, problems, tc.wantProblem)
			cfg := RenderConfig{HTTPPort: 80, HTTPSPort: 443, StatusPort: 10246, StatusToken: testStatusToken, Paths: Paths{Prefix: "/nginx"},
				DefaultCertificate: "/ssl/default.crt", DefaultCertificateKey: "/ssl/default.key", IPv6: tc.ipv6, ListenAddress: tc.listenAddress, Settings: s}
			conf, _, err := Render(Model{}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			var listens []string
			for line := range strings.Lines(string(conf)) {
				if line = strings.TrimSpace(line); strings.HasPrefix(line, "listen ") && !strings.Contains(line, "127.0.0.1:10246") {
					listens = append(listens, line)
				}
			}
			if !slices.Equal(listens, tc.want) {
				t.Errorf("listen lines\n%s\nwant\n%s", strings.Join(listens, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestListenSettingsNginx: through real NGINX, bind-address puts the listeners on the address given and
// NGINX serves there; reuse-port gives each of the two workers a listening socket of its own (the kernel
// lists two on the port), and reuse-port false one.
func TestListenSettingsNginx(t *testing.T) {
	requireNginx(t)
	for _, tc := range []struct {
		data    map[string]string
		sockets int
	}{
		{data: map[string]string{"bind-address": "127.0.0.1"}, sockets: 2},
		{data: map[string]string{"bind-address": "127.0.0.1", "reuse-port": "false"}, sockets: 1},
	} {
		t.Run(fmt.Sprint(tc.data), func(t *testing.T) {
			cfg := testRenderConfig(t, nginxDir(t))
			cfg.ListenAddress, cfg.HTTPSPort = "", 0
			s, _, problems := ParseSettings(tc.data, nil)
			if len(problems) > 0 {
				t.Fatal(problems)
			}
			cfg.Settings = s
			rt := testRuntime(t, cfg, nil)
			m, _ := buildModel(t, []any{service("default", "web", port(80, "http")),
				ingress("default", "web", rule("web.example", prefix("/", "web", 80)))}, nil)
			applyModel(t, rt, m, cfg)
			if err := rt.Client().PushEndpoints(context.Background(), map[UpstreamName][]Endpoint{up("default", "web", 80).Name: {echoBackend(t, "web")}}); err != nil {
				t.Fatal(err)
			}
			resp, err := proxyClient(cfg.HTTPPort, nil).Get("http://web.example/")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("status %d, want 200", resp.StatusCode)
			}
			if got := listeningSockets(t, "/proc/net/tcp", net.IPv4(127, 0, 0, 1), cfg.HTTPPort); got != tc.sockets {
				t.Errorf("%d listening sockets on 127.0.0.1:%d, want %d", got, cfg.HTTPPort, tc.sockets)
			}
			if got := listeningSockets(t, "/proc/net/tcp", net.IPv4zero, cfg.HTTPPort); got != 0 {
				t.Errorf("%d listening sockets on 0.0.0.0:%d, want none (bind-address)", got, cfg.HTTPPort)
			}
		})
	}
}

// listeningSockets counts the sockets in LISTEN state on ip:port in a /proc/net/tcp table.
func listeningSockets(t *testing.T, table string, ip net.IP, port int) int {
	t.Helper()
	data, err := os.ReadFile(table)
	if err != nil {
		t.Fatal(err)
	}
	v4 := ip.To4()
	// /proc/net/tcp writes the address as the 32-bit number in host order (little-endian here).
	want := fmt.Sprintf("%02X%02X%02X%02X:%04X", v4[3], v4[2], v4[1], v4[0], port)
	n := 0
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) > 3 && f[1] == want && f[3] == "0A" {
			n++
		}
	}
	return n
}
