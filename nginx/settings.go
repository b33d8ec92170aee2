package nginx

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Settings are the controller-wide NGINX settings of ingress-nginx's ConfigMap (--configmap), with its key
// names, values and defaults. Every key is parsed into a typed field here (settingKeys); what reaches
// nginx.conf is numbers, booleans and strings checked against a fixed syntax, never the ConfigMap's text.
//
// A zero Settings means "not loaded": RenderConfig uses DefaultSettings then.
type Settings struct {
	loaded bool

	// Flag-backed keys: zero (or unset) keeps the flag's value, see overlay.
	WorkerProcesses       string
	MaxWorkerConnections  int
	WorkerShutdownTimeout time.Duration
	ErrorLogLevel         string
	UpstreamKeepalive     int
	ProxyConnectTimeout   time.Duration
	ProxyReadTimeout      time.Duration
	ProxySendTimeout      time.Duration
	// ProxyBodySize is in bytes; 0 means no limit, -1 not set.
	ProxyBodySize      int64
	EndpointsDictMB    int
	CertificatesDictMB int

	ServerTokens               bool
	KeepAlive                  time.Duration
	KeepAliveRequests          int
	ClientHeaderBufferSize     int64
	ClientHeaderTimeout        time.Duration
	ClientBodyBufferSize       int64
	ClientBodyTimeout          time.Duration
	LargeClientHeaderBuffers   int
	LargeClientHeaderBufferLen int64
	EnableUnderscoresInHeaders bool
	IgnoreInvalidHeaders       bool
	DefaultType                string
	VariablesHashBucketSize    int
	VariablesHashMaxSize       int
	MapHashBucketSize          int

	UseGzip       bool
	GzipLevel     int
	GzipMinLength int
	GzipTypes     []string
	GzipDisable   []string

	HSTS                  bool
	HSTSMaxAge            int64
	HSTSIncludeSubdomains bool
	HSTSPreload           bool

	SSLProtocols              []string
	SSLCiphers                string
	SSLECDHCurve              string
	SSLSessionCache           bool
	SSLSessionCacheSize       int64
	SSLSessionTimeout         time.Duration
	SSLSessionTickets         bool
	SSLBufferSize             int64
	UseHTTP2                  bool
	HTTP2MaxConcurrent        int
	UpstreamKeepaliveTime     time.Duration
	UpstreamKeepaliveTimeout  time.Duration
	UpstreamKeepaliveRequests int

	ProxyBuffering        bool
	ProxyRequestBuffering bool
	ProxyBufferSize       int64
	ProxyBuffersNumber    int
	ProxyBusyBuffersSize  int64
	RetryNonIdempotent    bool
	// ProxyCookieDomain and ProxyCookiePath are quoted directive arguments, "" for off
	// (settings_proxycookie.go).
	ProxyCookieDomain string
	ProxyCookiePath   string

	SSLRedirect      bool
	ForceSSLRedirect bool

	// Balancing defaults (settings_balancing.go): LoadBalance is "ewma" or "" (round robin),
	// UpstreamHashBy a validated expression or "".
	LoadBalance    string
	UpstreamHashBy string
	// GlobalAuth is the external authentication of every Ingress without its own auth-url
	// (global-auth-*, no-auth-locations; settings_globalauth.go).
	GlobalAuth GlobalAuth
	// Logs are the access and error log keys (settings_logs.go).
	Logs LogSettings
	// Headers are the keys about backends' response headers (settings_headers.go).
	Headers HeaderSettings
	// Limits are the limit annotations' statuses (settings_limits.go).
	Limits LimitSettings
	// Redirects are the redirect keys (settings_redirects.go).
	Redirects RedirectSettings
	// NextUpstream are the retry keys (settings_nextupstream.go).
	NextUpstream NextUpstreamSettings
	// CustomHTTPErrors is custom-http-errors in its written form (settings_customerrors.go).
	CustomHTTPErrors string
	// LimitRate are the defaults of limit-rate and limit-rate-after (settings_limitrate.go).
	LimitRate LimitRateSettings
	// Client addresses, forwarded headers and blocking (settings_fwd.go).
	fwdSettings

	// HeaderRefs are the headers of add-headers and proxy-set-headers (settings_hdrs.go).
	HeaderRefs HeaderRefSettings

	// Listen are reuse-port, disable-ipv6 and bind-address (settings_listen.go).
	Listen ListenSettings
	// Routing are service-upstream, proxy-redirect-from/-to and no-tls-redirect-locations
	// (settings_routing.go).
	Routing RoutingSettings
	// SSLDHParam is ssl-dh-param's PEM, encoded anew from the parsed parameters; "" for none
	// (settings_dhparam.go).
	SSLDHParam string
	// SSLRejectHandshake refuses TLS handshakes for names no Ingress serves (settings_sslreject.go).
	SSLRejectHandshake bool
	// EnableOCSP is enable-ocsp (settings_ocsp.go): the controller staples OCSP responses; nothing is rendered.
	EnableOCSP bool
}

