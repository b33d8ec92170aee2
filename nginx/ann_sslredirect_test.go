package nginx

import "testing"

// TestAnnotationSSLRedirect: annotations -> the translation's SSLRedirect, or -> the exact rejection.
func TestAnnotationSSLRedirect(t *testing.T) {
	const notBool = `metadata.annotations[nginx.ingress.kubernetes.io/ssl-redirect]: %s is not a boolean (want "true" or "false")`
	redirectsOff := DefaultTranslateOptions()
	redirectsOff.SSLRedirect = false
	tests := map[string]struct {
		value        *string // nil: no annotation
		opts         *TranslateOptions
		wantRedirect bool
		wantErr      string
	}{
		"no annotation: the controller's default, on":  {wantRedirect: true},
		"no annotation: the controller's default, off": {opts: &redirectsOff},
		"false":                           {value: ptr("false")},
		"true wins over a default of off": {value: ptr("true"), opts: &redirectsOff, wantRedirect: true},
		"False, 0 and f are ParseBool spellings of off": {value: ptr("F")},
		"spaces around the value are trimmed":           {value: ptr(" false\t")},
		"True":                                          {value: ptr("True"), wantRedirect: true},
		"not a boolean":                                 {value: ptr("sometimes"), wantErr: `"sometimes"`},
		"a typo of false is not guessed":                {value: ptr("flase"), wantErr: `"flase"`},
		"empty":                                         {value: ptr(""), wantErr: `""`},
		"yes is not a boolean here (nor in ingress-nginx)": {value: ptr("yes"), wantErr: `"yes"`},
		"injection attempt": {value: ptr("false;\n}\x00$host"), wantErr: `"false;\n}\x00$host"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			opts := DefaultTranslateOptions()
			if tc.opts != nil {
				opts = *tc.opts
			}
			var kv []string
			if tc.value != nil {
				kv = []string{AnnotationSSLRedirect, *tc.value}
			}
			got, errs := translateAnnotated(t, opts, kv...)
			if tc.wantErr != "" {
				same(t, "rejection", errs, []string{fmtErr(notBool, tc.wantErr)})
				return
			}
			if got == nil {
				t.Fatalf("rejected: %q", errs)
			}
			if got.SSLRedirect != tc.wantRedirect {
				t.Errorf("SSLRedirect = %v, want %v", got.SSLRedirect, tc.wantRedirect)
			}
			same(t, "warnings", got.Warnings, []string(nil))
		})
	}
}
