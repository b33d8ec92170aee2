package reloader

import (
	"context"
	"maps"

	"k8s.io/apimachinery/pkg/types"

	"github.com/ingress-reactor/ingress-reactor/certs"
	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/nginx"
)

// defaultCertificateHost is the host entry under which the data plane keeps --default-ssl-certificate.
const defaultCertificateHost nginx.Hostname = "*"

// certState is the certificate lane's desired state: usable certificates by Secret, and which Secret each
// TLS host of the live model presents. Hosts whose Secret is not usable are left out, so they get the
// default certificate.
type certState struct {
	certs         map[types.NamespacedName]*certs.Certificate
	hosts         map[nginx.Hostname]types.NamespacedName
	defaultSecret types.NamespacedName

	// What the data plane holds since the last successful push.
	pushedCerts map[string]string // id -> content hash
	pushedHosts map[nginx.Hostname]string
}

func newCertState() *certState {
	return &certState{
		certs:       map[types.NamespacedName]*certs.Certificate{},
		hosts:       map[nginx.Hostname]types.NamespacedName{},
		pushedCerts: map[string]string{},
		pushedHosts: map[nginx.Hostname]string{},
	}
}

func (s *certState) apply(c modules.CertChange) {
	if c.Certificate == nil {
		delete(s.certs, c.Secret)
	} else {
		s.certs[c.Secret] = c.Certificate
	}
	if c.Default {
		s.defaultSecret = c.Secret
	}
}

// desired returns the certificate IDs with their certificates, and the host table, that should be live.
func (s *certState) desired() (map[string]*certs.Certificate, map[nginx.Hostname]string) {
	cs := map[string]*certs.Certificate{}
	hosts := map[nginx.Hostname]string{}
	use := func(host nginx.Hostname, secret types.NamespacedName) {
		c, ok := s.certs[secret]
		if !ok {
			return
		}
		id := nginx.CertificateID(secret)
		cs[id] = c
		hosts[host] = id
	}
	for h, secret := range s.hosts {
		use(h, secret)
	}
	if s.defaultSecret.Name != "" {
		use(defaultCertificateHost, s.defaultSecret)
	}
	return cs, hosts
}

// diff returns the update that turns the pushed state into the desired one; full sends everything.
func (s *certState) diff(full bool) (nginx.CertificateUpdate, map[string]string, map[nginx.Hostname]string) {
	cs, hosts := s.desired()
	u := nginx.CertificateUpdate{Certificates: map[string]*nginx.CertificatePEM{}, Hosts: map[nginx.Hostname]string{}}
	nextCerts := make(map[string]string, len(cs))
	for id, c := range cs {
		nextCerts[id] = c.ContentHash
		if full || s.pushedCerts[id] != c.ContentHash {
			u.Certificates[id] = &nginx.CertificatePEM{Cert: c.ChainPEM, Key: c.KeyPEM()}
		}
	}
	for h, id := range hosts {
		if full || s.pushedHosts[h] != id {
			u.Hosts[h] = id
		}
	}
	if !full {
		for h := range s.pushedHosts {
			if _, ok := hosts[h]; !ok {
				u.Hosts[h] = "" // removed: the host falls back to the default certificate
			}
		}
		for id := range s.pushedCerts {
			if _, ok := cs[id]; !ok {
				u.Certificates[id] = nil
			}
		}
	}
	return u, nextCerts, maps.Clone(hosts)
}

type certKey struct{}

// pushCertificates is the certificate lane's sync: one batched push of what changed, or of everything
// after a fresh start.
func (r *Reloader) pushCertificates(ctx context.Context, _ certKey) error {
	r.mu.Lock()
	if !r.certsFresh {
		r.mu.Unlock()
		return nil
	}
	full, fullFor := r.certsFull, r.certsFullFor
	u, nextCerts, nextHosts := r.certs.diff(full)
	r.certsFull = false
	r.mu.Unlock()
	if !full && len(u.Certificates) == 0 && len(u.Hosts) == 0 {
		return nil
	}
	if err := r.applier.SetCertificates(ctx, u, full); err != nil {
		r.m.certUpdates.WithLabelValues("failure").Inc()
		r.mu.Lock()
		r.certsFull = r.certsFull || full
		r.mu.Unlock()
		return err
	}
	r.m.certUpdates.WithLabelValues("success").Inc()
	r.mu.Lock()
	r.certs.pushedCerts, r.certs.pushedHosts = nextCerts, nextHosts
	if full {
		r.certsPushedFor = max(r.certsPushedFor, fullFor)
	}
	r.mu.Unlock()
	return nil
}
