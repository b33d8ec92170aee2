// Command echoserver is a small HTTP/HTTPS backend that answers every request with a
// JSON document naming itself and describing the request (see Response). It is the
// upstream of the local demo, of the integration tests and of the load tests, so it
// does no per-request work beyond encoding that document unless --log-requests is set.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/ingress-reactor/ingress-reactor/internal/websocket"
	"golang.org/x/sync/errgroup"
)

// config holds the parsed command line.
type config struct {
	listen          []string
	name            string
	tlsCert         string
	tlsKey          string
	selfSignedTLS   bool
	logRequests     bool
	shutdownTimeout time.Duration
}

// listFlag is a repeatable flag whose values may also be comma-separated.
type listFlag struct {
	values []string
	set    bool
}

// String implements flag.Value.
func (l *listFlag) String() string { return strings.Join(l.values, ",") }

// Set implements flag.Value; the first explicit use replaces the default.
func (l *listFlag) Set(s string) error {
	if !l.set {
		l.values, l.set = nil, true
	}
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			l.values = append(l.values, v)
		}
	}
	return nil
}

// parseFlags parses args (without the program name) into a config.
func parseFlags(args []string, output io.Writer) (config, error) {
	fs := flag.NewFlagSet("echoserver", flag.ContinueOnError)
	fs.SetOutput(output)
	listen := &listFlag{values: []string{"127.0.0.1:9000"}}
	var cfg config
	fs.Var(listen, "listen", "address to listen on, host:port; repeat or separate with commas for several")
	fs.StringVar(&cfg.name, "name", defaultName(), "name reported in every response and in the X-Echo-Name header")
	fs.StringVar(&cfg.tlsCert, "tls-cert", "", "PEM certificate file; serves HTTPS (needs --tls-key)")
	fs.StringVar(&cfg.tlsKey, "tls-key", "", "PEM private key file for --tls-cert")
	fs.BoolVar(&cfg.selfSignedTLS, "tls", false, "serve HTTPS with a self-signed certificate generated in memory")
	fs.BoolVar(&cfg.logRequests, "log-requests", false, "log every request (slows the server down)")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long to wait for in-flight requests on SIGTERM/SIGINT")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	cfg.listen = listen.values
	if len(cfg.listen) == 0 {
		return config{}, errors.New("--listen: at least one address is required")
	}
	if (cfg.tlsCert == "") != (cfg.tlsKey == "") {
		return config{}, errors.New("--tls-cert and --tls-key must be given together")
	}
	if cfg.tlsCert != "" && cfg.selfSignedTLS {
		return config{}, errors.New("--tls cannot be combined with --tls-cert/--tls-key")
	}
	return cfg, nil
}

// defaultName is the host name, or "echoserver" when it is unknown.
func defaultName() string {
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "echoserver"
}

// tlsConfig returns the server TLS configuration for cfg, or nil for plain HTTP.
func tlsConfig(cfg config) (*tls.Config, error) {
	var cert tls.Certificate
	switch {
	case cfg.tlsCert != "":
		c, err := tls.LoadX509KeyPair(cfg.tlsCert, cfg.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("load TLS key pair %s: %w", cfg.tlsCert, err)
		}
		cert = c
	case cfg.selfSignedTLS:
		hosts := []string{cfg.name}
		for _, l := range cfg.listen {
			if h, _, err := net.SplitHostPort(l); err == nil {
				hosts = append(hosts, h)
			}
		}
		c, err := selfSignedCert(cfg.name, hosts, time.Now())
		if err != nil {
			return nil, fmt.Errorf("self-signed certificate: %w", err)
		}
		cert = c
	default:
		return nil, nil
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
	}, nil
}

// run serves until ctx is cancelled, then shuts down gracefully within
// cfg.shutdownTimeout. ready, if not nil, receives the bound addresses once all
// listeners are open.
func run(ctx context.Context, cfg config, log *zap.Logger, ready func([]net.Addr)) error {
	tlsCfg, err := tlsConfig(cfg)
	if err != nil {
		return err
	}
	h := &echoHandler{name: cfg.name, ws: websocket.Echo("echo " + cfg.name + " ")}
	if cfg.logRequests {
		h.log = log
	}

	listeners := make([]net.Listener, 0, len(cfg.listen))
	closeAll := func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}
	for _, addr := range cfg.listen {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			closeAll()
			return fmt.Errorf("listen on %s: %w", addr, err)
		}
		listeners = append(listeners, l)
	}

	srv := &http.Server{
		Handler:           h,
		TLSConfig:         tlsCfg,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          zap.NewStdLog(log.Named("http")),
	}
	addrs := make([]net.Addr, len(listeners))
	for i, l := range listeners {
		addrs[i] = l.Addr()
		log.Info("listening", zap.String("address", l.Addr().String()), zap.Bool("tls", tlsCfg != nil), zap.String("name", cfg.name))
	}

	var g errgroup.Group
	for _, l := range listeners {
		g.Go(func() error {
			var err error
			if tlsCfg != nil {
				err = srv.ServeTLS(l, "", "") // certificates come from srv.TLSConfig; also enables HTTP/2
			} else {
				err = srv.Serve(l)
			}
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("serve %s: %w", l.Addr(), err)
			}
			return nil
		})
	}
	if ready != nil {
		ready(addrs)
	}

	serveErr := make(chan error, 1)
	go func() { serveErr <- g.Wait() }()
	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done():
	}

	log.Info("shutting down", zap.Duration("timeout", cfg.shutdownTimeout))
	sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("graceful shutdown: %w", err)
	}
	return <-serveErr
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "echoserver:", err)
		os.Exit(2)
	}
	log, err := zap.NewProduction()
	if err != nil {
		fmt.Fprintln(os.Stderr, "echoserver: logger:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, log, nil); err != nil {
		log.Error("echoserver failed", zap.Error(err))
		_ = log.Sync()
		os.Exit(1)
	}
	_ = log.Sync()
}