// settingKey is one ConfigMap key this controller reads.
type settingKey struct {
	Name string
	// Default is ingress-nginx's default, in the ConfigMap's syntax; it is parsed like a value, so the
	// documented default is the applied one.
	Default string
	// Values describes what is accepted.
	Values string
	// Doc says what the key does here; Difference what differs from ingress-nginx (empty: nothing).
	Doc        string
	Difference string
	// Overlay marks keys that replace a flag's (or RenderConfig field's) value only when the ConfigMap
	// sets them: DefaultSettings leaves them unset, and Default documents the value the flag has by default.
	Overlay bool
	set     func(s *Settings, v string) error
	// resolve, for keys that name another ConfigMap, turns the value into the form set parses (and
	// lastGood keeps) with the ConfigMap's data.
	resolve func(v string, lookup SettingsRefLookup) (string, error)
}

// settingKeys are the supported keys, by name.
var settingKeys = map[string]*settingKey{}

func registerSettings(keys ...settingKey) {
	for i := range keys {
		k := keys[i]
		if _, dup := settingKeys[k.Name]; dup {
			panic("setting registered twice: " + k.Name)
		}
		settingKeys[k.Name] = &k
	}
}

// SettingProblem is a ConfigMap key that was not applied as given.
type SettingProblem struct {
	Key   string
	Value string
	// Reason says why; KeptLastGood that the key's last good value stays applied (else its default).
	Reason       string
	KeptLastGood bool
}

func (p SettingProblem) String() string {
	s := fmt.Sprintf("%s: %s", p.Key, p.Reason)
	if p.KeptLastGood {
		s += "; its last good value stays applied"
	}
	return s
}

// DefaultSettings returns ingress-nginx's defaults.
func DefaultSettings() Settings {
	s := Settings{loaded: true, ProxyBodySize: -1}
	for _, name := range slices.Sorted(maps.Keys(settingKeys)) {
		k := settingKeys[name]
		if k.Default == "" || k.Overlay {
			continue
		}
		if err := k.set(&s, k.Default); err != nil {
			panic(fmt.Sprintf("default of ConfigMap key %s (%q): %v", name, k.Default, err))
		}
	}
	return s
}

// ParseSettings applies a ConfigMap's data over the defaults. A value that does not parse is a problem
// and, when lastGood has a value for its key (what the previous call returned as good), that value stays
// applied; keys of ingress-nginx this controller does not support and unknown keys are problems too. good
// holds the values applied, to pass as lastGood next time.
func ParseSettings(data, lastGood map[string]string) (s Settings, good map[string]string, problems []SettingProblem) {
	return ParseSettingsRefs(data, lastGood, nil)
}

