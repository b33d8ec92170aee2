package nginx

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkUnchangedFullCertificatePush measures a full certificate push of 3,000 RSA-2048 certificates
// (two-certificate chains) that the data plane already holds, as the controller sends after a reload
// that emptied no dict, or after a restart of the controller. One NGINX worker handles the push and
// serves nothing else meanwhile.
func BenchmarkUnchangedFullCertificatePush(b *testing.B) {
	requireNginx(b)
	const n = 3000
	cfg := testRenderConfig(b, nginxDir(b))
	cfg.CertificatesDictMB = 16
	rt, err := NewRuntime(RuntimeConfig{Process: ProcessConfig{Paths: cfg.Paths}, StatusPort: cfg.StatusPort, StatusToken: cfg.StatusToken})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rt.Stop(context.Background()) })
	ctx := context.Background()
	conf, hash, err := Render(Model{}, cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := rt.Apply(ctx, conf, hash); err != nil {
		b.Fatal(err)
	}
	c := rsaChainCertificate(b, "shop.example.com") // parsing costs the same for equal certificates
	u := CertificateUpdate{Certificates: map[string]*CertificatePEM{}, Hosts: map[Hostname]string{}}
	for i := range n {
		id := fmt.Sprintf("team-%02d/shop-%05d-tls", i%40, i)
		u.Certificates[id] = c
		u.Hosts[Hostname(fmt.Sprintf("shop-%05d.apps.example.com", i))] = id
	}
	if err := rt.Client().ReplaceCertificates(ctx, u); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := rt.Client().ReplaceCertificates(ctx, u); err != nil {
			b.Fatal(err)
		}
	}
}
