package nginx

import (
	"slices"
	"testing"
)

// TestAnnotationProxyBuffers: the proxy buffering group's annotations -> the translation's profile, or
// a Warning for an ignored value (with the rest kept).
func TestAnnotationProxyBuffers(t *testing.T) {
	p := IngressNginxPrefix
	tests := map[string]struct {
		kv          []string
		want        ProfileSettings
		wantWarning string
	}{
		"no annotation":                       {},
		"buffering on":                        {kv: []string{AnnotationProxyBuffering, "On"}, want: ProfileSettings{ProxyBuffering: "on"}},
		"buffering off is the default":        {kv: []string{AnnotationProxyBuffering, "off"}},
		"request buffering off":               {kv: []string{AnnotationProxyRequestBuffering, " off\n"}, want: ProfileSettings{ProxyRequestBuffering: "off"}},
		"request buffering on is the default": {kv: []string{AnnotationProxyRequestBuffering, "on"}},
		"buffering yes is ignored": {kv: []string{AnnotationProxyBuffering, "yes"},
			wantWarning: "metadata.annotations[" + p + `proxy-buffering]: "yes" is not on or off; ignored`},
		"HTTP/1.0":                     {kv: []string{AnnotationProxyHTTPVersion, "1.0"}, want: ProfileSettings{ProxyHTTPVersion: "1.0"}},
		"HTTP/1.1 is the default":      {kv: []string{AnnotationProxyHTTPVersion, "1.1"}},
		"HTTP/2 is ignored":            {kv: []string{AnnotationProxyHTTPVersion, "2"}, wantWarning: "metadata.annotations[" + p + `proxy-http-version]: "2" is not 1.0 or 1.1; ignored`},
		"buffer size: both directives": {kv: []string{AnnotationProxyBufferSize, "16k"}, want: ProfileSettings{ProxyBufferSize: "16384"}},
		"buffer size over 16m is ignored": {kv: []string{AnnotationProxyBufferSize, "17m"},
			wantWarning: "metadata.annotations[" + p + `proxy-buffer-size]: "17m" is not a size from 1 byte to 16m; ignored`},
		"buffers number": {kv: []string{AnnotationProxyBuffersNumber, "8"}, want: ProfileSettings{ProxyBuffersNumber: "8"}},
		"2 buffers leave no room for the default busy buffers": {kv: []string{AnnotationProxyBuffersNumber, "2"},
			wantWarning: "metadata.annotations[" + p + "proxy-buffers-number]: 2 buffers leave no room for NGINX's busy buffers (two buffers; set " +
				p + "proxy-busy-buffers-size to one buffer for fewer than 3 buffers); ignored"},
		"2 buffers with one busy": {kv: []string{AnnotationProxyBuffersNumber, "2", AnnotationProxyBusyBuffersSize, "4k"},
			want: ProfileSettings{ProxyBuffersNumber: "2", ProxyBusyBuffersSize: "4096"}},
		"1 buffer is ignored": {kv: []string{AnnotationProxyBuffersNumber, "1"},
			wantWarning: "metadata.annotations[" + p + `proxy-buffers-number]: "1" is not a whole number from 2 to 256; ignored`},
		"busy buffers above all buffers but one are ignored": {kv: []string{AnnotationProxyBufferSize, "8k", AnnotationProxyBusyBuffersSize, "32k"},
			want: ProfileSettings{ProxyBufferSize: "8192"},
			wantWarning: "metadata.annotations[" + p + `proxy-busy-buffers-size]: "32k" is not from the buffer size (8192 bytes) to the size of all ` +
				"buffers but one (24576 bytes), which NGINX requires; ignored"},
		"busy buffers below one buffer are ignored": {kv: []string{AnnotationProxyBusyBuffersSize, "1k"},
			wantWarning: "metadata.annotations[" + p + `proxy-busy-buffers-size]: "1k" is not from the buffer size (4096 bytes) to the size of all ` +
				"buffers but one (12288 bytes), which NGINX requires; ignored"},
		"temp files off": {kv: []string{AnnotationProxyMaxTempFileSize, "0"}, want: ProfileSettings{ProxyMaxTempFileSize: "0"}},
		"temp files 2g":  {kv: []string{AnnotationProxyMaxTempFileSize, "2g"}, want: ProfileSettings{ProxyMaxTempFileSize: "2147483648"}},
		"temp files below one buffer are ignored": {kv: []string{AnnotationProxyBufferSize, "8k", AnnotationProxyMaxTempFileSize, "4k"},
			want: ProfileSettings{ProxyBufferSize: "8192"},
			wantWarning: "metadata.annotations[" + p + `proxy-max-temp-file-size]: "4k" is neither 0 nor at least the buffer size (8192 bytes), ` +
				"which NGINX requires; ignored"},
		"next upstream: each once, in order": {kv: []string{AnnotationProxyNextUpstream, "http_503  error error non_idempotent"},
			want: ProfileSettings{ProxyNextUpstream: "error http_503 non_idempotent"}},
		"next upstream off wins":             {kv: []string{AnnotationProxyNextUpstream, "error off"}, want: ProfileSettings{ProxyNextUpstream: "off"}},
		"next upstream default asks nothing": {kv: []string{AnnotationProxyNextUpstream, "timeout error"}},
		"next upstream unknown condition is ignored": {kv: []string{AnnotationProxyNextUpstream, "error http_418"},
			wantWarning: "metadata.annotations[" + p + `proxy-next-upstream]: "error http_418" is not a list of proxy_next_upstream conditions ` +
				"(error, timeout, invalid_header, http_500, http_502, http_503, http_504, http_403, http_404, http_429, non_idempotent, off); ignored"},
		"next upstream timeout in seconds":       {kv: []string{AnnotationProxyNextUpstreamTimeout, "5"}, want: ProfileSettings{ProxyNextUpstreamTimeout: "5000ms"}},
		"next upstream timeout 0 is the default": {kv: []string{AnnotationProxyNextUpstreamTimeout, "0"}},
		"next upstream timeout in NGINX units":   {kv: []string{AnnotationProxyNextUpstreamTimeout, "1500ms"}, want: ProfileSettings{ProxyNextUpstreamTimeout: "1500ms"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, errs := translateAnnotated(t, DefaultTranslateOptions(), tc.kv...)
			if got == nil {
				t.Fatalf("rejected: %q", errs)
			}
			if !profileIs(got.Profile, tc.want) {
				t.Errorf("profile %+v, want %+v", got.Profile, tc.want)
			}
			if tc.wantWarning == "" && len(got.Warnings) > 0 || tc.wantWarning != "" && !slices.Contains(got.Warnings, tc.wantWarning) {
				t.Errorf("warnings %q, want %q", got.Warnings, tc.wantWarning)
			}
		})
	}
}