// ParseSettingsRefs is ParseSettings with lookup resolving the keys that name another ConfigMap
// (add-headers, proxy-set-headers); without it they are problems.
func ParseSettingsRefs(data, lastGood map[string]string, lookup SettingsRefLookup) (s Settings, good map[string]string, problems []SettingProblem) {
	s = DefaultSettings()
	good = map[string]string{}
	for _, key := range slices.Sorted(maps.Keys(data)) {
		v := data[key]
		k, ok := settingKeys[key]
		if !ok {
			problems = append(problems, SettingProblem{Key: key, Value: v, Reason: unsupportedSettingReason(key)})
			continue
		}
		applied := v
		var err error
		if k.resolve != nil {
			applied, err = k.resolve(strings.TrimSpace(v), lookup)
		}
		if err == nil {
			err = k.set(&s, strings.TrimSpace(applied))
		}
		if err == nil {
			good[key] = applied
			continue
		}
		p := SettingProblem{Key: key, Value: v, Reason: fmt.Sprintf("invalid value %s: %v", quoteValue(v), err)}
		if last, ok := lastGood[key]; ok && k.set(&s, strings.TrimSpace(last)) == nil {
			good[key] = last
			p.KeptLastGood = true
		} else if k.Default != "" && !k.Overlay {
			_ = k.set(&s, k.Default) // a failed set may have changed part of a field
		}
		problems = append(problems, p)
	}
	return s, good, problems
}

// Loaded reports whether s came from DefaultSettings or ParseSettings.
func (s Settings) Loaded() bool { return s.loaded }

// TranslateOptions returns the translation settings s carries over opts.
func (s Settings) TranslateOptions(opts TranslateOptions) TranslateOptions {
	if !s.loaded {
		return opts
	}
	opts.SSLRedirect = s.SSLRedirect
	opts.ForceSSLRedirect = s.ForceSSLRedirect
	opts.LoadBalance = s.LoadBalance
	opts.UpstreamHashBy = s.UpstreamHashBy
	opts.GlobalAuth = s.GlobalAuth
	opts.CustomHTTPErrors = s.CustomHTTPErrors
	opts.LimitRate, opts.LimitRateAfter = s.LimitRate.Rate, s.LimitRate.After
	opts.AllowedResponseHeaders = strings.ToLower(strings.Join(s.Headers.AllowedResponse, "\n"))
	opts.AllowSourceRange = strings.Join(s.WhitelistSourceRange, ",")
	opts.DenySourceRange = strings.Join(s.DenylistSourceRange, ",")
	opts.ServiceUpstream = s.Routing.ServiceUpstream
	opts.ProxyRedirectFrom, opts.ProxyRedirectTo = s.Routing.ProxyRedirectFrom, s.Routing.ProxyRedirectTo
	opts.ProxyCookieDomain, opts.ProxyCookiePath = s.ProxyCookieDomain != "", s.ProxyCookiePath != ""
	return opts
}

// overlay applies the keys that replace a flag's value, when the ConfigMap sets them.
func (s Settings) overlay(c RenderConfig) RenderConfig {
	if s.WorkerProcesses != "" {
		c.WorkerProcesses = s.WorkerProcesses
	}
	if s.MaxWorkerConnections > 0 {
		c.WorkerConnections = s.MaxWorkerConnections
	}
	if s.WorkerShutdownTimeout > 0 {
		c.WorkerShutdownTimeout = s.WorkerShutdownTimeout
	}
	if s.ErrorLogLevel != "" {
		c.ErrorLogLevel = s.ErrorLogLevel
	}
	if s.UpstreamKeepalive > 0 {
		c.UpstreamKeepalive = s.UpstreamKeepalive
	}
	if s.ProxyConnectTimeout > 0 {
		c.ProxyConnectTimeout = s.ProxyConnectTimeout
	}
	if s.ProxyReadTimeout > 0 {
		c.ProxyReadTimeout = s.ProxyReadTimeout
	}
	if s.ProxySendTimeout > 0 {
		c.ProxySendTimeout = s.ProxySendTimeout
	}
	switch {
	case s.ProxyBodySize == 0:
		c.ClientMaxBodySize = NoBodyLimit
	case s.ProxyBodySize > 0:
		c.ClientMaxBodySize = s.ProxyBodySize
	}
	if s.EndpointsDictMB > 0 {
		c.EndpointsDictMB = s.EndpointsDictMB
	}
	if s.CertificatesDictMB > 0 {
		c.CertificatesDictMB = s.CertificatesDictMB
	}
	return s.Logs.overlay(c)
}

