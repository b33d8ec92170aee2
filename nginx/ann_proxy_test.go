package nginx

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAnnotationProxy: the proxy group's annotations -> the translation's profile and route data, a
// Warning for an ignored value, or the exact rejection.
func TestAnnotationProxy(t *testing.T) {
	const notSize = `metadata.annotations[nginx.ingress.kubernetes.io/proxy-body-size]: %s is not a size (want bytes, or a number with k, m or g, such as 8m; 0 for no limit)`
	ignored := func(key, raw, want string) string {
		return "metadata.annotations[" + key + "]: " + raw + " is not " + want + "; ignored"
	}
	const timeoutWant = "a number of seconds, or an NGINX time such as 500ms or 2m, from 1ms to a year"
	tests := map[string]struct {
		kv          []string
		profile     ProfileSettings
		options     *RouteOptions
		wantWarning string
		wantErr     string
	}{
		"no annotation":          {},
		"body size in megabytes": {kv: []string{AnnotationProxyBodySize, "8m"}, profile: ProfileSettings{ClientMaxBodySize: "8388608"}},
		"body size: units in any case, spaces trimmed, same profile as bytes": {
			kv: []string{AnnotationProxyBodySize, " 8192K\n"}, profile: ProfileSettings{ClientMaxBodySize: "8388608"}},
		"body size in gigabytes":                    {kv: []string{AnnotationProxyBodySize, "2g"}, profile: ProfileSettings{ClientMaxBodySize: "2147483648"}},
		"body size 0 is unlimited":                  {kv: []string{AnnotationProxyBodySize, "0"}, profile: ProfileSettings{ClientMaxBodySize: "0"}},
		"body size in bytes":                        {kv: []string{AnnotationProxyBodySize, "1000"}, profile: ProfileSettings{ClientMaxBodySize: "1000"}},
		"body size with a unit NGINX lacks rejects": {kv: []string{AnnotationProxyBodySize, "8mb"}, wantErr: strings.Replace(notSize, "%s", `"8mb"`, 1)},
		"negative body size rejects":                {kv: []string{AnnotationProxyBodySize, "-1"}, wantErr: strings.Replace(notSize, "%s", `"-1"`, 1)},
		"fractional body size rejects":              {kv: []string{AnnotationProxyBodySize, "1.5m"}, wantErr: strings.Replace(notSize, "%s", `"1.5m"`, 1)},
		"overflowing body size rejects": {kv: []string{AnnotationProxyBodySize, "99999999999999999g"},
			wantErr: strings.Replace(notSize, "%s", `"99999999999999999g"`, 1)},
		"body size of 8 PiB, the most the router holds": {kv: []string{AnnotationProxyBodySize, "8388608g"},
			profile: ProfileSettings{ClientMaxBodySize: "9007199254740992"}},
		"body size over what the router holds rejects": {kv: []string{AnnotationProxyBodySize, "8388609g"},
			wantErr: strings.Replace(notSize, "%s", `"8388609g"`, 1)},
		"limit rate on a gRPC backend warns": {kv: []string{AnnotationLimitRate, "100", AnnotationBackendProtocol, "GRPC"},
			profile: ProfileSettings{BackendProtocol: "GRPC"}, options: &RouteOptions{LimitRate: 100 << 10},
			wantWarning: "metadata.annotations[" + AnnotationLimitRate + "]: has no effect with a gRPC backend " +
				"(NGINX does not buffer gRPC responses, and limits the rate of buffered responses only)"},
		"injection in a body size rejects": {kv: []string{AnnotationProxyBodySize, "8m; }"}, wantErr: strings.Replace(notSize, "%s", `"8m; }"`, 1)},
		"body buffer":                      {kv: []string{AnnotationClientBodyBufferSize, "16k"}, profile: ProfileSettings{ClientBodyBufferSize: "16384"}},
		"body buffer 0 is ignored": {kv: []string{AnnotationClientBodyBufferSize, "0"},
			wantWarning: ignored(AnnotationClientBodyBufferSize, `"0"`, "a size from 1 byte to 64m (bytes, or a number with k, m or g)")},
		"body buffer over 64m is ignored": {kv: []string{AnnotationClientBodyBufferSize, "65m"},
			wantWarning: ignored(AnnotationClientBodyBufferSize, `"65m"`, "a size from 1 byte to 64m (bytes, or a number with k, m or g)")},
		"both sizes: one profile": {kv: []string{AnnotationProxyBodySize, "1m", AnnotationClientBodyBufferSize, "1m"},
			profile: ProfileSettings{ClientMaxBodySize: "1048576", ClientBodyBufferSize: "1048576"}},
		"timeouts in seconds, as ingress-nginx": {kv: []string{AnnotationProxyConnectTimeout, "3", AnnotationProxySendTimeout, "30", AnnotationProxyReadTimeout, "3600"},
			options: &RouteOptions{ProxyConnectTimeout: 3 * time.Second, ProxySendTimeout: 30 * time.Second, ProxyReadTimeout: time.Hour}},
		"timeouts in NGINX's units": {kv: []string{AnnotationProxyConnectTimeout, "500ms", AnnotationProxyReadTimeout, "1h 30m"},
			options: &RouteOptions{ProxyConnectTimeout: 500 * time.Millisecond, ProxyReadTimeout: 90 * time.Minute}},
		"a timeout of 0 is ignored": {kv: []string{AnnotationProxyReadTimeout, "0"},
			wantWarning: ignored(AnnotationProxyReadTimeout, `"0"`, timeoutWant)},
		"a timeout over a year is ignored": {kv: []string{AnnotationProxyReadTimeout, "366d"},
			wantWarning: ignored(AnnotationProxyReadTimeout, `"366d"`, timeoutWant)},
		"a timeout with an unknown unit is ignored, the others kept": {kv: []string{AnnotationProxySendTimeout, "5 minutes", AnnotationProxyReadTimeout, "5"},
			options: &RouteOptions{ProxyReadTimeout: 5 * time.Second}, wantWarning: ignored(AnnotationProxySendTimeout, `"5 minutes"`, timeoutWant)},
		"tries":   {kv: []string{AnnotationProxyNextUpstreamTries, "5"}, options: &RouteOptions{NextUpstreamTries: 5, NextUpstreamTriesSet: true}},
		"tries 0": {kv: []string{AnnotationProxyNextUpstreamTries, "0"}, options: &RouteOptions{NextUpstreamTriesSet: true}},
		"tries over 100 are ignored": {kv: []string{AnnotationProxyNextUpstreamTries, "101"},
			wantWarning: ignored(AnnotationProxyNextUpstreamTries, `"101"`, "a whole number from 0 to 100")},
		"limit rate in kilobytes, as ingress-nginx": {kv: []string{AnnotationLimitRate, "100", AnnotationLimitRateAfter, "500", AnnotationProxyBuffering, "on"},
			profile: ProfileSettings{ProxyBuffering: "on"},
			options: &RouteOptions{LimitRate: 100 << 10, LimitRateAfter: 500 << 10}},
		"limit rate without proxy buffering warns": {kv: []string{AnnotationLimitRate, "1m"}, options: &RouteOptions{LimitRate: 1 << 20},
			wantWarning: "metadata.annotations[" + AnnotationLimitRate + "]: has an effect only with " + AnnotationProxyBuffering +
				`: "on" (NGINX limits the rate of buffered responses only, and proxy buffering is off by default)`},
		"limit rate 0 is none": {kv: []string{AnnotationLimitRate, "0"}},
		"limit rate after alone has no effect": {kv: []string{AnnotationLimitRateAfter, "500"},
			wantWarning: "metadata.annotations[" + AnnotationLimitRateAfter + "]: has an effect only with " + AnnotationLimitRate + "; ignored"},
		"limit rate over a terabyte is ignored": {kv: []string{AnnotationLimitRate, "1073741825"},
			wantWarning: ignored(AnnotationLimitRate, `"1073741825"`, "a number of kilobytes, or an NGINX size such as 1m, up to 1024g")},
		"limit rate in bits is ignored": {kv: []string{AnnotationLimitRate, "100kbit"},
			wantWarning: ignored(AnnotationLimitRate, `"100kbit"`, "a number of kilobytes, or an NGINX size such as 1m, up to 1024g")},
		"connection header": {kv: []string{AnnotationConnectionProxyHeader, " keep-alive "}, options: &RouteOptions{ConnectionHeader: "keep-alive"}},
		"connection header list": {kv: []string{AnnotationConnectionProxyHeader, "keep-alive, Upgrade"},
			options: &RouteOptions{ConnectionHeader: "keep-alive, Upgrade"}},
		"connection header with CRLF is ignored": {kv: []string{AnnotationConnectionProxyHeader, "close\r\nX-Evil: 1"},
			wantWarning: ignored(AnnotationConnectionProxyHeader, `"close\r\nX-Evil: 1"`, "a list of header tokens such as keep-alive")},
		"negative tries are ignored": {kv: []string{AnnotationProxyNextUpstreamTries, "-1"},
			wantWarning: ignored(AnnotationProxyNextUpstreamTries, `"-1"`, "a whole number from 0 to 100")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, errs := translateAnnotated(t, DefaultTranslateOptions(), tc.kv...)
			if tc.wantErr != "" {
				if got != nil || !slices.Contains(errs, tc.wantErr) {
					t.Fatalf("got %+v, errors %q; want the rejection %q", got, errs, tc.wantErr)
				}
				return
			}
			if got == nil {
				t.Fatalf("rejected: %q", errs)
			}
			if !profileIs(got.Profile, tc.profile) {
				t.Errorf("profile %+v, want %+v", got.Profile, tc.profile)
			}
			if !got.Options.Equal(tc.options) {
				t.Errorf("options %+v, want %+v", got.Options, tc.options)
			}
			if tc.wantWarning == "" && len(got.Warnings) > 0 || tc.wantWarning != "" && !slices.Contains(got.Warnings, tc.wantWarning) {
				t.Errorf("warnings %q, want %q", got.Warnings, tc.wantWarning)
			}
		})
	}
}

