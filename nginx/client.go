package nginx

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Client talks to the internal status server of the running NGINX (127.0.0.1:StatusPort): it pushes
// routes, endpoints and certificates into the Lua shared dicts (no reload) and reads the live config hash.
// The shared dicts survive reloads but not restarts: push everything again after Runtime's OnReady. A
// reload that changes a dict's size empties that dict too; Filled tells.
type Client struct {
	base  string
	token string
	hc    *http.Client
}

// StatusTokenHeader carries RenderConfig.StatusToken on every request to the status server.
const StatusTokenHeader = "X-Ingress-Reactor-Token"

// NewStatusToken returns a fresh random RenderConfig.StatusToken (128 bits, hex).
func NewStatusToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("status token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

func validStatusToken(t string) bool {
	if len(t) < 32 || len(t) > 128 {
		return false
	}
	for _, c := range []byte(t) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// NewClient returns a client for the status server on 127.0.0.1:statusPort that sends token with every
// request (RenderConfig.StatusToken of the configuration NGINX runs).
func NewClient(statusPort int, token string) *Client {
	return &Client{
		base:  "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(statusPort)),
		token: token,
		hc: &http.Client{
			Timeout: 30 * time.Second,
			Transport: &http.Transport{
				Proxy:               nil, // never through an HTTP proxy from the environment
				MaxIdleConnsPerHost: 4,
				IdleConnTimeout:     30 * time.Second,
				DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
			},
		},
	}
}

// CloseIdleConnections closes the client's idle keep-alive connections to the status server. Call it
// before stopping NGINX, whose graceful stop waits for open client connections.
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }

// endpointsRequest is the body of POST /configuration/endpoints.
type endpointsRequest struct {
	Full      bool                            `json:"full"`
	Upstreams map[UpstreamName]endpointsValue `json:"upstreams"`
}

// endpointsValue marshals a nil or empty list as [] (which removes the upstream's endpoints).
type endpointsValue []Endpoint

func (v endpointsValue) MarshalJSON() ([]byte, error) {
	if len(v) == 0 {
		return []byte("[]"), nil
	}
	return json.Marshal([]Endpoint(v))
}

// PushEndpoints replaces the endpoint lists of the given upstreams and leaves the others alone. An
// empty list means "no endpoints" (requests get 503). Addresses must be IP literals. When some lists do
// not fit into the shared dict, the error is a *DictFullError and the others are live.
func (c *Client) PushEndpoints(ctx context.Context, upstreams map[UpstreamName][]Endpoint) error {
	return c.postEndpoints(ctx, upstreams, false)
}

// ReplaceEndpoints makes upstreams the complete set: upstreams not listed lose their endpoints. Use it
// after OnReady (a restarted NGINX starts empty) and for periodic full syncs.
func (c *Client) ReplaceEndpoints(ctx context.Context, upstreams map[UpstreamName][]Endpoint) error {
	return c.postEndpoints(ctx, upstreams, true)
}

func (c *Client) postEndpoints(ctx context.Context, upstreams map[UpstreamName][]Endpoint, full bool) error {
	req := endpointsRequest{Full: full, Upstreams: make(map[UpstreamName]endpointsValue, len(upstreams))}
	for name, eps := range upstreams {
		if !ValidUpstreamName(string(name)) {
			return fmt.Errorf("push endpoints: invalid upstream name %q", name)
		}
		for _, e := range eps {
			if err := e.Validate(); err != nil {
				return fmt.Errorf("push endpoints of %s: %w", name, err)
			}
		}
		req.Upstreams[name] = eps
	}
	if err := c.post(ctx, "/configuration/endpoints", req); err != nil {
		return fmt.Errorf("push endpoints: %w", err)
	}
	return nil
}

// DictFullError is the answer to a push of which some entries did not fit into their shared dict (HTTP
// 507 Insufficient Storage). It is a partial success: everything else in the push is live, and an entry
// that did not fit keeps what it had before, if anything (a host without its certificate gets the
// wildcard or default certificate). Sending the same push again stores the same entries: only a larger
// dict (--endpoints-dict-size, --certificates-dict-size) or fewer entries help.
type DictFullError struct {
	// Dict is "endpoints" or "certificates".
	Dict string
	// NotStored are the upstream names or certificate IDs that did not fit; HostsNotStored the SNI
	// names (certificates only).
	NotStored      []string
	HostsNotStored []Hostname
	// Message is the data plane's explanation, which names the flag to raise.
	Message string
	// Refused are the hosts of a routes push that the data plane refused as well (see
	// RoutesRefusedError).
	Refused map[Hostname]RouteRefusal
}

// RouteRefusal says why the data plane refused a host's routes.
type RouteRefusal struct {
	// Route is the 1-based index of the refused route in the host's entry (Server.Locations), or 0
	// when the entry itself is at fault.
	Route int `json:"route"`
	// Error is the data plane's reason.
	Error string `json:"error"`
}

// RoutesRefusedError is the answer to a routes push of which the data plane refused some hosts' entries
// (HTTP 422). It is a partial success: every other host is live, and a refused host keeps the routes it
// had. Sending the same entries again is refused again; only other routes help.
type RoutesRefusedError struct {
	Refused map[Hostname]RouteRefusal
}

// Error lists the refused hosts.
func (e *RoutesRefusedError) Error() string {
	hosts := slices.Sorted(maps.Keys(e.Refused))
	parts := make([]string, 0, len(hosts))
	for _, h := range hosts {
		parts = append(parts, e.Refused[h].Error)
	}
	return "POST /configuration/routes: 422 Unprocessable Entity: refused " + strings.Join(parts, "; ")
}

// RefusedRoutes returns the hosts that a routes push's answer (its error) says the data plane
// refused, or nil.
func RefusedRoutes(err error) map[Hostname]RouteRefusal {
	var r *RoutesRefusedError
	if errors.As(err, &r) {
		return r.Refused
	}
	var d *DictFullError
	if errors.As(err, &d) {
		return d.Refused
	}
	return nil
}

// Error says which dict is full, with the data plane's explanation.
func (e *DictFullError) Error() string {
	return fmt.Sprintf("POST /configuration/%s: 507 Insufficient Storage: %s", e.Dict, e.Message)
}

// dictFullError reads a 507 answer of the status server, or returns nil for an answer it cannot read.
func dictFullError(path string, body []byte) *DictFullError {
	var a struct {
		Error          string                    `json:"error"`
		NotStored      []string                  `json:"not_stored"`
		HostsNotStored []Hostname                `json:"hosts_not_stored"`
		Refused        map[Hostname]RouteRefusal `json:"refused"`
	}
	if json.Unmarshal(body, &a) != nil || a.Error == "" {
		return nil
	}
	return &DictFullError{Dict: strings.TrimPrefix(path, "/configuration/"), NotStored: a.NotStored, HostsNotStored: a.HostsNotStored,
		Message: a.Error, Refused: a.Refused}
}

// Filled says, for each shared dict, whether a full push has filled it since NGINX created it. A reload
// keeps the dicts, except one whose size changed: NGINX replaces that one with an empty dict, which needs
// a full push. A data plane that does not report it (an older Lua) reads as not filled.
type Filled struct {
	Endpoints    bool
	Certificates bool
	Routes       bool
}

// Filled asks the data plane which shared dicts a full push has filled; the answer costs the data
// plane nothing, whatever the dicts hold.
func (c *Client) Filled(ctx context.Context) (Filled, error) {
	var f Filled
	for _, d := range []struct {
		path string
		to   *bool
	}{{"/configuration/endpoints", &f.Endpoints}, {"/configuration/certificates", &f.Certificates}, {"/configuration/routes", &f.Routes}} {
		var out struct {
			Filled bool `json:"filled"`
		}
		if err := c.getJSON(ctx, d.path+"?only=filled", &out); err != nil {
			return Filled{}, fmt.Errorf("read whether %s is filled: %w", d.path, err)
		}
		*d.to = out.Filled
	}
	return f, nil
}

// Endpoints returns what the data plane currently holds.
func (c *Client) Endpoints(ctx context.Context) (map[UpstreamName][]Endpoint, error) {
	var out struct {
		Upstreams map[UpstreamName][]Endpoint `json:"upstreams"`
	}
	if err := c.getJSON(ctx, "/configuration/endpoints", &out); err != nil {
		return nil, fmt.Errorf("read endpoints: %w", err)
	}
	if out.Upstreams == nil {
		out.Upstreams = map[UpstreamName][]Endpoint{}
	}
	return out.Upstreams, nil
}

// RouteUpdate changes the routes the Lua router serves.
type RouteUpdate struct {
	// Hosts maps a server's host ("" for the catch-all) to its encoded routes (AppendRouteHostJSON). In
	// PushRoutes a nil value removes the host: its requests go to the wildcard or catch-all server.
	Hosts map[Hostname][]byte
	// DefaultUpstream, when not nil, sets the upstream of requests that no route matches (empty: the
	// built-in 404). ReplaceRoutes treats nil as empty.
	DefaultUpstream *UpstreamName
}

// PushRoutes changes the listed hosts and leaves the others alone. When some do not fit into the shared
// dict, the error is a *DictFullError (NotStored names the hosts) and the others are live.
func (c *Client) PushRoutes(ctx context.Context, u RouteUpdate) error {
	return c.postRoutes(ctx, u, false)
}

// ReplaceRoutes makes u the complete route table.
func (c *Client) ReplaceRoutes(ctx context.Context, u RouteUpdate) error {
	return c.postRoutes(ctx, u, true)
}

func (c *Client) postRoutes(ctx context.Context, u RouteUpdate, full bool) error {
	// The body is written by hand: the host entries are JSON already, and a full push at 10,000 hosts
	// should not encode them twice.
	size := 64
	for h, e := range u.Hosts {
		size += len(h) + len(e) + 8
	}
	b := make([]byte, 0, size)
	b = append(b, `{"full":`...)
	b = strconv.AppendBool(b, full)
	if u.DefaultUpstream != nil || full {
		b = append(b, `,"default_upstream":`...)
		var d UpstreamName
		if u.DefaultUpstream != nil {
			d = *u.DefaultUpstream
		}
		b = appendJSONString(b, string(d))
	}
	b = append(b, `,"hosts":{`...)
	first := true
	for h, e := range u.Hosts {
		if e == nil && full {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendJSONString(b, string(h))
		b = append(b, ':')
		if e == nil {
			b = append(b, "null"...)
		} else {
			b = append(b, e...)
		}
	}
	b = append(b, "}}"...)
	if err := c.post(ctx, "/configuration/routes", json.RawMessage(b)); err != nil {
		return fmt.Errorf("push routes: %w", err)
	}
	return nil
}

// Routes returns the route table the data plane holds, and its default upstream.
func (c *Client) Routes(ctx context.Context) (map[Hostname]RouteHost, UpstreamName, error) {
	var out struct {
		Hosts           map[Hostname]RouteHost `json:"hosts"`
		DefaultUpstream UpstreamName           `json:"default_upstream"`
	}
	if err := c.getJSON(ctx, "/configuration/routes", &out); err != nil {
		return nil, "", fmt.Errorf("read routes: %w", err)
	}
	if out.Hosts == nil {
		out.Hosts = map[Hostname]RouteHost{}
	}
	return out.Hosts, out.DefaultUpstream, nil
}

// CertificatePEM is a certificate chain and its private key, PEM encoded.
type CertificatePEM struct {
	Cert []byte
	Key  []byte
	// OCSP is the DER OCSP response to staple (enable-ocsp), checked for this chain; nil: none.
	// OCSPExpires is when the data plane stops stapling it.
	OCSP        []byte
	OCSPExpires time.Time
}

// CertificateID names a certificate in the data plane: the Secret's "namespace/name".
func CertificateID(secret types.NamespacedName) string { return secret.Namespace + "/" + secret.Name }

// CertificateUpdate changes the certificates served per SNI name.
type CertificateUpdate struct {
	// Certificates by CertificateID. In PushCertificates a nil value removes the certificate.
	Certificates map[string]*CertificatePEM
	// Hosts maps SNI names (exact or "*." wildcard, as in Model.TLSHosts) to certificate IDs. In
	// PushCertificates an empty ID removes the host, which then gets the default certificate.
	Hosts map[Hostname]string
}

// PushCertificates changes the listed certificates and hosts and leaves the others alone. The data
// plane rejects certificates or keys it cannot parse, and hosts that name an unknown certificate. When
// some do not fit into the shared dict, the error is a *DictFullError and the others are live.
func (c *Client) PushCertificates(ctx context.Context, u CertificateUpdate) error {
	return c.postCertificates(ctx, u, false)
}

// ReplaceCertificates makes u the complete set of certificates and hosts.
func (c *Client) ReplaceCertificates(ctx context.Context, u CertificateUpdate) error {
	return c.postCertificates(ctx, u, true)
}

func (c *Client) postCertificates(ctx context.Context, u CertificateUpdate, full bool) error {
	if err := c.post(ctx, "/configuration/certificates", json.RawMessage(appendCertificatesJSON(nil, u, full))); err != nil {
		return fmt.Errorf("push certificates: %w", err)
	}
	return nil
}

// appendCertificatesJSON writes the body of POST /configuration/certificates: {"full":..,
// "certificates":{id:{"cert","key"[,"ocsp","ocsp_expires"]} or null},"hosts":{host:id or null}}, keys in
// order. It is written by hand into a buffer sized up front: a full push carries every certificate and
// key (12 MB at 10,000), and encoding/json would build it in a buffer that it then copies and keeps in
// its pool. In a full push, removals (nil, "") are left out.
func appendCertificatesJSON(b []byte, u CertificateUpdate, full bool) []byte {
	size := 64
	ids := make([]string, 0, len(u.Certificates))
	for id, pem := range u.Certificates {
		if pem == nil && full {
			continue
		}
		ids = append(ids, id)
		size += len(id) + 48
		if pem != nil {
			// PEM is ASCII; each newline takes two bytes escaped.
			size += len(pem.Cert) + len(pem.Key) + bytes.Count(pem.Cert, []byte("\n")) + bytes.Count(pem.Key, []byte("\n")) + base64.StdEncoding.EncodedLen(len(pem.OCSP)) + 40
		}
	}
	hosts := make([]Hostname, 0, len(u.Hosts))
	for h, id := range u.Hosts {
		if id == "" && full {
			continue
		}
		hosts = append(hosts, h)
		size += len(h) + len(id) + 8
	}
	slices.Sort(ids)
	slices.Sort(hosts)
	b = slices.Grow(b, size)
	b = append(b, `{"full":`...)
	b = strconv.AppendBool(b, full)
	b = append(b, `,"certificates":{`...)
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, id)
		b = append(b, ':')
		pem := u.Certificates[id]
		if pem == nil {
			b = append(b, "null"...)
			continue
		}
		b = append(b, `{"cert":`...)
		b = appendJSONString(b, pem.Cert)
		b = append(b, `,"key":`...)
		b = appendJSONString(b, pem.Key)
		if len(pem.OCSP) > 0 {
			b = append(b, `,"ocsp":"`...)
			b = base64.StdEncoding.AppendEncode(b, pem.OCSP)
			b = append(b, `","ocsp_expires":`...)
			b = strconv.AppendInt(b, pem.OCSPExpires.Unix(), 10)
		}
		b = append(b, '}')
	}
	b = append(b, `},"hosts":{`...)
	for i, h := range hosts {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, string(h))
		b = append(b, ':')
		if id := u.Hosts[h]; id == "" {
			b = append(b, "null"...)
		} else {
			b = appendJSONString(b, id)
		}
	}
	return append(b, "}}"...)
}