// TestProxyBufferDirectives: what a profile of the group writes, for HTTP and for gRPC backends.
func TestProxyBufferDirectives(t *testing.T) {
	all := ProfileSettings{ProxyBuffering: "on", ProxyRequestBuffering: "off", ProxyBufferSize: "8192", ProxyBusyBuffersSize: "8192",
		ProxyMaxTempFileSize: "0", ProxyHTTPVersion: "1.0", ProxyNextUpstream: "error http_503", ProxyNextUpstreamTimeout: "1500ms"}
	want := []string{"proxy_buffering on", "proxy_request_buffering off", "proxy_buffer_size 8192", "proxy_buffers 4 8192",
		"proxy_busy_buffers_size 8192", "proxy_max_temp_file_size 0", "proxy_http_version 1.0", "proxy_next_upstream error http_503",
		"proxy_next_upstream_timeout 1500ms"}
	if got := proxyBufferDirectives(all, nil); !slices.Equal(got, want) {
		t.Errorf("HTTP:\n got %q\nwant %q", got, want)
	}
	all.BackendProtocol = "GRPC"
	want = []string{"grpc_buffer_size 8192", "grpc_next_upstream error http_503", "grpc_next_upstream_timeout 1500ms"}
	if got := proxyBufferDirectives(all, nil); !slices.Equal(got, want) {
		t.Errorf("gRPC:\n got %q\nwant %q", got, want)
	}
	if got := proxyBufferDirectives(ProfileSettings{ProxyBuffersNumber: "8"}, nil); !slices.Equal(got, []string{"proxy_buffer_size 4096", "proxy_buffers 8 4096"}) {
		t.Errorf("a number of buffers alone: %q, want the default size with it", got)
	}
}
