package nginx

// The ConfigMap's ssl-reject-handshake (issue #18): applied by certificates.lua, which ends the TLS
// handshakes without SNI or for a name no Ingress serves, instead of presenting the default certificate.

func init() {
	registerSettings(settingKey{Name: "ssl-reject-handshake", Default: "false", Values: boolValues,
		Doc: "`true`: TLS handshakes without a server name (SNI), or for a name that no Ingress rule names (exactly, or by a wildcard " +
			"one label up), are refused, so that the default certificate does not reveal the controller to scanners.",
		Difference: "The names are checked by the Lua code that serves certificates (one NGINX server block serves every host " +
			"here), against the hosts the controller pushed; as in ingress-nginx, a host of an Ingress without TLS is served " +
			"with the default certificate, and Ingress rules without a host do not count.",
		set: boolField(func(s *Settings) *bool { return &s.SSLRejectHandshake })})
}