// CertificateHosts returns the SNI host table the data plane holds (host -> certificate ID).
func (c *Client) CertificateHosts(ctx context.Context) (map[Hostname]string, error) {
	var out struct {
		Hosts map[Hostname]string `json:"hosts"`
	}
	if err := c.getJSON(ctx, "/configuration/certificates", &out); err != nil {
		return nil, fmt.Errorf("read certificates: %w", err)
	}
	if out.Hosts == nil {
		out.Hosts = map[Hostname]string{}
	}
	return out.Hosts, nil
}

// StapledCertificates returns the IDs of the certificates whose OCSP response the data plane staples.
func (c *Client) StapledCertificates(ctx context.Context) (map[string]bool, error) {
	var out struct {
		Stapled map[string]bool `json:"stapled"`
	}
	if err := c.getJSON(ctx, "/configuration/certificates", &out); err != nil {
		return nil, fmt.Errorf("read certificates: %w", err)
	}
	return out.Stapled, nil
}

// ConfigHash returns the hash of the configuration the running NGINX workers serve.
// Each call uses a new connection: a kept-alive one may still belong to a worker of the previous
// configuration, which keeps answering the old hash until it exits.
func (c *Client) ConfigHash(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/configuration/hash", nil)
	if err != nil {
		return "", err
	}
	req.Close = true
	req.Header.Set(StatusTokenHeader, c.token)
	body, err := c.do(req)
	if err != nil {
		return "", fmt.Errorf("read config hash: %w", err)
	}
	return strings.TrimSpace(string(body)), nil
}

