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
	full, fullFor, withHosts := r.certsFull, r.certsFullFor, r.hostsFromModel
	u, nextCerts, nextHosts := r.certs.diff(full)
	r.certsFull = false
	if !full && len(u.Certificates) == 0 && len(u.Hosts) == 0 {
		r.certsComplete(withHosts)
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	err := r.applier.SetCertificates(ctx, u, full)
	partial := dictFull(err)
	if err != nil && partial == nil {
		r.m.certUpdates.WithLabelValues("failure").Inc()
		r.mu.Lock()
		r.certsFull = r.certsFull || full
		r.mu.Unlock()
		return err
	}
	// A full dict is a partial success: what fit is live, and the same push would store the same
	// certificates, parsing each again. It is not retried: what did not fit is sent again when it
	// changes, and with the next full push (a new NGINX start, a reload that emptied the dict).
	sent := make([]string, 0, len(u.Certificates)+len(u.Hosts))
	for id := range u.Certificates {
		sent = append(sent, id)
	}
	for h := range u.Hosts {
		sent = append(sent, string(h))
	}
	r.mu.Lock()
	r.certs.pushedCerts, r.certs.pushedHosts = nextCerts, nextHosts
	if full {
		r.certsFilledFor = max(r.certsFilledFor, fullFor)
	}
	r.certsComplete(withHosts)
	changed := r.certsRoom.pushed(full, sent, partial)
	r.mu.Unlock()
	r.notePush(r.m.certUpdates, r.certsRoom, changed, partial)
	return nil
}

// certsComplete records, after a push (or none needed) whose host table came from an applied model when
// withHosts, that the data plane holds every certificate and host since the last full push. r.mu is held.
func (r *Reloader) certsComplete(withHosts bool) {
	if withHosts {
		r.certsPushedFor = max(r.certsPushedFor, r.certsFilledFor)
	}
}
