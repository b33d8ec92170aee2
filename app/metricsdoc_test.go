package app

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestMetricsDocListsEveryMetric keeps docs/metrics.md true: every metric the code defines is documented.
func TestMetricsDocListsEveryMetric(t *testing.T) {
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	// Metrics are defined with Opts (Name: "...") or, for collectors built at scrape time, with NewDesc.
	name := regexp.MustCompile(`(?:Name:|NewDesc\()\s*"(ingress_reactor_[a-z0-9_]+)"`)
	found := 0
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".cache" || d.Name() == ".git" || d.Name() == "test") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range name.FindAllSubmatch(src, -1) {
			found++
			if !strings.Contains(string(doc), "`"+string(m[1])+"`") {
				t.Errorf("%s defines %s, which docs/metrics.md does not list", path, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found < 20 {
		t.Fatalf("found only %d metric definitions; the pattern no longer matches the code", found)
	}
}
