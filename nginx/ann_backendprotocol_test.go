package nginx

import (
	"fmt"
	"slices"
	"testing"
)

// TestAnnotationBackendProtocol: backend-protocol -> the translation's profile, or -> the exact rejection;
// custom-http-errors -> the same profile, combined.
func TestAnnotationBackendProtocol(t *testing.T) {
	const notSupported = `metadata.annotations[nginx.ingress.kubernetes.io/backend-protocol]: %s is not supported (HTTP, HTTPS, AUTO_HTTP, GRPC, GRPCS and H2C are); the Ingress is not served rather than served with a protocol its backends do not speak`
	const notProtocol = `metadata.annotations[nginx.ingress.kubernetes.io/backend-protocol]: %s is not a backend protocol (want HTTP, HTTPS, AUTO_HTTP, GRPC, GRPCS or H2C)`
	tests := map[string]struct {
		kv      []string
		want    ProfileSettings
		wantErr string
	}{
		"no annotation":                       {},
		"HTTP is the default":                 {kv: []string{AnnotationBackendProtocol, "HTTP"}},
		"https, any case":                     {kv: []string{AnnotationBackendProtocol, "https"}, want: ProfileSettings{BackendProtocol: "HTTPS"}},
		"GRPC":                                {kv: []string{AnnotationBackendProtocol, "GRPC"}, want: ProfileSettings{BackendProtocol: "GRPC"}},
		"GRPCS, spaces trimmed":               {kv: []string{AnnotationBackendProtocol, " GRPCS\n"}, want: ProfileSettings{BackendProtocol: "GRPCS"}},
		"with custom errors: one profile":     {kv: []string{AnnotationBackendProtocol, "GRPC", AnnotationCustomHTTPErrors, "503,404"}, want: ProfileSettings{BackendProtocol: "GRPC", CustomHTTPErrors: "404,503"}},
		"FCGI is not supported":               {kv: []string{AnnotationBackendProtocol, "FCGI"}, wantErr: fmt.Sprintf(notSupported, `"FCGI"`)},
		"h2c":                                 {kv: []string{AnnotationBackendProtocol, "h2c"}, want: ProfileSettings{BackendProtocol: "H2C"}},
		"auto_http":                           {kv: []string{AnnotationBackendProtocol, "Auto_HTTP"}, want: ProfileSettings{BackendProtocol: "AUTO_HTTP"}},
		"not a protocol":                      {kv: []string{AnnotationBackendProtocol, "SPDY"}, wantErr: fmt.Sprintf(notProtocol, `"SPDY"`)},
		"injection attempt is not a protocol": {kv: []string{AnnotationBackendProtocol, "HTTPS; }"}, wantErr: fmt.Sprintf(notProtocol, `"HTTPS; }"`)},
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
			if !profileIs(got.Profile, tc.want) {
				t.Errorf("profile %+v, want %+v", got.Profile, tc.want)
			}
		})
	}
}
