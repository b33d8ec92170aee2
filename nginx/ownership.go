package nginx

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// HostOwnership says whether Ingresses of several namespaces may route paths of one host.
type HostOwnership string

const (
	// HostsShared lets every namespace route paths of any host, as ingress-nginx did. A path that takes
	// requests from another namespace's path on the same host is announced to both (see Takeover).
	HostsShared HostOwnership = "shared"
	// HostsByNamespace gives each host to the namespace of the oldest Ingress routing it (creationTimestamp,
	// then namespace, then name: OlderFirst). Other namespaces' rules for the host are left out, and their
	// Ingresses get a Conflict naming the owner.
	HostsByNamespace HostOwnership = "namespace"
)

// ParseHostOwnership checks a --host-ownership value.
func ParseHostOwnership(s string) (HostOwnership, error) {
	switch o := HostOwnership(s); o {
	case HostsShared, HostsByNamespace:
		return o, nil
	}
	return "", fmt.Errorf("host ownership %q: want %q or %q", s, HostsShared, HostsByNamespace)
}

// Takeover is a path of one namespace's Ingress that takes requests a broader path of another
// namespace's older Ingress on the same host served before: B's Prefix /login or Exact / under A's
// Prefix /. It is allowed (HostsShared is ingress-nginx's behaviour) and announced to both sides.
type Takeover struct {
	// Taker routes Path; From routes FromPath, which is a Prefix path covering Path.
	Taker, From types.NamespacedName
	Host        Hostname
	Path        string
	PathType    PathType
	FromPath    string
}

// TakerMessage explains the takeover to the owner of Taker.
func (t Takeover) TakerMessage() string {
	return fmt.Sprintf("path %q (%s) on host %s takes requests that Ingress %s of namespace %s served with its path %q (Prefix)",
		t.Path, t.PathType, hostForMessage(t.Host), t.From, t.From.Namespace, t.FromPath)
}

// FromMessage explains the takeover to the owner of From.
func (t Takeover) FromMessage() string {
	return fmt.Sprintf("requests for path %q (%s) on host %s, which this Ingress's path %q (Prefix) served, now go to Ingress %s of namespace %s",
		t.Path, t.PathType, hostForMessage(t.Host), t.FromPath, t.Taker, t.Taker.Namespace)
}

// pathCovers reports whether Prefix path prefix matches requests for path, element by element as the
// Ingress API defines it ("/foo" covers "/foo" and "/foo/bar", not "/foobar"; a trailing slash is ignored).
func pathCovers(prefix, path string) bool {
	p := strings.TrimSuffix(prefix, "/")
	return p == "" || path == p || strings.HasPrefix(path, p+"/")
}

// hostTakeovers lists the winning paths of a host routed by several namespaces that take requests from
// an older Ingress's broader Prefix path of another namespace. routes are the host's winners.
func hostTakeovers(host Hostname, routes []takeoverRoute) []Takeover {
	var out []Takeover
	for _, x := range routes {
		for _, y := range routes {
			if x.t.Ingress.Namespace == y.t.Ingress.Namespace || y.pathType != PathPrefix || olderFirst(x.t, y.t) <= 0 {
				continue
			}
			if x.path == y.path && x.pathType == PathPrefix || !pathCovers(y.path, x.path) {
				continue
			}
			out = append(out, Takeover{Taker: x.t.Ingress, From: y.t.Ingress, Host: host, Path: x.path, PathType: x.pathType, FromPath: y.path})
		}
	}
	return out
}

// takeoverRoute is a winning route with the translation it came from.
type takeoverRoute struct {
	t        *IngressTranslation
	path     string
	pathType PathType
}
