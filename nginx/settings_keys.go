package nginx

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The ConfigMap keys this controller reads, grouped as in ingress-nginx's documentation. Defaults are
// ingress-nginx's (docs/user-guide/nginx-configuration/configmap.md of its last release).

const (
	boolValues   = "`true` or `false`"
	secondsValue = "a number of seconds, or a time in NGINX's syntax (`90s`, `5m`)"
)

// sslProtocols are the TLS versions ssl-protocols accepts: Debian's OpenSSL 3 has no SSLv2 or SSLv3.
var sslProtocols = map[string]bool{"TLSv1": true, "TLSv1.1": true, "TLSv1.2": true, "TLSv1.3": true}

// cipherListChars are the characters of OpenSSL cipher lists.
const cipherListChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-+:!@=._"

// defaultGzipTypes is ingress-nginx's gzip-types.
const defaultGzipTypes = "application/atom+xml application/javascript application/x-javascript application/json application/rss+xml " +
	"application/vnd.ms-fontobject application/x-font-ttf application/x-web-app-manifest+json application/xhtml+xml application/xml " +
	"font/opentype image/svg+xml image/x-icon text/css text/javascript text/plain text/x-component"

func init() {
	registerSettings(
		// Workers and logs: these replace the flag of the same meaning when the ConfigMap sets them.
		settingKey{Name: "worker-processes", Overlay: true, Values: "`auto` or a number from 1 to 1024",
			Doc: "NGINX's worker_processes. When absent, `--worker-processes` applies (default `auto`, as ingress-nginx's default: the number of CPUs).",
			set: func(s *Settings, v string) error {
				if v == "auto" {
					s.WorkerProcesses = v
					return nil
				}
				n, err := parseSettingInt(v, 1, 1024)
				if err != nil {
					return fmt.Errorf("want auto or a whole number from 1 to 1024")
				}
				s.WorkerProcesses = strconv.Itoa(n)
				return nil
			}},
		settingKey{Name: "max-worker-connections", Overlay: true, Default: "16384", Values: "a number from 0 to 1048576",
			Doc:        "NGINX's worker_connections.",
			Difference: "`0` keeps 16384; ingress-nginx then took max-worker-open-files, which does not exist here.",
			set:        intField(func(s *Settings) *int { return &s.MaxWorkerConnections }, 0, 1<<20)},
		settingKey{Name: "worker-shutdown-timeout", Overlay: true, Default: "240s", Values: secondsValue + ", from 1s to 24h",
			Doc: "How long old workers finish their requests after a reload (worker_shutdown_timeout).",
			set: secondsField(func(s *Settings) *time.Duration { return &s.WorkerShutdownTimeout }, time.Second, 24*time.Hour)},
		settingKey{Name: "error-log-level", Overlay: true, Default: "notice", Values: "`debug`, `info`, `notice`, `warn`, `error`, `crit`, `alert` or `emerg`",
			Doc: "The level of NGINX's error log.",
			set: func(s *Settings, v string) error {
				if !logLevels[v] {
					return fmt.Errorf("want one of debug, info, notice, warn, error, crit, alert, emerg")
				}
				s.ErrorLogLevel = v
				return nil
			}},
		settingKey{Name: "lua-shared-dicts", Overlay: true, Values: "`name: size` pairs separated by commas; sizes in MB (a number, optionally followed by `m`/`M`), 1 to 128",
			Doc: "`configuration_data` sizes the shared memory of endpoint lists (`--endpoints-dict-size`) and `certificate_data` that of " +
				"certificates (`--certificates-dict-size`); the flags apply when absent.",
			Difference: "Other dict names of ingress-nginx are accepted and ignored: this controller's Lua code uses its own dicts, each sized by a flag.",
			set: func(s *Settings, v string) error {
				s.EndpointsDictMB, s.CertificatesDictMB = 0, 0
				for _, pair := range strings.Split(v, ",") {
					if strings.TrimSpace(pair) == "" {
						continue
					}
					name, size, ok := strings.Cut(pair, ":")
					if !ok {
						return fmt.Errorf("want name: size pairs, got %s", quoteValue(pair))
					}
					size = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(size), "m"), "M")
					mb, err := parseSettingInt(size, 1, 128)
					if err != nil {
						return fmt.Errorf("%s: %v (MB)", strings.TrimSpace(name), err)
					}
					switch strings.TrimSpace(name) {
					case "configuration_data":
						s.EndpointsDictMB = mb
					case "certificate_data":
						s.CertificatesDictMB = mb
					}
				}
				return nil
			}},

		// Client side.
		settingKey{Name: "server-tokens", Default: "false", Values: boolValues,
			Doc: "Whether NGINX names its version in the Server header and error pages.",
			set: boolField(func(s *Settings) *bool { return &s.ServerTokens })},
		settingKey{Name: "keep-alive", Default: "75", Values: secondsValue + ", from 0 (no keep-alive) to 1h",
			Doc: "How long an idle client connection stays open (keepalive_timeout).",
			set: secondsField(func(s *Settings) *time.Duration { return &s.KeepAlive }, 0, time.Hour)},
		settingKey{Name: "keep-alive-requests", Default: "1000", Values: "a number from 1 to 1000000",
			Doc: "Requests one client connection may carry (keepalive_requests).",
			set: intField(func(s *Settings) *int { return &s.KeepAliveRequests }, 1, 1000000)},
		settingKey{Name: "client-header-buffer-size", Default: "1k", Values: "a size from 1k to 64k",
			Doc: "client_header_buffer_size.",
			set: sizeField(func(s *Settings) *int64 { return &s.ClientHeaderBufferSize }, 1<<10, 64<<10)},
		settingKey{Name: "client-header-timeout", Default: "60", Values: secondsValue + ", from 1s to 1h",
			Doc: "client_header_timeout.",
			set: secondsField(func(s *Settings) *time.Duration { return &s.ClientHeaderTimeout }, time.Second, time.Hour)},
		settingKey{Name: "client-body-buffer-size", Default: "8k", Values: "a size from 1k to 64m",
			Doc: "client_body_buffer_size: request bodies larger than this are buffered in a file.",
			set: sizeField(func(s *Settings) *int64 { return &s.ClientBodyBufferSize }, 1<<10, 64<<20)},
		settingKey{Name: "client-body-timeout", Default: "60", Values: secondsValue + ", from 1s to 1h",
			Doc: "client_body_timeout.",
			set: secondsField(func(s *Settings) *time.Duration { return &s.ClientBodyTimeout }, time.Second, time.Hour)},
		settingKey{Name: "large-client-header-buffers", Default: "4 8k", Values: "a number from 1 to 64 and a size from 1k to 1m, separated by a space",
			Doc: "large_client_header_buffers: the buffers for long request lines and headers.",
			set: func(s *Settings, v string) error {
				f := strings.Fields(v)
				if len(f) != 2 {
					return fmt.Errorf("want a number and a size, such as 4 8k")
				}
				n, err := parseSettingInt(f[0], 1, 64)
				if err != nil {
					return err
				}
				size, err := parseSettingSize(f[1], 1<<10, 1<<20)
				if err != nil {
					return err
				}
				s.LargeClientHeaderBuffers, s.LargeClientHeaderBufferLen = n, size
				return nil
			}},
		settingKey{Name: "enable-underscores-in-headers", Default: "false", Values: boolValues,
			Doc: "Whether request header names may contain underscores (underscores_in_headers).",
			set: boolField(func(s *Settings) *bool { return &s.EnableUnderscoresInHeaders })},
		settingKey{Name: "ignore-invalid-headers", Default: "true", Values: boolValues,
			Doc: "Whether NGINX drops request headers with invalid names (ignore_invalid_headers).",
			set: boolField(func(s *Settings) *bool { return &s.IgnoreInvalidHeaders })},
		settingKey{Name: "default-type", Default: "text/html", Values: "a MIME type such as `text/plain`",
			Doc: "The Content-Type of responses that have none (default_type).",
			set: func(s *Settings, v string) error {
				if !isMIMEType(v) {
					return fmt.Errorf("want a MIME type such as text/html")
				}
				s.DefaultType = v
				return nil
			}},
		settingKey{Name: "variables-hash-bucket-size", Default: "256", Values: "a power of two from 32 to 4096",
			Doc: "variables_hash_bucket_size.",
			set: powerOfTwoField(func(s *Settings) *int { return &s.VariablesHashBucketSize }, 32, 4096)},
		settingKey{Name: "variables-hash-max-size", Default: "2048", Values: "a number from 512 to 65536",
			Doc: "variables_hash_max_size.",
			set: intField(func(s *Settings) *int { return &s.VariablesHashMaxSize }, 512, 65536)},
		settingKey{Name: "map-hash-bucket-size", Default: "64", Values: "a power of two from 32 to 4096",
			Doc: "map_hash_bucket_size.",
			set: powerOfTwoField(func(s *Settings) *int { return &s.MapHashBucketSize }, 32, 4096)},

		// Compression.
		settingKey{Name: "use-gzip", Default: "false", Values: boolValues,
			Doc: "Compress responses of the gzip-types with gzip.",
			set: boolField(func(s *Settings) *bool { return &s.UseGzip })},
		settingKey{Name: "gzip-level", Default: "1", Values: "a number from 1 to 9",
			Doc: "gzip_comp_level.",
			set: intField(func(s *Settings) *int { return &s.GzipLevel }, 1, 9)},
		settingKey{Name: "gzip-min-length", Default: "256", Values: "a number of bytes from 0 to 1073741824",
			Doc: "Responses shorter than this (by Content-Length) are not compressed (gzip_min_length).",
			set: intField(func(s *Settings) *int { return &s.GzipMinLength }, 0, 1<<30)},
		settingKey{Name: "gzip-types", Default: defaultGzipTypes, Values: "MIME types separated by spaces (at most 64), or `*`",
			Doc: "The Content-Types that are compressed, besides text/html (gzip_types).",
			set: settingsField(func(s *Settings) *[]string { return &s.GzipTypes }, func(v string) ([]string, error) {
				return wordList(v, 64, func(w string) bool { return w == "*" || isMIMEType(w) }, "MIME types")
			})},
		settingKey{Name: "gzip-disable", Values: "words separated by spaces or commas (at most 16): `msie6` or a User-Agent pattern of letters, digits and `.-_/+`",
			Doc:        "User-Agents that get no compressed responses (gzip_disable).",
			Difference: "Patterns are limited to letters, digits and `.-_/+`: regular expression syntax is not accepted.",
			set: settingsField(func(s *Settings) *[]string { return &s.GzipDisable }, func(v string) ([]string, error) {
				return wordList(v, 16, isUserAgentWord, "patterns")
			})},

		// HSTS.
		settingKey{Name: "hsts", Default: "true", Values: boolValues,
			Doc: "Send Strict-Transport-Security on every HTTPS response the router answers.",
			Difference: "Sent on HTTPS responses of every host, as ingress-nginx's Lua code did in effect (its check for a host's own certificate " +
				"always passed); the header of a response from the backend is replaced.",
			set: boolField(func(s *Settings) *bool { return &s.HSTS })},
		settingKey{Name: "hsts-max-age", Default: "31536000", Values: "a number of seconds from 0 to 1000000000",
			Doc: "The header's max-age.",
			set: settingsField(func(s *Settings) *int64 { return &s.HSTSMaxAge }, func(v string) (int64, error) {
				n, err := parseSettingInt(v, 0, 1000000000)
				return int64(n), err
			})},
		settingKey{Name: "hsts-include-subdomains", Default: "true", Values: boolValues,
			Doc: "Add includeSubDomains to the header.",
			set: boolField(func(s *Settings) *bool { return &s.HSTSIncludeSubdomains })},
		settingKey{Name: "hsts-preload", Default: "false", Values: boolValues,
			Doc: "Add preload to the header.",
			set: boolField(func(s *Settings) *bool { return &s.HSTSPreload })},

		// TLS.
		settingKey{Name: "ssl-protocols", Default: "TLSv1.2 TLSv1.3", Values: "`TLSv1`, `TLSv1.1`, `TLSv1.2`, `TLSv1.3`, separated by spaces",
			Doc:        "The TLS versions NGINX accepts from clients.",
			Difference: "SSLv2 and SSLv3 are refused: Debian's OpenSSL does not have them.",
			set: settingsField(func(s *Settings) *[]string { return &s.SSLProtocols }, func(v string) ([]string, error) {
				l, err := wordList(v, 4, func(w string) bool { return sslProtocols[w] }, "TLS versions")
				if err == nil && len(l) == 0 {
					err = fmt.Errorf("want at least one TLS version")
				}
				return l, err
			})},
		settingKey{Name: "ssl-ciphers", Default: "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:" +
			"ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:DHE-RSA-AES256-GCM-SHA384:DHE-RSA-AES128-GCM-SHA256",
			Values: "an OpenSSL cipher list of letters, digits and `-+:!@=.`, at most 2048 bytes",
			Doc: "The TLS 1.2 ciphers NGINX offers (ssl_ciphers). A list in which OpenSSL finds no cipher makes NGINX refuse the configuration: " +
				"the controller keeps serving the previous one and reports the failed reload.",
			set: func(s *Settings, v string) error {
				if v == "" || len(v) > 2048 || strings.Trim(v, cipherListChars) != "" {
					return fmt.Errorf("want an OpenSSL cipher list (letters, digits and -+:!@=.)")
				}
				s.SSLCiphers = v
				return nil
			}},
		settingKey{Name: "ssl-ecdh-curve", Default: "auto", Values: "`auto` or curve names separated by `:`",
			Doc: "ssl_ecdh_curve.",
			set: func(s *Settings, v string) error {
				if !isSettingToken(v) || strings.ContainsAny(v, "!@=*+/") {
					return fmt.Errorf("want auto or curve names separated by colons")
				}
				s.SSLECDHCurve = v
				return nil
			}},
		settingKey{Name: "ssl-session-cache", Default: "true", Values: boolValues,
			Doc:        "Keep TLS sessions in a shared cache so clients can resume them.",
			Difference: "Off, whatever the key says, while a host verifies client certificates (auth-tls-secret): see docs/annotations.md.",
			set:        boolField(func(s *Settings) *bool { return &s.SSLSessionCache })},
		settingKey{Name: "ssl-session-cache-size", Default: "10m", Values: "a size from 1m to 1g",
			Doc: "The size of that cache (about 4,000 sessions per MB).",
			set: sizeField(func(s *Settings) *int64 { return &s.SSLSessionCacheSize }, 1<<20, 1<<30)},
		settingKey{Name: "ssl-session-timeout", Default: "10m", Values: "a time from 1s to 7d in NGINX's syntax",
			Doc: "How long a session can be resumed (ssl_session_timeout).",
			set: secondsField(func(s *Settings) *time.Duration { return &s.SSLSessionTimeout }, time.Second, 7*24*time.Hour)},
		settingKey{Name: "ssl-session-tickets", Default: "false", Values: boolValues,
			Doc: "Resume sessions through session tickets (ssl_session_tickets); the ticket key is NGINX's own, per start.",
			set: boolField(func(s *Settings) *bool { return &s.SSLSessionTickets })},
		settingKey{Name: "ssl-buffer-size", Default: "4k", Values: "a size from 1k to 16k",
			Doc: "ssl_buffer_size.",
			set: sizeField(func(s *Settings) *int64 { return &s.SSLBufferSize }, 1<<10, 16<<10)},
		settingKey{Name: "use-http2", Default: "true", Values: boolValues,
			Doc: "Offer HTTP/2 on the HTTPS port.",
			set: boolField(func(s *Settings) *bool { return &s.UseHTTP2 })},
		settingKey{Name: "http2-max-concurrent-streams", Default: "128", Values: "a number from 1 to 65535",
			Doc: "http2_max_concurrent_streams.",
			set: intField(func(s *Settings) *int { return &s.HTTP2MaxConcurrent }, 1, 65535)},
		settingKey{Name: "ssl-redirect", Default: "true", Values: boolValues,
			Doc: "The default of the ssl-redirect annotation: plain HTTP to a host with TLS gets a 308 to HTTPS.",
			set: boolField(func(s *Settings) *bool { return &s.SSLRedirect })},
		settingKey{Name: "force-ssl-redirect", Default: "false", Values: boolValues,
			Doc: "The default of the force-ssl-redirect annotation: plain HTTP gets a 308 to HTTPS even on hosts without TLS.",
			set: boolField(func(s *Settings) *bool { return &s.ForceSSLRedirect })},

		// Upstreams.
		settingKey{Name: "upstream-keepalive-connections", Overlay: true, Default: "320", Values: "a number from 1 to 100000",
			Doc: "Idle connections to backends each worker keeps per upstream block (keepalive).",
			set: intField(func(s *Settings) *int { return &s.UpstreamKeepalive }, 1, 100000)},
		settingKey{Name: "upstream-keepalive-time", Default: "1h", Values: "a time from 1s to 7d in NGINX's syntax",
			Doc: "How long one backend connection may be reused (keepalive_time).",
			set: secondsField(func(s *Settings) *time.Duration { return &s.UpstreamKeepaliveTime }, time.Second, 7*24*time.Hour)},
		settingKey{Name: "upstream-keepalive-timeout", Default: "60", Values: secondsValue + ", from 1s to 1h",
			Doc: "How long an idle backend connection stays open (keepalive_timeout of the upstream blocks).",
			set: secondsField(func(s *Settings) *time.Duration { return &s.UpstreamKeepaliveTimeout }, time.Second, time.Hour)},
		settingKey{Name: "upstream-keepalive-requests", Default: "10000", Values: "a number from 1 to 10000000",
			Doc: "Requests one backend connection may carry (keepalive_requests of the upstream blocks).",
			set: intField(func(s *Settings) *int { return &s.UpstreamKeepaliveRequests }, 1, 10000000)},

		// Proxy defaults: the annotations of the same names override them per Ingress.
		settingKey{Name: "proxy-connect-timeout", Overlay: true, Default: "5", Values: secondsValue + ", from 1ms to 1h",
			Doc: "The default of the proxy-connect-timeout annotation.",
			set: secondsField(func(s *Settings) *time.Duration { return &s.ProxyConnectTimeout }, time.Millisecond, time.Hour)},
		settingKey{Name: "proxy-read-timeout", Overlay: true, Default: "60", Values: secondsValue + ", from 1ms to 7d",
			Doc: "The default of the proxy-read-timeout annotation.",
			set: secondsField(func(s *Settings) *time.Duration { return &s.ProxyReadTimeout }, time.Millisecond, 7*24*time.Hour)},
		settingKey{Name: "proxy-send-timeout", Overlay: true, Default: "60", Values: secondsValue + ", from 1ms to 7d",
			Doc: "The default of the proxy-send-timeout annotation.",
			set: secondsField(func(s *Settings) *time.Duration { return &s.ProxySendTimeout }, time.Millisecond, 7*24*time.Hour)},
		settingKey{Name: "proxy-body-size", Overlay: true, Default: "1m", Values: "a size (`0`: no limit)",
			Doc: "The default of the proxy-body-size annotation: larger request bodies get 413.",
			set: settingsField(func(s *Settings) *int64 { return &s.ProxyBodySize }, func(v string) (int64, error) {
				return parseSettingSize(v, 0, 1<<40)
			})},
		settingKey{Name: "proxy-buffering", Default: "off", Values: "`on` or `off`",
			Doc: "The default of the proxy-buffering annotation.",
			set: onOffField(func(s *Settings) *bool { return &s.ProxyBuffering })},
		settingKey{Name: "proxy-request-buffering", Default: "on", Values: "`on` or `off`",
			Doc: "The default of the proxy-request-buffering annotation.",
			set: onOffField(func(s *Settings) *bool { return &s.ProxyRequestBuffering })},
		settingKey{Name: "proxy-buffer-size", Default: "4k", Values: "a size from 1k to 1m",
			Doc: "The default of the proxy-buffer-size annotation.",
			set: sizeField(func(s *Settings) *int64 { return &s.ProxyBufferSize }, 1<<10, 1<<20)},
		settingKey{Name: "proxy-buffers-number", Default: "4", Values: "a number from 1 to 512",
			Doc: "The default of the proxy-buffers-number annotation.",
			set: intField(func(s *Settings) *int { return &s.ProxyBuffersNumber }, 1, 512)},
		settingKey{Name: "proxy-busy-buffers-size", Values: "a size from 1k to 512m; empty leaves NGINX's default (two buffers)",
			Doc: "proxy_busy_buffers_size; it must be at least proxy-buffer-size and less than all buffers but one, or NGINX refuses the configuration.",
			set: func(s *Settings, v string) error {
				if v == "" {
					s.ProxyBusyBuffersSize = 0
					return nil
				}
				n, err := parseSettingSize(v, 1<<10, 512<<20)
				s.ProxyBusyBuffersSize = n
				return err
			}},
		settingKey{Name: "retry-non-idempotent", Default: "false", Values: boolValues,
			Doc: "Also retry POST, LOCK and PATCH requests on another endpoint after an error (proxy_next_upstream non_idempotent).",
			set: boolField(func(s *Settings) *bool { return &s.RetryNonIdempotent })},

		// Accepted for compatibility.
		settingKey{Name: "allow-snippet-annotations", Default: "false", Values: boolValues,
			Doc: "Accepted and without effect: snippet annotations (configuration-snippet, server-snippet, auth-snippet, ...) reject their Ingress " +
				"whatever this says, because a snippet is configuration text any Ingress author could use to read other tenants' Secrets " +
				"(CVE-2021-25742, CVE-2025-1974). docs/migration.md shows what replaces common snippets.",
			set: func(_ *Settings, v string) error {
				_, err := strconv.ParseBool(v)
				if err != nil {
					return fmt.Errorf("want true or false")
				}
				return nil
			}},
		settingKey{Name: "annotations-risk-level", Default: "High", Values: "`Critical`, `High`, `Medium` or `Low`",
			Doc: "Accepted and without effect: every supported annotation is validated so that none can inject configuration, and the " +
				"annotations ingress-nginx rated Critical (snippets) are refused at every level.",
			set: func(_ *Settings, v string) error {
				switch v {
				case "Critical", "High", "Medium", "Low":
					return nil
				}
				return fmt.Errorf("want Critical, High, Medium or Low")
			}},
	)
}