// Value parsers. Each returns the typed value or an error that says what is accepted.

func parseSettingInt(v string, lo, hi int) (int, error) {
	n, err := parseDigits(v)
	if err != nil || n < int64(lo) || n > int64(hi) {
		return 0, fmt.Errorf("want a whole number from %d to %d", lo, hi)
	}
	return int(n), nil
}

func parseSettingSize(v string, lo, hi int64) (int64, error) {
	n, err := parseNginxSize(v)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("want a size from %d to %d bytes (a number with an optional k, m or g)", lo, hi)
	}
	return n, nil
}

// parseSettingSeconds parses a number of seconds, or a time in NGINX's syntax.
func parseSettingSeconds(v string, lo, hi time.Duration) (time.Duration, error) {
	d, err := parseNginxTime(v)
	if err != nil || d < lo || d > hi {
		return 0, fmt.Errorf("want a number of seconds, or a time such as 90s or 5m, from %s to %s", lo, hi)
	}
	return d, nil
}

// settingsField is a helper to write one typed field through a parse function.
func settingsField[T any](field func(*Settings) *T, parse func(string) (T, error)) func(*Settings, string) error {
	return func(s *Settings, v string) error {
		x, err := parse(v)
		if err != nil {
			return err
		}
		*field(s) = x
		return nil
	}
}

func boolField(field func(*Settings) *bool) func(*Settings, string) error {
	return settingsField(field, func(v string) (bool, error) {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, fmt.Errorf("want true or false")
		}
		return b, nil
	})
}

func intField(field func(*Settings) *int, lo, hi int) func(*Settings, string) error {
	return settingsField(field, func(v string) (int, error) { return parseSettingInt(v, lo, hi) })
}

func sizeField(field func(*Settings) *int64, lo, hi int64) func(*Settings, string) error {
	return settingsField(field, func(v string) (int64, error) { return parseSettingSize(v, lo, hi) })
}

func secondsField(field func(*Settings) *time.Duration, lo, hi time.Duration) func(*Settings, string) error {
	return settingsField(field, func(v string) (time.Duration, error) { return parseSettingSeconds(v, lo, hi) })
}

// wordList parses a list of words separated by spaces or commas, each checked by ok.
func wordList(v string, max int, ok func(string) bool, what string) ([]string, error) {
	words := strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' })
	if len(words) > max {
		return nil, fmt.Errorf("at most %d %s", max, what)
	}
	for _, w := range words {
		if !ok(w) {
			return nil, fmt.Errorf("%s is not a valid %s", quoteValue(w), strings.TrimSuffix(what, "s"))
		}
	}
	return words, nil
}

// isSettingToken reports whether w holds only letters, digits and the marks of MIME types, cipher
// lists and curve names ("+-./_:!@=*"): nothing NGINX would read as syntax.
func isSettingToken(w string) bool {
	if w == "" || len(w) > 128 {
		return false
	}
	for i := 0; i < len(w); i++ {
		c := w[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("+-./_:!@=*", c) >= 0) {
			return false
		}
	}
	return true
}

