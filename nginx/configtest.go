package nginx

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// Test runs "nginx -t" on confFile with the prefix of paths. The error carries NGINX's message.
func Test(ctx context.Context, binary string, paths Paths, confFile string) error {
	if binary == "" {
		binary = "nginx"
	}
	cmd := exec.CommandContext(ctx, binary, "-t", "-q", "-p", paths.Prefix, "-c", confFile, "-e", "stderr")
	cmd.Dir = paths.Prefix
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("nginx -t: %s", msg)
	}
	return nil
}
