package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// certificate is the webhook's serving certificate, read again when its files change: cert-manager and
// Secret volumes replace them in place (a Secret volume swaps its "..data" link), and the next TLS
// handshake presents the new one. A change that does not load keeps the previous certificate.
type certificate struct {
	certFile, keyFile string
	current           atomic.Pointer[tls.Certificate]
	log               *zap.Logger
	reloads           *prometheus.CounterVec
}

// loadCertificate reads the key pair once; an error names the flags.
func loadCertificate(certFile, keyFile string, log *zap.Logger, reloads *prometheus.CounterVec) (*certificate, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("admission webhook: --validating-webhook-certificate and --validating-webhook-key are required")
	}
	c := &certificate{certFile: certFile, keyFile: keyFile, log: log, reloads: reloads}
	if err := c.load(); err != nil {
		return nil, fmt.Errorf("admission webhook: --validating-webhook-certificate / --validating-webhook-key: %w", err)
	}
	return c, nil
}

func (c *certificate) load() error {
	pair, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return err
	}
	c.current.Store(&pair)
	return nil
}

// get is tls.Config.GetCertificate.
func (c *certificate) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return c.current.Load(), nil
}

// watch reads the files again whenever something changes in their directories, until ctx ends.
func (c *certificate) watch(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("admission webhook: watch certificate: %w", err)
	}
	dirs := map[string]struct{}{filepath.Dir(c.certFile): {}, filepath.Dir(c.keyFile): {}}
	for d := range dirs {
		if err := w.Add(d); err != nil {
			return errors.Join(fmt.Errorf("admission webhook: watch certificate directory %s: %w", d, err), w.Close())
		}
	}
	go func() {
		defer func() { _ = w.Close() }()
		for {
			select {
			case <-ctx.Done():
				return
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				c.log.Error("certificate watch error", zap.Error(err))
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if ev.Has(fsnotify.Chmod) && !ev.Has(fsnotify.Write) {
					continue
				}
				c.reload()
			}
		}
	}()
	return nil
}

// reload reads the files again; a pair that does not load (a half-written file, a key that does not
// match) is logged, and the previous certificate stays in use.
func (c *certificate) reload() {
	before := c.current.Load()
	if err := c.load(); err != nil {
		c.reloads.WithLabelValues("failure").Inc()
		c.log.Warn("certificate files changed but do not load; keeping the previous certificate", zap.Error(err))
		return
	}
	if now := c.current.Load(); before != nil && len(now.Certificate) > 0 && len(before.Certificate) > 0 &&
		string(now.Certificate[0]) == string(before.Certificate[0]) {
		return // the same certificate: another file of the directory changed
	}
	c.reloads.WithLabelValues("success").Inc()
	c.log.Info("certificate reloaded", zap.String("file", c.certFile))
}
