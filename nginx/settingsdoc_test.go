package nginx

import (
	"os"
	"testing"
)

func TestSettingsDocIsCurrent(t *testing.T) {
	got, err := os.ReadFile("../docs/configmap.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != SettingsMarkdown() {
		t.Fatal("docs/configmap.md differs from the settings registry; run: go run ./hack/configmapdoc > docs/configmap.md")
	}
}
