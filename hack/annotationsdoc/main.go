// Command annotationsdoc prints docs/annotations.md from the annotation registry.
package main

import (
	"fmt"

	"github.com/ingress-reactor/ingress-reactor/nginx"
)

func main() { fmt.Print(nginx.AnnotationsMarkdown()) }
