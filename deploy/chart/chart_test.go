// Package chart holds tests of the Helm chart's files that need no helm binary; the tests that render and
// install it are in test/integration/chart_test.go.
package chart

import (
	"bufio"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeMapsEveryIngressNginxValue: the chart's README has a row for every value of ingress-nginx's
// chart (ingress-nginx-values.txt lists their paths); a row covers the value it names and everything below.
func TestReadmeMapsEveryIngressNginxValue(t *testing.T) {
	readme, err := os.ReadFile("ingress-reactor/README.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\| (same|different default|refused|no effect) \\|")
	var covered []string
	for _, m := range row.FindAllStringSubmatch(string(readme), -1) {
		covered = append(covered, strings.TrimSuffix(m[1], ".*"))
	}
	if len(covered) < 100 {
		t.Fatalf("only %d rows in the README's table", len(covered))
	}
	f, err := os.Open("ingress-nginx-values.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		p := strings.TrimSpace(sc.Text())
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		n++
		found := false
		for _, c := range covered {
			if p == c || strings.HasPrefix(p, c+".") {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("ingress-nginx's value %s has no row in deploy/chart/ingress-reactor/README.md", p)
		}
	}
	if n < 300 {
		t.Fatalf("only %d ingress-nginx values listed", n)
	}
}
