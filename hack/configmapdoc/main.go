// Command configmapdoc prints docs/configmap.md from the settings registry.
package main

import (
	"fmt"

	"github.com/ingress-reactor/ingress-reactor/nginx"
)

func main() { fmt.Print(nginx.SettingsMarkdown()) }