func onOffField(field func(*Settings) *bool) func(*Settings, string) error {
	return settingsField(field, func(v string) (bool, error) {
		switch v {
		case "on":
			return true, nil
		case "off":
			return false, nil
		}
		return false, fmt.Errorf("want on or off")
	})
}

func powerOfTwoField(field func(*Settings) *int, lo, hi int) func(*Settings, string) error {
	return settingsField(field, func(v string) (int, error) {
		n, err := parseSettingInt(v, lo, hi)
		if err != nil || n&(n-1) != 0 {
			return 0, fmt.Errorf("want a power of two from %d to %d", lo, hi)
		}
		return n, nil
	})
}

// isMIMEType reports whether v is type/subtype of letters, digits and "+-.".
func isMIMEType(v string) bool {
	typ, sub, ok := strings.Cut(v, "/")
	return ok && isMIMEWord(typ) && isMIMEWord(sub)
}

func isMIMEWord(w string) bool {
	if w == "" || len(w) > 64 {
		return false
	}
	for i := 0; i < len(w); i++ {
		c := w[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

func isUserAgentWord(w string) bool {
	if w == "" || len(w) > 64 {
		return false
	}
	for i := 0; i < len(w); i++ {
		c := w[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(".-_/+", c) >= 0) {
			return false
		}
	}
	return true
}
