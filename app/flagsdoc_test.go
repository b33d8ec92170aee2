package app

import (
	"os"
	"testing"
)

func TestFlagsDocIsCurrent(t *testing.T) {
	got, err := os.ReadFile("../docs/flags.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != FlagsMarkdown() {
		t.Fatal("docs/flags.md differs from the flag definitions; run: go run ./hack/flagsdoc > docs/flags.md")
	}
}
