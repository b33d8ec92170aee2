package nginx

import (
	"os"
	"testing"
)

func TestAnnotationsDocIsCurrent(t *testing.T) {
	got, err := os.ReadFile("../docs/annotations.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != AnnotationsMarkdown() {
		t.Fatal("docs/annotations.md differs from the annotation registry; run: go run ./hack/annotationsdoc > docs/annotations.md")
	}
}
