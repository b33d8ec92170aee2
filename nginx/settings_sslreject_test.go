package nginx

import (
	"crypto/tls"
	"fmt"
	"net"
	"testing"
	"time"
)

// TestSSLRejectHandshakeNginx: through real NGINX, with ssl-reject-handshake the handshakes for a name an
// Ingress rule names (exactly or by a wildcard) complete with the default certificate, while those for
// another name or without SNI are refused; without it every handshake completes.
func TestSSLRejectHandshakeNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	rt := testRuntime(t, cfg, nil)
	m, _ := buildModel(t, []any{service("default", "web", port(80, "http")),
		ingress("default", "known", rule("known.example", prefix("/", "web", 80))),
		ingress("default", "wild", rule("*.wild.example", prefix("/", "web", 80))),
		ingress("default", "hostless", rule("", prefix("/", "web", 80))),
	}, nil)
	handshake := func(sni string) error {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", fmt.Sprintf("127.0.0.1:%d", cfg.HTTPSPort),
			&tls.Config{ServerName: sni, InsecureSkipVerify: true}) // the default certificate is self-signed
		if err == nil {
			conn.Close()
		}
		return err
	}
	for _, reject := range []bool{true, false} {
		s, _, problems := ParseSettings(map[string]string{"ssl-reject-handshake": fmt.Sprint(reject)}, nil)
		if len(problems) > 0 {
			t.Fatal(problems)
		}
		cfg.Settings = s
		applyModel(t, rt, m, cfg)
		for sni, served := range map[string]bool{"known.example": true, "a.wild.example": true, "KNOWN.example": true,
			"unknown.example": !reject, "b.a.wild.example": !reject, "": !reject} {
			if err := handshake(sni); (err == nil) != served {
				t.Errorf("ssl-reject-handshake %v: SNI %q: handshake error %v, want completed %v", reject, sni, err, served)
			}
		}
	}
}
