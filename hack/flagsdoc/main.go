// Command flagsdoc prints docs/flags.md from the controller's flag definitions.
package main

import (
	"fmt"

	"github.com/ingress-reactor/ingress-reactor/app"
)

func main() { fmt.Print(app.FlagsMarkdown()) }