// Healthz returns nil when NGINX answers on the status server.
func (c *Client) Healthz(ctx context.Context) error {
	if _, err := c.get(ctx, "/healthz"); err != nil {
		return fmt.Errorf("nginx health: %w", err)
	}
	return nil
}

// post sends body as JSON; a json.RawMessage is sent as it is.
func (c *Client) post(ctx context.Context, path string, body any) error {
	data, ok := body.(json.RawMessage)
	if !ok {
		var err error
		if data, err = json.Marshal(body); err != nil {
			return err
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(StatusTokenHeader, c.token)
	_, err = c.do(req)
	return err
}

func (c *Client) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set(StatusTokenHeader, c.token)
	return c.do(req)
}

func (c *Client) getJSON(ctx context.Context, path string, out any) error {
	body, err := c.get(ctx, path)
	if err != nil {
		return err
	}
	return json.Unmarshal(body, out)
}

// maxAnswerBytes bounds an answer of the status server.
const maxAnswerBytes = 64 << 20

func (c *Client) do(req *http.Request) ([]byte, error) {
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read response: %w", err)
	}
	if len(body) > maxAnswerBytes {
		// Never a cut answer: a request metrics dump missing its end would look like evicted values,
		// counted again when they are read whole.
		return nil, fmt.Errorf("read response: larger than %d MB", maxAnswerBytes>>20)
	}
	if resp.StatusCode == http.StatusInsufficientStorage && req.Method == http.MethodPost {
		if e := dictFullError(req.URL.Path, body); e != nil {
			return nil, e
		}
	}
	if resp.StatusCode == http.StatusUnprocessableEntity && req.Method == http.MethodPost {
		var a struct {
			Refused map[Hostname]RouteRefusal `json:"refused"`
		}
		if json.Unmarshal(body, &a) == nil && len(a.Refused) > 0 {
			return nil, &RoutesRefusedError{Refused: a.Refused}
		}
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return nil, fmt.Errorf("%s %s: %s: %s", req.Method, req.URL.Path, resp.Status, e.Error)
		}
		return nil, fmt.Errorf("%s %s: %s", req.Method, req.URL.Path, resp.Status)
	}
	return body, nil
}
