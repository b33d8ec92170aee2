package nginx

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

func TestTranslationCache(t *testing.T) {
	type step struct {
		// change mutates the world before the step's Translate call.
		change     func(ing *networkingv1.Ingress, svcs services)
		wantMiss   bool
		wantReject bool
	}
	tests := map[string]struct {
		steps []step
	}{
		"unchanged Ingress and Services: cached": {
			steps: []step{{wantMiss: true}, {}, {}},
		},
		"new resourceVersion of the Ingress: translated again": {
			steps: []step{{wantMiss: true}, {change: func(ing *networkingv1.Ingress, _ services) { ing.ResourceVersion = "2" }, wantMiss: true}, {}},
		},
		"recreated Ingress (new UID, same resourceVersion): translated again": {
			steps: []step{{wantMiss: true}, {change: func(ing *networkingv1.Ingress, _ services) { ing.UID = "other" }, wantMiss: true}},
		},
		"referenced Service changed: translated again, and a lost port rejects": {
			steps: []step{
				{wantMiss: true},
				{change: func(_ *networkingv1.Ingress, s services) {
					svc := service("default", "web", port(81, "http"))
					svc.ResourceVersion = "2"
					s[nn("default", "web")] = svc
				}, wantMiss: true, wantReject: true},
				{wantReject: true},
				{change: func(_ *networkingv1.Ingress, s services) {
					svc := service("default", "web", port(80, "http"))
					svc.ResourceVersion = "3"
					s[nn("default", "web")] = svc
				}, wantMiss: true},
			},
		},
		"referenced Service deleted and created again": {
			steps: []step{
				{wantMiss: true},
				{change: func(_ *networkingv1.Ingress, s services) { delete(s, nn("default", "web")) }, wantMiss: true},
				{},
				{change: func(_ *networkingv1.Ingress, s services) {
					s[nn("default", "web")] = service("default", "web", port(80, ""))
				}, wantMiss: true},
			},
		},
		"unrelated Service changed: cached": {
			steps: []step{
				{wantMiss: true},
				{change: func(_ *networkingv1.Ingress, s services) { s[nn("default", "other")] = service("default", "other") }},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := NewTranslationCache()
			ing := ingress("default", "a", rule("a.example.com", prefix("/", "web", 80)))
			svcs := servicesOf(service("default", "web", port(80, "")))
			var misses uint64
			for i, s := range tc.steps {
				if s.change != nil {
					s.change(ing, svcs)
				}
				tr, err := c.Translate(ing, svcs, DefaultTranslateOptions())
				if (err != nil) != s.wantReject || (tr == nil) != s.wantReject {
					t.Fatalf("step %d: translation %v, error %v, want rejection %v", i, tr, err, s.wantReject)
				}
				_, m := c.Stats()
				if missed := m > misses; missed != s.wantMiss {
					t.Errorf("step %d: translated again = %v, want %v", i, missed, s.wantMiss)
				}
				misses = m
			}
		})
	}
}

func TestTranslationCacheOptionsAndEvict(t *testing.T) {
	c := NewTranslationCache()
	svcs := servicesOf(service("default", "web", port(80, "")))
	ing := ingress("default", "a", rule("a.example.com", prefix("/", "web", 80)))
	first, _ := c.Translate(ing, svcs, DefaultTranslateOptions())
	if !first.SSLRedirect {
		t.Fatal("default options must redirect")
	}
	second, _ := c.Translate(ing, svcs, TranslateOptions{SSLRedirect: false})
	if second.SSLRedirect {
		t.Error("changed options were ignored: a cached translation with the old options came back")
	}
	if c.Len() != 1 {
		t.Errorf("Len = %d, want 1", c.Len())
	}
	c.Evict(nn("default", "a"))
	if c.Len() != 0 {
		t.Errorf("Len after Evict = %d, want 0", c.Len())
	}
}
