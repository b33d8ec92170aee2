//go:build integration

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

// TestTemplateOverrideIsWatched: --template replaces the embedded template, an edit of the file goes live,
// and an edit that does not parse is reported and leaves the running configuration alone.
func TestTemplateOverrideIsWatched(t *testing.T) {
	f := harness.New(t)
	web := f.StartBackend("web", false)
	f.CreateService("web", 80, web.Port)
	f.ServeBackends("web", web)
	f.CreateIngress(f.Ingress("web", "template.example", harness.IngressBackend{Path: "/", Service: "web", Port: 80}))

	dir := t.TempDir()
	path := filepath.Join(dir, "nginx.tmpl")
	write := func(marker string) {
		t.Helper()
		text := "# " + marker + "\n" + nginx.DefaultTemplateText()
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("custom-template-v1")
	r := f.StartReactor("--template=" + path)
	r.WaitReady()
	r.WaitServedBy("template.example", "/", "web")

	conf := func() string {
		data, _ := os.ReadFile(filepath.Join(r.NginxDir, "nginx.conf"))
		return string(data)
	}
	liveWith := func(marker string) func() (bool, string) {
		return func() (bool, string) {
			c := conf()
			if !strings.Contains(c, marker) {
				return false, "nginx.conf without " + marker
			}
			hash, err := r.LiveConfigHash()
			if err != nil || !strings.Contains(c, hash) {
				return false, "nginx.conf not live yet"
			}
			return true, marker + " live"
		}
	}
	r.Eventually(harness.DefaultTimeout, "the custom template's configuration to be live", liveWith("custom-template-v1"))

	write("custom-template-v2")
	r.Eventually(harness.DefaultTimeout, "the edited template's configuration to be live", liveWith("custom-template-v2"))
	r.WaitServedBy("template.example", "/", "web")

	if err := os.WriteFile(path, []byte("{{ .Broken "), 0o644); err != nil {
		t.Fatal(err)
	}
	r.WaitLog("template changed but cannot be used")
	if c := conf(); !strings.Contains(c, "custom-template-v2") {
		t.Fatal("a template that does not parse replaced the running configuration")
	}
	r.WaitServedBy("template.example", "/", "web")
}
