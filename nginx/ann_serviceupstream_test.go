package nginx

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestAnnotationServiceUpstream: service-upstream -> the routes name the Service's cluster-IP upstream,
// the same one the endpoint lane (UpstreamsOf) publishes; false or absent -> the Pods' upstream; an
// invalid value -> the rejection.
func TestAnnotationServiceUpstream(t *testing.T) {
	pods := NewUpstream(nn("default", "web"), intstr.FromInt32(80))
	vip := NewServiceIPUpstream(nn("default", "web"), intstr.FromInt32(80))
	if vip.Name == pods.Name || !vip.ServiceIP || pods.ServiceIP {
		t.Fatalf("upstreams %+v and %+v must differ", vip, pods)
	}
	tests := map[string]struct {
		kv      []string
		want    Upstream
		wantErr string
	}{
		"absent":        {want: pods},
		"false":         {kv: []string{AnnotationServiceUpstream, "false"}, want: pods},
		"true":          {kv: []string{AnnotationServiceUpstream, "true"}, want: vip},
		"True, spaced":  {kv: []string{AnnotationServiceUpstream, " True "}, want: vip},
		"not a boolean": {kv: []string{AnnotationServiceUpstream, "yes"}, wantErr: `metadata.annotations[nginx.ingress.kubernetes.io/service-upstream]: "yes" is not a boolean (want "true" or "false")`},
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
			for _, r := range got.Routes {
				if r.Upstream != tc.want.Name {
					t.Errorf("route %s%s -> %s, want %s", r.Host, r.Path, r.Upstream, tc.want.Name)
				}
			}
			ing := ingress("default", "a", rule("a.example.com", prefix("/", "web", 80)), annotate(tc.kv...))
			if lane := UpstreamsOf(ing); len(lane) != 1 || lane[0] != tc.want {
				t.Errorf("endpoint lane upstreams %+v, want [%+v]", lane, tc.want)
			}
		})
	}
}
