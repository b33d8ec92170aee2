// Package tlsproxy is the SSL passthrough data plane, and the TCP/UDP services proxy built on it. The
// passthrough proxy serves the HTTPS port: it reads the start of each TLS connection (the ClientHello)
// without terminating TLS, looks the server name (SNI) up in a routing table, and either passes the
// connection, undecrypted, to the endpoints of a passthrough route or hands it to NGINX. Bytes read for
// routing are replayed to whichever side gets the connection. The same Proxy serves TCP services
// (ServeStream: every connection of a listener to one Service's endpoints, with the same splice copy,
// PROXY protocol and idle handling), and UDPProxy relays UDP services with one flow per client.
//
// The package is plain Go: an incremental ClientHello parser (ParseClientHello, ReadClientHello), a
// routing Table with exact and "*." wildcard names, PROXY protocol v1/v2 writers and a reader, and the
// proxies themselves. It knows nothing about Kubernetes; modules/passthrough and modules/streams feed it.
package tlsproxy
