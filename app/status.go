package app

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"go.uber.org/fx"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/leaderelection"

	"github.com/ingress-reactor/ingress-reactor/modules/statusleader"
	"github.com/ingress-reactor/ingress-reactor/status"
)

// serviceAccountNamespaceFile holds the pod's namespace in every pod that mounts a service account token.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// localStatusAddress is what local mode publishes when no address flag is given: NGINX listens there.
const localStatusAddress = "127.0.0.1"

// bindStatusFlags registers the flags of Ingress status and leader election.
func bindStatusFlags(fs *flag.FlagSet, c *Config) {
	fs.BoolVar(&c.UpdateStatus, "update-status", c.UpdateStatus,
		"Publish the addresses this controller serves on in status.loadBalancer.ingress of every Ingress it serves. "+
			"false turns status writing and leader election off.")
	fs.BoolVar(&c.UpdateStatusOnShutdown, "update-status-on-shutdown", c.UpdateStatusOnShutdown,
		"When the last ready replica stops, remove the addresses it published from the Ingresses it served.")
	fs.StringVar(&c.ElectionID, "election-id", c.ElectionID,
		"Name of the coordination.k8s.io Lease in POD_NAMESPACE that replicas use to elect the one that writes Ingress status.")
	fs.BoolVar(&c.DisableLeaderElection, "disable-leader-election", c.DisableLeaderElection,
		"Write Ingress status without electing a leader. Only for a single replica.")
	fs.DurationVar(&c.ElectionLeaseDuration, "election-lease-duration", c.ElectionLeaseDuration,
		"How long an unrenewed Lease keeps other replicas from taking over: the longest Ingress status goes unwritten after the leader dies. At least 1s.")
	fs.DurationVar(&c.ElectionLeaseDuration, "election-ttl", c.ElectionLeaseDuration,
		"Same as --election-lease-duration (ingress-nginx's name).")
	fs.DurationVar(&c.ElectionRenewDeadline, "election-renew-deadline", c.ElectionRenewDeadline,
		"How long the leader keeps failing to renew the Lease before it stops writing status. Shorter than --election-lease-duration.")
	fs.DurationVar(&c.ElectionRetryPeriod, "election-retry-period", c.ElectionRetryPeriod,
		"Pause between attempts to acquire or renew the Lease. --election-renew-deadline must be more than 1.2 times it.")
	fs.StringVar(&c.PublishService, "publish-service", c.PublishService,
		"Service (namespace/name) whose load-balancer addresses, or without any its external IPs, are published in Ingress status. "+
			"Without it and --publish-status-address, the addresses of the nodes running the controller's pods are published.")
	fs.StringVar(&c.PublishStatusAddress, "publish-status-address", c.PublishStatusAddress,
		"Comma-separated IP addresses and DNS names to publish in Ingress status. Takes precedence over --publish-service.")
	fs.Var(&secondsOrDuration{&c.StatusUpdateInterval}, "status-update-interval",
		"How often the leader re-checks the status of every Ingress it serves: a `duration` (90s, 2m) or, as in ingress-nginx, a number of seconds.")
}

// validateStatus reports errors in the status and election flags.
func validateStatus(c *Config) []error {
	var errs []error
	if c.PublishService != "" {
		if _, err := ParseNamespacedName(c.PublishService); err != nil {
			errs = append(errs, fmt.Errorf("--publish-service: %w", err))
		}
	}
	if _, err := status.ParseAddresses(c.PublishStatusAddress); err != nil {
		errs = append(errs, fmt.Errorf("--publish-status-address: %w", err))
	}
	if c.StatusUpdateInterval < time.Second {
		errs = append(errs, fmt.Errorf("--status-update-interval must be at least 1s, got %s", c.StatusUpdateInterval))
	}
	if !c.UpdateStatus || c.DisableLeaderElection {
		return errs
	}
	if c.ElectionID == "" {
		errs = append(errs, errors.New("--election-id must not be empty"))
	} else if msgs := validation.IsDNS1123Subdomain(c.ElectionID); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--election-id %q is not a valid Lease name: %s", c.ElectionID, strings.Join(msgs, "; ")))
	}
	if c.ElectionLeaseDuration < time.Second {
		errs = append(errs, fmt.Errorf("--election-lease-duration must be at least 1s, got %s", c.ElectionLeaseDuration))
	}
	if c.ElectionRenewDeadline <= 0 || c.ElectionRenewDeadline >= c.ElectionLeaseDuration {
		errs = append(errs, fmt.Errorf("--election-renew-deadline (%s) must be positive and shorter than --election-lease-duration (%s)",
			c.ElectionRenewDeadline, c.ElectionLeaseDuration))
	}
	if c.ElectionRetryPeriod <= 0 || float64(c.ElectionRenewDeadline) <= leaderelection.JitterFactor*float64(c.ElectionRetryPeriod) {
		errs = append(errs, fmt.Errorf("--election-retry-period (%s) must be positive and --election-renew-deadline (%s) more than %.1f times it",
			c.ElectionRetryPeriod, c.ElectionRenewDeadline, leaderelection.JitterFactor))
	}
	return errs
}

