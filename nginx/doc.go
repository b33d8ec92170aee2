// Package nginx is the data-plane domain: everything the controller knows about NGINX, as plain Go with
// no fx, no modules and no cluster access. The renderer and reloader modules call it.
//
// Layers, each using only the ones above it:
//
//   - Model (model.go): the structure of nginx.conf as typed, validated values (servers, locations,
//     upstream names). Endpoint lists are not part of it.
//   - Translation (translate.go, merge.go, cache.go): TranslateIngress turns one Ingress into an
//     IngressTranslation, or rejects that Ingress alone with an error naming the fields at fault.
//     Merge combines all accepted translations into a Model (the oldest Ingress wins a conflicting
//     path; losers are reported as Conflicts). TranslationCache skips Ingresses whose objects did not
//     change.
//   - Configuration (escape.go, template.go, nginx.tmpl): Render turns a Model and a RenderConfig into
//     nginx.conf. Every string reaching the file passes through Quote; the template only sees
//     pre-quoted strings and integers.
//   - Runtime (process.go, runtime.go, client.go, lua/): Process runs NGINX as a supervised foreground
//     child; Runtime applies a configuration (nginx -t, atomic rename, SIGHUP, confirmation through
//     the config hash); Client feeds endpoints and certificates to the embedded Lua without reloads.
//
// Routing semantics follow the Ingress API: Exact paths, element-wise Prefix paths (longest wins, Exact
// wins at equal length), ImplementationSpecific treated as Prefix, exact and "*." hosts. A "*." host
// follows nginx's server_name semantics and also matches deeper names (as with ingress-nginx).
// Regular-expression paths are not supported.
package nginx
