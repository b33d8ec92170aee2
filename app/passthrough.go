package app

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"strconv"

	"go.uber.org/fx"

	"github.com/ingress-reactor/ingress-reactor/modules/passthrough"
	"github.com/ingress-reactor/ingress-reactor/nginx"
)

// bindPassthroughFlags registers the flags of the optional SSL passthrough proxy.
func bindPassthroughFlags(fs *flag.FlagSet, c *Config) {
	fs.BoolVar(&c.EnableSSLPassthrough, "enable-ssl-passthrough", c.EnableSSLPassthrough,
		"Run a TCP proxy on --https-port that passes TLS connections for hosts of Ingresses annotated "+
			passthrough.AnnotationSSLPassthrough+"=true to their backends undecrypted (routed by SNI); all other TLS goes to NGINX, "+
			"whose TLS listener moves to 127.0.0.1:--ssl-passthrough-proxy-port with the PROXY protocol.")
	fs.IntVar(&c.SSLPassthroughProxyPort, "ssl-passthrough-proxy-port", c.SSLPassthroughProxyPort,
		"Loopback port of NGINX's TLS listener behind the SSL passthrough proxy (with --enable-ssl-passthrough).")
	fs.DurationVar(&c.PassthroughHelloTimeout, "passthrough-hello-timeout", c.PassthroughHelloTimeout,
		"How long the SSL passthrough proxy waits for a connection's TLS ClientHello (and PROXY header) before handing what arrived to NGINX, or closing a connection that sent nothing.")
	fs.IntVar(&c.PassthroughMaxConnections, "passthrough-max-connections", c.PassthroughMaxConnections,
		"Connections the SSL passthrough proxy holds open at once (passed through and to NGINX); further ones are closed at once, logged and counted. 0 means no limit.")
	fs.DurationVar(&c.PassthroughIdleTimeout, "passthrough-idle-timeout", c.PassthroughIdleTimeout,
		"Close a connection through the SSL passthrough proxy when no byte moved in either direction for this long (noticed within twice the time). 0 disables.")
	fs.BoolVar(&c.UseProxyProtocol, "use-proxy-protocol", c.UseProxyProtocol,
		"Expect a PROXY protocol (v1 or v2) header from a load balancer on every connection to --https-port, and pass its client address on "+
			"to NGINX and to backends. Needs --enable-ssl-passthrough; NGINX's HTTP port is not affected (the ConfigMap's use-proxy-protocol is).")
}

// validatePassthrough reports errors in the SSL passthrough flags; Config.Validate includes them.
func (c *Config) validatePassthrough() []error {
	var errs []error
	if c.UseProxyProtocol && !c.EnableSSLPassthrough {
		errs = append(errs, errors.New("--use-proxy-protocol needs --enable-ssl-passthrough (only the passthrough proxy accepts the PROXY protocol)"))
	}
	if !c.EnableSSLPassthrough {
		return errs
	}
	p := c.SSLPassthroughProxyPort
	switch {
	case p < 1 || p > 65535:
		errs = append(errs, fmt.Errorf("--ssl-passthrough-proxy-port must be between 1 and 65535, got %d", p))
	case p == c.HTTPSPort || p == c.HTTPPort || p == c.NginxStatusPort || p == c.HealthzPort:
		errs = append(errs, fmt.Errorf("--ssl-passthrough-proxy-port %d is already used by another port flag", p))
	}
	if c.PassthroughHelloTimeout <= 0 {
		errs = append(errs, errors.New("--passthrough-hello-timeout must be positive"))
	}
	if c.PassthroughIdleTimeout < 0 {
		errs = append(errs, errors.New("--passthrough-idle-timeout must not be negative (0 disables it)"))
	}
	if c.PassthroughMaxConnections < 0 {
		errs = append(errs, errors.New("--passthrough-max-connections must not be negative (0 means no limit)"))
	}
	return errs
}

// passthroughModules returns the SSL passthrough module and its options when --enable-ssl-passthrough is
// set, nil otherwise. The proxy takes over --https-port on every address; NGINX's TLS listener must move to
// 127.0.0.1:--ssl-passthrough-proxy-port with the PROXY protocol (see passthroughRender).
func passthroughModules(cfg Config) []fx.Option {
	if !cfg.EnableSSLPassthrough {
		return nil
	}
	return []fx.Option{
		fx.Supply(passthrough.Options{
			ListenAddress:       ":" + strconv.Itoa(cfg.HTTPSPort),
			NginxAddress:        net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.SSLPassthroughProxyPort)),
			HelloTimeout:        cfg.PassthroughHelloTimeout,
			IdleTimeout:         cfg.PassthroughIdleTimeout,
			MaxConnections:      cfg.PassthroughMaxConnections,
			AcceptProxyProtocol: cfg.UseProxyProtocol,
			// Open connections get a quarter of the stop budget; NGINX's own graceful stop comes after.
			DrainTimeout: cfg.ShutdownTimeout / 4,
		}),
		passthrough.Module,
	}
}

// passthroughRender moves NGINX's TLS listener behind the SSL passthrough proxy when
// --enable-ssl-passthrough is set: to 127.0.0.1:--ssl-passthrough-proxy-port, expecting the PROXY protocol
// (so NGINX still logs and forwards the real client address). HTTP-to-HTTPS redirects keep naming the
// public --https-port.
func passthroughRender(cfg Config, r *nginx.RenderConfig) {
	if !cfg.EnableSSLPassthrough {
		return
	}
	if r.RedirectHTTPSPort == 0 {
		r.RedirectHTTPSPort = cfg.HTTPSPort
	}
	r.HTTPSPort = cfg.SSLPassthroughProxyPort
	r.HTTPSListenAddress = "127.0.0.1"
	r.HTTPSProxyProtocol = true
}