// statusModules returns the status leader and its options when --update-status is set, nil otherwise.
// The controller's own pod comes from the downward-API variables POD_NAMESPACE and POD_NAME (see
// statusPodFromEnv); in local mode, without an address flag, 127.0.0.1 is published.
func statusModules(cfg Config) []fx.Option {
	if !cfg.UpdateStatus {
		return nil
	}
	addressList := cfg.PublishStatusAddress
	if cfg.LocalManifests != "" && addressList == "" && cfg.PublishService == "" {
		addressList = localStatusAddress
	}
	static, _ := status.ParseAddresses(addressList) // validated by validateStatus
	var publish types.NamespacedName
	if cfg.PublishService != "" {
		publish, _ = ParseNamespacedName(cfg.PublishService) // validated by validateStatus
	}
	pod := statusPodFromEnv()
	return []fx.Option{
		fx.Supply(statusleader.Options{
			Discovery: status.DiscoveryOptions{Static: static, PublishService: publish, Pod: pod, NodeInternalIP: cfg.ReportNodeInternalIP},
			Election: status.ElectionOptions{
				Disabled:      cfg.DisableLeaderElection,
				Namespace:     pod.Namespace,
				Name:          cfg.ElectionID,
				Identity:      electionIdentity(pod.Name),
				LeaseDuration: cfg.ElectionLeaseDuration,
				RenewDeadline: cfg.ElectionRenewDeadline,
				RetryPeriod:   cfg.ElectionRetryPeriod,
			},
			UpdateInterval:   cfg.StatusUpdateInterval,
			UpdateOnShutdown: cfg.UpdateStatusOnShutdown,
		}),
		statusleader.Module,
	}
}

// statusPodFromEnv returns the controller's pod: POD_NAMESPACE and POD_NAME. Without POD_NAMESPACE the
// namespace is that of the mounted service account, and outside a pod "default".
func statusPodFromEnv() types.NamespacedName {
	pod := types.NamespacedName{Namespace: os.Getenv("POD_NAMESPACE"), Name: os.Getenv("POD_NAME")}
	if pod.Namespace == "" {
		if b, err := os.ReadFile(serviceAccountNamespaceFile); err == nil {
			pod.Namespace = strings.TrimSpace(string(b))
		}
	}
	if pod.Namespace == "" {
		pod.Namespace = "default"
	}
	return pod
}

// electionIdentity names this process in the Lease: the pod name (or the host name outside a pod) and a
// random suffix. The suffix keeps two processes apart even when they share a name (a restarted
// container whose predecessor still holds the Lease, or two local runs): with one identity, both would
// believe they lead.
func electionIdentity(podName string) string {
	base := podName
	if base == "" {
		base, _ = os.Hostname()
	}
	if base == "" {
		base = "ingress-reactor"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b) // crypto/rand.Read does not fail on Linux
	return base + "_" + hex.EncodeToString(b)
}

// secondsOrDuration is a duration flag that also takes a plain number of seconds, as ingress-nginx's
// --status-update-interval and --shutdown-grace-period did.
type secondsOrDuration struct{ d *time.Duration }

// String returns the value in Go duration syntax.
func (s *secondsOrDuration) String() string {
	if s == nil || s.d == nil {
		return ""
	}
	return s.d.String()
}

// Set parses "90s", "2m" or "90".
func (s *secondsOrDuration) Set(v string) error {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		*s.d = time.Duration(n) * time.Second
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("want a duration (90s, 2m) or a number of seconds, got %q", v)
	}
	*s.d = d
	return nil
}
