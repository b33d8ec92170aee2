// Package nginx is the data-plane domain: everything the controller knows about NGINX, as plain Go with
// no fx, no modules and no cluster access. The renderer and reloader modules call it.
//
// # Layers
//
// Each layer uses only the ones above it:
//
//   - Model (model.go, routes.go): the data plane's structure as typed, validated values (servers,
//     locations, upstream names), and its wire form for the Lua router (routes.go). Endpoint lists are
//     not part of it.
//   - Translation (backends.go, translate.go, merge.go, cache.go, build.go): backends.go is the one walk
//     over an Ingress's backends that names upstreams (the translation, the endpoint lane and
//     passthrough all use it). TranslateIngress turns one Ingress into an IngressTranslation, or
//     rejects that Ingress alone with an error naming the fields at fault. Merge combines all accepted
//     translations into a Model (OlderFirst: the oldest Ingress wins a conflicting path; a host's TLS
//     comes from the namespace of its oldest rule, see MergeAll; losers are reported as Conflicts).
//     A Merger keeps per-host indexes so that a change merges again only the hosts it touches.
//     TranslationCache (and the cache entries a ModelBuilder keeps per Ingress) skips Ingresses whose
//     objects did not change. ModelBuilder runs the build for
//     the renderer: Build looks at every Ingress, Update only at the Ingresses and Services that
//     changed (and the Ingresses that depend on those Services), so a change translates and merges
//     only what it touches (what stays linear, copying the server list and comparing it, costs a few
//     milliseconds at 10,000 Ingresses).
//   - Profiles (profiles.go): directive-only settings (custom-http-errors today) as one named location per
//     distinct combination, which the Lua router enters for the routes that use it.
//   - Configuration (escape.go, template.go, nginx.tmpl): Render turns a Model and a RenderConfig into
//     nginx.conf and its hash; hosts and paths are not in it (the Lua router serves them). Every string reaching the file passes through Quote; the template only
//     sees pre-quoted strings, integers, booleans and typed address ranges (netip.Prefix, for the
//     source-range annotations), so a --template replacement cannot inject anything either.
//   - Runtime (process.go, master.go, lifecycle.go, runtime.go, client.go, configtest.go, lua/): Process
//     runs NGINX as a supervised foreground child (master.go: the OS process and its /proc tree, behind
//     an interface that tests fake); lifecycle.go is the master's state machine (gone, starting,
//     serving, reloading, stuck), which one goroutine of the Runtime owns; Runtime applies a
//     configuration (nginx -t, atomic rename, SIGHUP, confirmation through the config hash); Client
//     feeds routes, endpoints and certificates to the embedded Lua through the status server, without
//     reloads.
//
// # Routing semantics
//
// They follow the Ingress API: Exact paths; Prefix paths matched element-wise (longest wins, Exact wins
// at equal length; a trailing slash is ignored); ImplementationSpecific treated as Prefix; exact and
// "*." hosts; rules without host on the catch-all server; spec.defaultBackend as "/" of the Ingress's
// hosts (or of the catch-all server when it has no rules). The Lua router (lua/ingress_reactor/router.lua)
// and Model.Route implement them; routes_test.go runs one corpus through both. A "*." host covers
// exactly one label, as the Ingress API says. Paths are restricted to
// letters, digits and -._~!*(),+=:@/& (no regex, no percent-encoding, no dot segments): anything else
// is either NGINX syntax or could never match NGINX's normalized URI. A Service that does not exist yet
// is not a rejection: its paths answer 503 and the translation carries a warning.
//
// # Data plane
//
// All locations proxy to one upstream, upstream_balancer, whose balancer_by_lua picks an endpoint of
// the location's $proxy_upstream_name round-robin, from a lua_shared_dict the controller fills; an
// access_by_lua check answers 503 when the upstream has no endpoints. Certificates are served per SNI
// name from a second shared dict by ssl_certificate_by_lua, falling back to the default certificate
// files. The shared dicts survive reloads, not restarts (Runtime's OnReady says when to push again).
// Until a dict's first full push after a start, a request or handshake that needs it waits for that push
// (lua/ingress_reactor/filled.lua, at most 2 s, once per worker): a restarted NGINX never serves a 503 or
// the default certificate for want of a push. Every store Lua reads must follow the same rule.
//
// The status server listens on 127.0.0.1:StatusPort only. Its API (JSON):
//
//	GET  /healthz                      200 "ok"
//	GET  /configuration/hash           the hash of the configuration the workers serve (text)
//	POST /configuration/endpoints      {"full": bool, "upstreams": {"<upstream>": [{"address": "10.0.0.1", "port": 8080}]}}
//	                                   -> {"changed": n, "unchanged": n, "removed": n}
//	GET  /configuration/endpoints      {"upstreams": {"<upstream>": [{"address": ..., "port": ...}]}}
//	POST /configuration/certificates   {"full": bool,
//	                                    "certificates": {"<namespace>/<name>": {"cert": "<PEM chain>", "key": "<PEM key>",
//	                                                     "ocsp": "<base64 DER OCSP response>", "ocsp_expires": <unix s>} | null},
//	                                    "hosts": {"<host or *.domain or *>": "<namespace>/<name>" | null}}
//	                                   -> {"changed": n, "removed": n, "removed_hosts": n}
//	GET  /configuration/certificates   {"hosts": {...}, "certificates": ["<id>", ...], "stapled": {"<id>": true}} (no key material)
//	GET  /nginx_status                 stub_status
//
// With "full": true the body is the complete set and everything else is removed; otherwise only the
// listed entries change, and an empty endpoint list or a null removes one. A body is validated
// completely (addresses, ports, names, parseable PEM) before anything is written; errors answer 400
// (or 507 when a shared dict is full) with {"error": "..."}. Writes never evict other entries.
//
// Every request, reads included, must carry RenderConfig.StatusToken in the X-Ingress-Reactor-Token
// header (403 otherwise): the loopback port is reachable by every process in the pod's network
// namespace, a write redirects traffic or swaps certificates, and a read shows Secret names, upstreams
// and pod addresses. The controller makes a fresh random token each start. A custom template must keep
// "set $ingress_reactor_token {{.StatusToken}};" and the access_by_lua_block that calls
// require("ingress_reactor.configuration").authorize() in the status server, or it is refused.
//
// # Running as root
//
// When the controller (and so the NGINX master) runs as root, NGINX's workers run as RenderConfig.User,
// by default NGINX's "nobody". The master loads everything that may be private: the Lua modules (in
// init_by_lua), the default certificate (0600 is fine) and the log files; certificates from Secrets
// reach workers through the shared dict, never through files. Workers only need the temp paths under
// the prefix, so Paths.Prepare creates the prefix 0755 and refuses a prefix whose parents other users
// cannot traverse: request bodies over 16 KB and large responses would fail with 500 otherwise.
// Unprivileged, nothing changes user and high ports work.
//
// # Costs to know
//
// nginx.conf holds no hosts or paths, so its size, nginx -t and a reload cost the same at any number of
// Ingresses (about 11 ms for nginx -t). A change of routes is a push of the changed hosts to the Lua
// router's shared dict; a full push of 10,000 hosts takes about 90 ms. NGINX itself holds about 7 KB of
// shared memory per host (--routes-dict-size). docs/benchmarks.md has the measurements and commands.
package nginx