// settingsView is what the template sees of Settings: numbers, on/off words, validated tokens and quoted
// strings only.
type settingsView struct {
	ServerTokens              string
	KeepAliveMS               int64
	KeepAliveRequests         int
	ClientHeaderBufferSize    int64
	ClientHeaderTimeoutMS     int64
	ClientBodyBufferSize      int64
	ClientBodyTimeoutMS       int64
	LargeClientHeaderBuffers  string
	UnderscoresInHeaders      string
	IgnoreInvalidHeaders      string
	DefaultType               string
	VariablesHashBucketSize   int
	VariablesHashMaxSize      int
	MapHashBucketSize         int
	Gzip                      bool
	GzipLevel                 int
	GzipMinLength             int
	GzipTypes                 []string
	GzipDisable               []string
	HSTSHeader                string // quoted, or "nil" without HSTS (it is printed into Lua code)
	SSLProtocols              string
	SSLCiphers                string
	SSLECDHCurve              string
	SSLSessionCache           bool
	SSLSessionCacheSize       string // "10m" or "512k"
	SSLSessionTimeoutSec      int64
	SSLSessionTickets         string
	SSLBufferSize             int64
	HTTP2                     bool
	HTTP2MaxConcurrentStreams int
	UpstreamKeepaliveTimeMS   int64
	UpstreamKeepaliveTimeout  int64 // ms
	UpstreamKeepaliveRequests int
	ProxyBuffering            string
	ProxyRequestBuffering     string
	ProxyBufferSize           int64
	ProxyBuffersNumber        int
	ProxyBusyBuffersSize      int64 // 0: NGINX's default
	ProxyNextUpstream         string
	ProxyCookieDomain         string // quoted arguments, or "" for none
	ProxyCookiePath           string
	// Logs are the access log's format and options.
	Logs logsView
	// Headers are hide-headers and allow-backend-server-header.
	Headers headersView
	// Limits are the statuses of limit-req-status-code and limit-conn-status-code, printed into Lua code.
	Limits LimitSettings
	// Redirects holds http-redirect-code, printed into Lua code.
	Redirects RedirectSettings
	// NextUpstream holds the retries' timeout and tries.
	NextUpstream nextUpstreamView
	// Fwd: client addresses, forwarded headers and blocking (settings_fwd.go).
	Fwd fwdView
	// AddHeaders and ProxySetHeaders are add-headers and proxy-set-headers, quoted (settings_hdrs.go).
	AddHeaders      []headerLineView
	ProxySetHeaders []headerLineView

	// ReusePort adds reuseport to the public listeners (settings_listen.go).
	ReusePort bool
	// ProxyRedirect are the http block's proxy_redirect arguments, NoTLSRedirectLocations the quoted
	// prefixes of no-tls-redirect-locations (settings_routing.go).
	ProxyRedirect          string
	NoTLSRedirectLocations []string
	// SSLDHParam is the quoted path of ssl-dh-param's file, or "" (settings_dhparam.go; set by newView,
	// which knows the paths).
	SSLDHParam string
	// Routing holds relative-redirects and grpc-buffer-size-kb (settings_routing.go).
	Routing RoutingSettings
	// SSLRejectHandshake is ssl-reject-handshake, printed into Lua code (settings_sslreject.go).
	SSLRejectHandshake bool
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func newSettingsView(q *quoter, s Settings) settingsView {
	v := settingsView{
		ServerTokens:              onOff(s.ServerTokens),
		KeepAliveMS:               s.KeepAlive.Milliseconds(),
		KeepAliveRequests:         s.KeepAliveRequests,
		ClientHeaderBufferSize:    s.ClientHeaderBufferSize,
		ClientHeaderTimeoutMS:     s.ClientHeaderTimeout.Milliseconds(),
		ClientBodyBufferSize:      s.ClientBodyBufferSize,
		ClientBodyTimeoutMS:       s.ClientBodyTimeout.Milliseconds(),
		LargeClientHeaderBuffers:  fmt.Sprintf("%d %d", s.LargeClientHeaderBuffers, s.LargeClientHeaderBufferLen),
		UnderscoresInHeaders:      onOff(s.EnableUnderscoresInHeaders),
		IgnoreInvalidHeaders:      onOff(s.IgnoreInvalidHeaders),
		DefaultType:               q.quote(s.DefaultType),
		VariablesHashBucketSize:   s.VariablesHashBucketSize,
		VariablesHashMaxSize:      s.VariablesHashMaxSize,
		MapHashBucketSize:         s.MapHashBucketSize,
		Gzip:                      s.UseGzip,
		GzipLevel:                 s.GzipLevel,
		GzipMinLength:             s.GzipMinLength,
		HSTSHeader:                "nil",
		SSLProtocols:              strings.Join(s.SSLProtocols, " "),
		SSLCiphers:                q.quote(s.SSLCiphers),
		SSLECDHCurve:              q.quote(s.SSLECDHCurve),
		SSLSessionCache:           s.SSLSessionCache,
		SSLSessionCacheSize:       nginxSize(s.SSLSessionCacheSize),
		SSLSessionTimeoutSec:      int64(s.SSLSessionTimeout.Round(time.Second) / time.Second),
		SSLSessionTickets:         onOff(s.SSLSessionTickets),
		SSLBufferSize:             s.SSLBufferSize,
		HTTP2:                     s.UseHTTP2,
		HTTP2MaxConcurrentStreams: s.HTTP2MaxConcurrent,
		UpstreamKeepaliveTimeMS:   s.UpstreamKeepaliveTime.Milliseconds(),
		UpstreamKeepaliveTimeout:  s.UpstreamKeepaliveTimeout.Milliseconds(),
		UpstreamKeepaliveRequests: s.UpstreamKeepaliveRequests,
		ProxyBuffering:            onOff(s.ProxyBuffering),
		ProxyRequestBuffering:     onOff(s.ProxyRequestBuffering),
		ProxyBufferSize:           s.ProxyBufferSize,
		ProxyBuffersNumber:        s.ProxyBuffersNumber,
		ProxyBusyBuffersSize:      s.ProxyBusyBuffersSize,
		ProxyNextUpstream:         s.NextUpstream.proxyNextUpstream(s.RetryNonIdempotent),
		ProxyCookieDomain:         s.ProxyCookieDomain,
		ProxyCookiePath:           s.ProxyCookiePath,
		Logs:                      newLogsView(q, s.Logs),
		Headers:                   newHeadersView(q, s.Headers),
		Limits:                    s.Limits,
		Redirects:                 s.Redirects,
		NextUpstream:              nextUpstreamView{TimeoutMS: s.NextUpstream.Timeout.Milliseconds(), Tries: s.NextUpstream.Tries},
		Fwd:                       newFwdView(q, s),
		AddHeaders:                newHeaderLineViews(q, s.HeaderRefs.Add),
		ProxySetHeaders:           newHeaderLineViews(q, s.HeaderRefs.ProxySet),

		ReusePort:              s.Listen.ReusePort,
		ProxyRedirect:          s.Routing.proxyRedirect(q),
		NoTLSRedirectLocations: s.Routing.noTLSRedirectLocations(q),
		Routing:                s.Routing,
		SSLRejectHandshake:     s.SSLRejectHandshake,
	}
	for _, t := range s.GzipTypes {
		v.GzipTypes = append(v.GzipTypes, q.quote(t))
	}
	for _, d := range s.GzipDisable {
		v.GzipDisable = append(v.GzipDisable, q.quote(d))
	}
	if s.HSTS {
		h := "max-age=" + strconv.FormatInt(s.HSTSMaxAge, 10)
		if s.HSTSIncludeSubdomains {
			h += "; includeSubDomains"
		}
		if s.HSTSPreload {
			h += "; preload"
		}
		v.HSTSHeader = q.quote(h)
	}
	return v
}

// nginxSize prints a size in m or k where it is a whole number of them.
func nginxSize(n int64) string {
	switch {
	case n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + "m"
	case n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + "k"
	}
	return strconv.FormatInt(n, 10)
}
