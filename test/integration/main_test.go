//go:build integration

// Package integration holds end-to-end tests against a real kube-apiserver and etcd,
// real NGINX and the real ingress-reactor binary. Run them inside the private network
// namespace: `hack/in-netns.sh go test -tags integration ./test/integration/...`
// (make test-integration does).
package integration

import (
	"os"
	"testing"

	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }
