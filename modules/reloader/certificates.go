package reloader

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/ingress-reactor/ingress-reactor/certs"
	"github.com/ingress-reactor/ingress-reactor/internal/sortedmap"
	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/nginx"
)

// defaultCertificateHost is the host entry under which the data plane keeps --default-ssl-certificate.
const defaultCertificateHost nginx.Hostname = "*"

// certState is the certificate lane's desired state: usable certificates by Secret, and which Secret each
// TLS host of the live model presents. Hosts whose Secret is not usable are left out, so they get the
// default certificate.
type certState struct {
	// certs is a sorted table rather than a map: at 10,000 Secrets a map took about 80 bytes per
	// Secret, the table about 40.
	certs *sortedmap.Map[types.NamespacedName, *certs.Certificate]
	// servers are those of the latest model, sorted by host: each with TLS and a Secret presents that
	// Secret. They are the model's own slice, not a copy (a published model is never modified, and the
	// renderer and the route store keep it anyway): a host table of our own took about 90 bytes per TLS
	// host.
	servers       []nginx.Server
	defaultSecret types.NamespacedName

	// hostsFromModel is set once hosts come from an applied configuration.
	hostsFromModel bool

	// staples are the OCSP responses to staple (enable-ocsp), by Secret; each goes out with the
	// certificate it was fetched for (same ContentHash) and with no other.
	staples map[types.NamespacedName]*certs.Staple

	// What the data plane holds since the last successful push: certificate ID -> what its push carried
	// (liveCert.hash), and host -> certificate ID. Sorted lists, made anew by each diff: maps of 10,000
	// entries took twice the room.
	pushedCerts pushedTable[string]
	pushedHosts pushedTable[nginx.Hostname]
	// changed says an input changed since the last push was taken, or that push failed. Without it, an
	// incremental push has nothing to send, and take skips the diff: every model (a change of one
	// route) reaches this store, and the diff builds maps over every TLS host.
	changed bool
}

func newCertState() *certState {
	return &certState{
		certs:   sortedmap.New[types.NamespacedName, *certs.Certificate](compareKeys),
		staples: map[types.NamespacedName]*certs.Staple{},
	}
}

func (s *certState) apply(c modules.CertChange) {
	s.changed = true
	if c.Certificate == nil {
		s.certs.Delete(c.Secret)
	} else {
		s.certs.Set(c.Secret, c.Certificate)
	}
	if c.Default {
		s.defaultSecret = c.Secret
	}
}

// setStaple records the OCSP response of a Secret's certificate; nil: none.
func (s *certState) setStaple(c modules.OCSPChange) {
	s.changed = true
	if c.Staple == nil {
		delete(s.staples, c.Secret)
	} else {
		s.staples[c.Secret] = c.Staple
	}
}

// liveCert is a certificate to serve and the OCSP response to staple with it (nil: none).
type liveCert struct {
	*certs.Certificate
	staple *certs.Staple
}

// hash identifies what a push of the certificate carries.
func (c liveCert) hash() string {
	if c.staple == nil {
		return c.ContentHash
	}
	return c.ContentHash + "+" + c.staple.Hash
}

// compareKeys orders Secrets by namespace, then name.
func compareKeys(a, b types.NamespacedName) int {
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
}

// tlsSecret returns the Secret srv presents, and false when it has none (no TLS, or the default
// certificate).
func tlsSecret(srv *nginx.Server) (types.NamespacedName, bool) {
	if srv.TLS == nil || srv.TLS.Secret.Name == "" {
		return types.NamespacedName{}, false
	}
	return srv.TLS.Secret, true
}

// desired returns the certificate IDs with their certificates, and the host table, that should be live.
func (s *certState) desired() (map[string]liveCert, map[nginx.Hostname]string) {
	cs := map[string]liveCert{}
	hosts := make(map[nginx.Hostname]string, len(s.servers)+1)
	use := func(host nginx.Hostname, secret types.NamespacedName) {
		c, ok := s.certs.Get(secret)
		if !ok {
			return
		}
		id := nginx.CertificateID(secret)
		lc := liveCert{Certificate: c}
		if st := s.staples[secret]; st != nil && st.ContentHash == c.ContentHash {
			lc.staple = st
		}
		cs[id] = lc
		hosts[host] = id
	}
	for i := range s.servers {
		if secret, ok := tlsSecret(&s.servers[i]); ok {
			use(s.servers[i].Host, secret)
		}
	}
	if s.defaultSecret.Name != "" {
		use(defaultCertificateHost, s.defaultSecret)
	}
	return cs, hosts
}

