// Package tlsproxy is the SSL passthrough data plane: a TCP proxy for the HTTPS port that reads the start
// of each TLS connection (the ClientHello) without terminating TLS, looks the server name (SNI) up in a
// routing table, and either passes the connection, undecrypted, to the endpoints of a passthrough route or
// hands it to NGINX. Bytes read for routing are replayed to whichever side gets the connection.
//
// The package is plain Go: an incremental ClientHello parser (ParseClientHello, ReadClientHello), a
// routing Table with exact and "*." wildcard names, PROXY protocol v1/v2 writers and a reader, and the
// Proxy itself. It knows nothing about Kubernetes; modules/passthrough feeds it.
package tlsproxy