// TestProxyRouteData: the proxy group's wire form in the route push.
func TestProxyRouteData(t *testing.T) {
	m, _ := buildModelWithServices(t, []any{service("default", "web", port(80, "")),
		ingress("default", "a", rule("a.example.com", prefix("/", "web", 80)),
			annotate(AnnotationProxyBodySize, "2k", AnnotationProxyReadTimeout, "1", AnnotationProxyNextUpstreamTries, "0")),
		ingress("default", "b", rule("b.example.com", prefix("/", "web", 80)), annotate(AnnotationProxyConnectTimeout, "250ms",
			AnnotationLimitRate, "10", AnnotationConnectionProxyHeader, "close")),
	}, nil)
	for host, want := range map[Hostname]string{
		"a.example.com": `"upstream_options":[0,0,1000,0],"profile":"` + ProfileSettings{ClientMaxBodySize: "2048"}.Name() + `","body_limit":2048,"metrics":["default","a","web"]}`,
		"b.example.com": `"upstream_options":[250,0,0,-1],"limit_rate":[10240,0],"connection_header":"close","metrics":["default","b","web"]}`,
	} {
		s := m.Server(host)
		if s == nil {
			t.Fatalf("no server %s", host)
		}
		if wire := string(AppendRouteHostJSON(nil, s)); !strings.Contains(wire, want) {
			t.Errorf("%s: route push %s, want it to contain %s", host, wire, want)
		}
	}
}