// diff returns the update that turns the pushed state into the desired one; full sends everything.
func (s *certState) diff(full bool) (nginx.CertificateUpdate, pushedTable[string], pushedTable[nginx.Hostname]) {
	cs, hosts := s.desired()
	u := nginx.CertificateUpdate{Certificates: map[string]*nginx.CertificatePEM{}, Hosts: map[nginx.Hostname]string{}}
	nextCerts := make(pushedTable[string], 0, len(cs))
	for id, c := range cs {
		hash := c.hash()
		nextCerts = append(nextCerts, pushedEntry[string]{key: id, val: hash})
		if old, _ := s.pushedCerts.get(id); full || old != hash {
			pem := &nginx.CertificatePEM{Cert: c.ChainPEM, Key: c.KeyPEM()}
			if c.staple != nil {
				pem.OCSP, pem.OCSPExpires = c.staple.Response, c.staple.Expires
			}
			u.Certificates[id] = pem
		}
	}
	nextHosts := make(pushedTable[nginx.Hostname], 0, len(hosts))
	for h, id := range hosts {
		nextHosts = append(nextHosts, pushedEntry[nginx.Hostname]{key: h, val: id})
		if old, _ := s.pushedHosts.get(h); full || old != id {
			u.Hosts[h] = id
		}
	}
	if !full {
		for _, e := range s.pushedHosts {
			if _, ok := hosts[e.key]; !ok {
				u.Hosts[e.key] = "" // removed: the host falls back to the default certificate
			}
		}
		for _, e := range s.pushedCerts {
			if _, ok := cs[e.key]; !ok {
				u.Certificates[e.key] = nil
			}
		}
	}
	return u, nextCerts.sorted(), nextHosts.sorted()
}

// pushedTable is what the data plane holds of one kind (certificates, hosts): values by key, sorted by
// key, unique.
type pushedTable[K ~string] []pushedEntry[K]

type pushedEntry[K ~string] struct {
	key K
	val string
}

// sorted sorts t by key and returns it.
func (t pushedTable[K]) sorted() pushedTable[K] {
	slices.SortFunc(t, func(a, b pushedEntry[K]) int { return strings.Compare(string(a.key), string(b.key)) })
	return t
}

// get returns the value of k, and false when t has none.
func (t pushedTable[K]) get(k K) (string, bool) {
	i, ok := slices.BinarySearchFunc(t, k, func(e pushedEntry[K], k K) int { return strings.Compare(string(e.key), string(k)) })
	if !ok {
		return "", false
	}
	return t[i].val, true
}

// certBatch is one certificate push, with what the data plane holds once it succeeded.
type certBatch struct {
	update    nginx.CertificateUpdate
	nextCerts pushedTable[string]
	nextHosts pushedTable[nginx.Hostname]
}

func (s *certState) take(full bool) (certBatch, bool) {
	if !full && !s.changed {
		return certBatch{}, false // the data plane holds what the inputs make: the last push was stored
	}
	s.changed = false
	u, nextCerts, nextHosts := s.diff(full)
	return certBatch{update: u, nextCerts: nextCerts, nextHosts: nextHosts},
		full || len(u.Certificates) > 0 || len(u.Hosts) > 0
}

func (s *certState) send(ctx context.Context, a Applier, b certBatch, full bool) error {
	return a.SetCertificates(ctx, b.update, full)
}

func (s *certState) names(b certBatch) []string {
	out := make([]string, 0, len(b.update.Certificates)+len(b.update.Hosts))
	for id := range b.update.Certificates {
		out = append(out, id)
	}
	for h := range b.update.Hosts {
		out = append(out, string(h))
	}
	return out
}

// failed lets the next push be computed, against what the data plane last took.
func (s *certState) failed(certBatch) { s.changed = true }

// stored records what the data plane holds now. What did not fit is not sent again before it changes
// or the next full push: sending the same certificates would make NGINX parse each again, to no avail.
func (s *certState) stored(b certBatch, _ *nginx.DictFullError) {
	s.pushedCerts, s.pushedHosts = b.nextCerts, b.nextHosts
}

// complete is true once the host table comes from an applied configuration: the first start reports
// before its configuration is applied, so its full push may carry no hosts yet.
func (s *certState) complete() bool { return s.hostsFromModel }

// useModel makes the SNI host table that of m, the configuration NGINX now runs: every server with TLS
// and a Secret presents that Secret; other hosts use the default certificate. The store keeps m's
// servers, and compares them with the last model's in one walk (both are sorted by host): a model that
// changes no host's Secret allocates nothing and leaves nothing to push.
func (s *certState) useModel(m *nginx.Model) {
	if !sameTLSHosts(s.servers, m.Servers) {
		s.changed = true
	}
	s.servers = m.Servers
	s.hostsFromModel = true
}

// sameTLSHosts reports whether two server lists, sorted by host, present the same Secret on the same
// hosts.
func sameTLSHosts(a, b []nginx.Server) bool {
	if len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0]) {
		return true
	}
	next := func(ss []nginx.Server, i int) int {
		for i < len(ss) {
			if _, ok := tlsSecret(&ss[i]); ok {
				break
			}
			i++
		}
		return i
	}
	i, j := next(a, 0), next(b, 0)
	for i < len(a) && j < len(b) {
		if a[i].Host != b[j].Host || a[i].TLS.Secret != b[j].TLS.Secret {
			return false
		}
		i, j = next(a, i+1), next(b, j+1)
	}
	return i == len(a) && j == len(b)
}
