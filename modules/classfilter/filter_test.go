package classfilter

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	listersv1 "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
)

func class(name, controller string, isDefault bool) *networkingv1.IngressClass {
	c := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.IngressClassSpec{Controller: controller}}
	if isDefault {
		c.Annotations = map[string]string{DefaultClassAnnotation: "true"}
	}
	return c
}

type ingressOpt func(*networkingv1.Ingress)

func withClassName(n string) ingressOpt {
	return func(i *networkingv1.Ingress) { i.Spec.IngressClassName = &n }
}

func withLegacy(v string) ingressOpt {
	return func(i *networkingv1.Ingress) { i.Annotations = map[string]string{LegacyClassAnnotation: v} }
}

func ingress(opts ...ingressOpt) *networkingv1.Ingress {
	i := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ing"}}
	for _, o := range opts {
		o(i)
	}
	return i
}

func TestAccepts(t *testing.T) {
	const ours = "k8s.io/ingress-reactor"
	base := Options{IngressClass: "reactor", ControllerClass: ours}
	tests := map[string]struct {
		opts    Options
		classes []*networkingv1.IngressClass
		ing     *networkingv1.Ingress
		want    bool
	}{
		"class name of our controller": {
			opts: base, classes: []*networkingv1.IngressClass{class("public", ours, false)},
			ing: ingress(withClassName("public")), want: true,
		},
		"class of another controller": {
			opts: base, classes: []*networkingv1.IngressClass{class("other", "example.com/other", false)},
			ing: ingress(withClassName("other")), want: false,
		},
		"class that does not exist": {
			opts: base, ing: ingress(withClassName("reactor")), want: false,
		},
		"migrating from ingress-nginx keeps its class": {
			opts:    Options{IngressClass: "nginx", ControllerClass: "k8s.io/ingress-nginx"},
			classes: []*networkingv1.IngressClass{class("nginx", "k8s.io/ingress-nginx", false)},
			ing:     ingress(withClassName("nginx")), want: true,
		},
		"by name without an IngressClass object": {
			opts: Options{IngressClass: "reactor", ControllerClass: ours, ByName: true},
			ing:  ingress(withClassName("reactor")), want: true,
		},
		"by name ignores other names": {
			opts: Options{IngressClass: "reactor", ControllerClass: ours, ByName: true},
			ing:  ingress(withClassName("nginx")), want: false,
		},
		"by name is off by default": {
			opts: base, classes: []*networkingv1.IngressClass{class("reactor", "example.com/other", false)},
			ing: ingress(withClassName("reactor")), want: false,
		},
		"legacy annotation with our class name": {
			opts: base, ing: ingress(withLegacy("reactor")), want: true,
		},
		"legacy annotation naming our IngressClass": {
			opts: base, classes: []*networkingv1.IngressClass{class("public", ours, false)},
			ing: ingress(withLegacy("public")), want: true,
		},
		"legacy annotation of another class": {
			opts: base, ing: ingress(withLegacy("nginx")), want: false,
		},
		"legacy annotation wins over spec": {
			opts: base, classes: []*networkingv1.IngressClass{class("public", ours, false)},
			ing: ingress(withClassName("public"), withLegacy("nginx")), want: false,
		},
		"no class and no default": {
			opts: base, classes: []*networkingv1.IngressClass{class("public", ours, false)},
			ing: ingress(), want: false,
		},
		"no class and our class is default": {
			opts: base, classes: []*networkingv1.IngressClass{class("public", ours, true)},
			ing: ingress(), want: true,
		},
		"no class and another controller's class is default": {
			opts: base, classes: []*networkingv1.IngressClass{class("other", "example.com/other", true)},
			ing: ingress(), want: false,
		},
		"no class with --watch-ingress-without-class": {
			opts: Options{IngressClass: "reactor", ControllerClass: ours, WatchWithoutClass: true},
			ing:  ingress(), want: true,
		},
		"empty class name counts as no class": {
			opts: base, classes: []*networkingv1.IngressClass{class("public", ours, true)},
			ing: ingress(withClassName("")), want: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			for _, c := range tc.classes {
				if err := idx.Add(c); err != nil {
					t.Fatal(err)
				}
			}
			f := NewFilter(tc.opts, listersv1.NewIngressClassLister(idx))
			if got := f.Accepts(tc.ing); got != tc.want {
				t.Fatalf("Accepts = %v, want %v", got, tc.want)
			}
		})
	}
}
