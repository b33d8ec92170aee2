package nginx

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
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
		msg := cleanNginxOutput(out.String())
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("nginx -t: %s", msg)
	}
	return nil
}

// nginxLogPrefix matches the timestamp and pid#tid of an NGINX log line.
var nginxLogPrefix = regexp.MustCompile(`^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d (\[\w+\]) \d+#\d+: (\*\d+ )?`)

// cleanNginxOutput keeps NGINX's messages without timestamps and process ids, and drops the
// "test failed" summary and repeated lines, so that they read well in an Event.
func cleanNginxOutput(out string) string {
	var lines []string
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "nginx: configuration file") {
			continue
		}
		line = nginxLogPrefix.ReplaceAllString(line, "$1 ")
		if !slices.Contains(lines, line) {
			lines = append(lines, line)
		}
	}
	return strings.Join(lines, "; ")
}
