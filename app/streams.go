package app

import (
	"errors"
	"flag"
	"fmt"

	"go.uber.org/fx"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ingress-reactor/ingress-reactor/modules/streams"
)

// bindStreamsFlags registers the flags of the TCP and UDP services (ingress-nginx's names for the two
// ConfigMaps; the timeouts and limits are ours).
func bindStreamsFlags(fs *flag.FlagSet, c *Config) {
	fs.StringVar(&c.TCPServicesConfigMap, "tcp-services-configmap", c.TCPServicesConfigMap,
		"ConfigMap (namespace/name) of TCP services, as in ingress-nginx: each key is a port to listen on, each value "+
			"<namespace>/<service>:<port>[:PROXY][:PROXY] (the first PROXY expects the PROXY protocol from clients, the second sends it to the Service's endpoints). "+
			"The controller proxies them itself (no NGINX reload when endpoints change); the ConfigMap is watched. See docs/tcp-udp.md.")
	fs.StringVar(&c.UDPServicesConfigMap, "udp-services-configmap", c.UDPServicesConfigMap,
		"ConfigMap (namespace/name) of UDP services, as in ingress-nginx: each key is a port to listen on, each value <namespace>/<service>:<port>. "+
			"Each client address is a flow to one endpoint; see --udp-services-idle-timeout.")
	fs.DurationVar(&c.TCPServicesIdleTimeout, "tcp-services-idle-timeout", c.TCPServicesIdleTimeout,
		"Close a TCP service connection when no byte moved in either direction for this long (noticed within twice the time; ingress-nginx: proxy-stream-timeout, 600s). 0 disables.")
	fs.IntVar(&c.TCPServicesMaxConnections, "tcp-services-max-connections", c.TCPServicesMaxConnections,
		"TCP service connections open at once, over all TCP services; further ones are reset, logged and counted. 0 means no limit.")
	fs.DurationVar(&c.UDPServicesIdleTimeout, "udp-services-idle-timeout", c.UDPServicesIdleTimeout,
		"End a UDP flow (one client address and port, bound to one endpoint) when no datagram moved in either direction for this long (noticed within twice the time).")
	fs.IntVar(&c.UDPServicesMaxFlows, "udp-services-max-flows", c.UDPServicesMaxFlows,
		"UDP flows open at once per UDP service port; datagrams from further clients are dropped and counted until flows end.")
}

// validateStreams reports errors in the TCP/UDP services flags; Config.Validate includes them.
func (c *Config) validateStreams() []error {
	var errs []error
	for name, v := range map[string]string{"--tcp-services-configmap": c.TCPServicesConfigMap, "--udp-services-configmap": c.UDPServicesConfigMap} {
		if v == "" {
			continue
		}
		if _, err := ParseNamespacedName(v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	if c.TCPServicesIdleTimeout < 0 {
		errs = append(errs, errors.New("--tcp-services-idle-timeout must not be negative (0 disables it)"))
	}
	if c.TCPServicesMaxConnections < 0 {
		errs = append(errs, errors.New("--tcp-services-max-connections must not be negative (0 means no limit)"))
	}
	if c.UDPServicesIdleTimeout <= 0 {
		errs = append(errs, errors.New("--udp-services-idle-timeout must be positive"))
	}
	if c.UDPServicesMaxFlows < 1 {
		errs = append(errs, errors.New("--udp-services-max-flows must be at least 1"))
	}
	return errs
}

// reservedPorts maps the ports the controller listens on, or has NGINX listen on, to the flag that sets
// them: TCP and UDP services cannot take them.
func (c *Config) reservedPorts() map[int]string {
	r := map[int]string{
		c.HTTPPort:        "--http-port",
		c.HTTPSPort:       "--https-port",
		c.HealthzPort:     "--healthz-port (health, readiness and metrics)",
		c.NginxStatusPort: "--nginx-status-port",
	}
	if c.EnableSSLPassthrough {
		r[c.SSLPassthroughProxyPort] = "--ssl-passthrough-proxy-port"
	}
	return r
}

// streamsModules returns the TCP/UDP services module and its options when either ConfigMap flag is set.
func streamsModules(cfg Config) []fx.Option {
	if cfg.TCPServicesConfigMap == "" && cfg.UDPServicesConfigMap == "" {
		return nil
	}
	key := func(v string) types.NamespacedName {
		k, _ := ParseNamespacedName(v) // checked by Validate; empty stays empty
		return k
	}
	return []fx.Option{
		fx.Supply(streams.Options{
			TCPConfigMap:      key(cfg.TCPServicesConfigMap),
			UDPConfigMap:      key(cfg.UDPServicesConfigMap),
			Reserved:          cfg.reservedPorts(),
			WatchNamespace:    cfg.WatchNamespace,
			TCPIdleTimeout:    cfg.TCPServicesIdleTimeout,
			TCPMaxConnections: cfg.TCPServicesMaxConnections,
			UDPIdleTimeout:    cfg.UDPServicesIdleTimeout,
			UDPMaxFlows:       cfg.UDPServicesMaxFlows,
			// As for SSL passthrough: open connections get a quarter of the stop budget.
			DrainTimeout: cfg.ShutdownTimeout / 4,
		}),
		streams.Module,
	}
}
