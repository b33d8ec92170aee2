//go:build integration

package harness

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Request is a request sent to NGINX on 127.0.0.1, with the Host header and TLS server
// name chosen independently of the address dialled.
type Request struct {
	// HTTPS sends the request over TLS to the HTTPS port.
	HTTPS bool
	// Method defaults to GET.
	Method string
	// Host is the Host header.
	Host string
	// SNI is the TLS server name; it defaults to Host without a port. NoSNI sends none.
	SNI   string
	NoSNI bool
	// Path is the request target (path and query); "/" when empty.
	Path string
	// Header holds extra request headers.
	Header http.Header
	// Body is sent as the request body when not nil.
	Body []byte
	// ClientCertificate is offered when the server asks for a client certificate (HTTPS only).
	ClientCertificate *tls.Certificate
}

// Response is what came back. Redirects are not followed.
type Response struct {
	// Status is the HTTP status code.
	Status int
	// Header holds the response headers.
	Header http.Header
	// Body is the full response body.
	Body []byte
	// PeerCertificates is the certificate chain the server presented (HTTPS only);
	// PeerCertificates[0] is the leaf.
	PeerCertificates []*x509.Certificate
	// Echo is the decoded body when an echoserver answered, else nil.
	Echo *EchoResponse
}

// EchoResponse is the JSON document an echoserver answers with (cmd/echoserver's
// Response).
type EchoResponse struct {
	Name       string              `json:"name"`
	Listen     string              `json:"listen"`
	Method     string              `json:"method"`
	Proto      string              `json:"proto"`
	Host       string              `json:"host"`
	URI        string              `json:"uri"`
	Path       string              `json:"path"`
	RawQuery   string              `json:"rawQuery"`
	Headers    map[string][]string `json:"headers"`
	RemoteAddr string              `json:"remoteAddr"`
	TLS        bool                `json:"tls"`
	SNI        string              `json:"sni"`
}

// String summarises the response for failure messages.
func (r *Response) String() string {
	if r == nil {
		return "no response"
	}
	s := fmt.Sprintf("status %d", r.Status)
	if r.Echo != nil {
		s += fmt.Sprintf(" from backend %q (%s %s host %q)", r.Echo.Name, r.Echo.Method, r.Echo.URI, r.Echo.Host)
	} else {
		body := string(r.Body)
		if len(body) > 200 {
			body = body[:200] + "..."
		}
		s += fmt.Sprintf(" body %q", body)
	}
	if len(r.PeerCertificates) > 0 {
		leaf := r.PeerCertificates[0]
		s += fmt.Sprintf(" cert CN=%q SANs=%v", leaf.Subject.CommonName, leaf.DNSNames)
	}
	return s
}

// Do sends req to NGINX's HTTP or HTTPS port of this reactor.
func (r *Reactor) Do(req Request) (*Response, error) {
	port := r.HTTPPort
	if req.HTTPS {
		port = r.HTTPSPort
	}
	return DoRequest(port, req)
}

// Get sends GET path with Host host to the HTTP port.
func (r *Reactor) Get(host, path string) (*Response, error) {
	return r.Do(Request{Host: host, Path: path})
}

// GetHTTPS sends GET path with Host and SNI host to the HTTPS port.
func (r *Reactor) GetHTTPS(host, path string) (*Response, error) {
	return r.Do(Request{HTTPS: true, Host: host, Path: path})
}

// DoRequest sends req to 127.0.0.1:port; see DoRequestTo.
func DoRequest(port int, req Request) (*Response, error) {
	return DoRequestTo(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), req)
}

// DoRequestTo sends req to addr (host:port) on a fresh connection (no keep-alive, so
// every request does its own TLS handshake with its own SNI). Certificates are not
// verified; the served chain is returned for the test to check.
func DoRequestTo(addr string, req Request) (*Response, error) {
	scheme := "http"
	if req.HTTPS {
		scheme = "https"
	}
	path := req.Path
	if path == "" {
		path = "/"
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if req.Body != nil {
		body = bytes.NewReader(req.Body)
	}
	hreq, err := http.NewRequest(method, scheme+"://"+addr+path, body)
	if err != nil {
		return nil, fmt.Errorf("build request for %s: %w", path, err)
	}
	for k, vs := range req.Header {
		hreq.Header[k] = vs
	}
	hreq.Host = req.Host

	sni := req.SNI
	if sni == "" && !req.NoSNI {
		sni = req.Host
		if h, _, err := net.SplitHostPort(sni); err == nil {
			sni = h
		}
	}
	if req.NoSNI {
		sni = ""
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	transport := &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, network, addr)
		},
		DialTLSContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			raw, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// ServerName "" sends no SNI; verification is off so that tests can look at
			// whatever certificate was served.
			conf := &tls.Config{ServerName: sni, InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}} //nolint:gosec // tests inspect the served certificate themselves
			if req.ClientCertificate != nil {
				conf.Certificates = []tls.Certificate{*req.ClientCertificate}
			}
			conn := tls.Client(raw, conf)
			if err := conn.HandshakeContext(ctx); err != nil {
				_ = raw.Close()
				return nil, fmt.Errorf("TLS handshake with SNI %q: %w", sni, err)
			}
			return conn, nil
		},
	}
	defer transport.CloseIdleConnections()
	client := &http.Client{
		Transport:     transport,
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("%s %s://%s%s (Host %q): %w", method, scheme, addr, path, req.Host, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read body of %s %s: %w", method, path, err)
	}
	out := &Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
	if resp.TLS != nil {
		out.PeerCertificates = resp.TLS.PeerCertificates
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		var echo EchoResponse
		if err := json.Unmarshal(b, &echo); err == nil && echo.Name != "" {
			out.Echo = &echo
		}
	}
	return out, nil
}