// TestParseNginxUnits: sizes and times in NGINX's syntax.
func TestParseNginxUnits(t *testing.T) {
	sizes := map[string]int64{"0": 0, "1": 1, "8k": 8 << 10, "8K": 8 << 10, "1m": 1 << 20, "3G": 3 << 30, " 12 ": 12}
	for in, want := range sizes {
		if got, err := parseNginxSize(in); err != nil || got != want {
			t.Errorf("size %q: %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "k", "1 k", "1kb", "1t", "-1", "+1", "1.5", "0x10", "9223372036854775807k", "1m1k"} {
		if got, err := parseNginxSize(in); err == nil {
			t.Errorf("size %q: %d, want an error", in, got)
		}
	}
	times := map[string]time.Duration{"60": time.Minute, "1ms": time.Millisecond, "2s": 2 * time.Second, "2m": 2 * time.Minute,
		"1h 30m": 90 * time.Minute, "1h30m": 90 * time.Minute, "1d": 24 * time.Hour, "1w": 7 * 24 * time.Hour, "1M": 30 * 24 * time.Hour,
		"1y": 365 * 24 * time.Hour, "31536000": 365 * 24 * time.Hour}
	for in, want := range times {
		if got, err := parseNginxTime(in); err != nil || got != want {
			t.Errorf("time %q: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "s", "1x", "1.5s", "-1s", "1 s", "31536001", "1y 1s", "2y", "60s;"} {
		if got, err := parseNginxTime(in); err == nil {
			t.Errorf("time %q: %v, want an error", in, got)
		}
	}
}
