// Package classfilter decides which Ingresses this controller serves and publishes an IngressChange each
// time an Ingress becomes ours, changes while ours, or stops being ours.
package classfilter

import (
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	listersv1 "k8s.io/client-go/listers/networking/v1"
)

// Well-known annotations that decide Ingress class membership.
const (
	// LegacyClassAnnotation is the pre-IngressClass way of naming a class on an Ingress.
	LegacyClassAnnotation = "kubernetes.io/ingress.class"
	// DefaultClassAnnotation on an IngressClass makes it the class of Ingresses that name none.
	DefaultClassAnnotation = "ingressclass.kubernetes.io/is-default-class"
)

// Options are the class-selection flags.
type Options struct {
	// IngressClass is --ingress-class: the class name this controller answers to.
	IngressClass string
	// ControllerClass is --controller-class: the IngressClass spec.controller value that is ours.
	ControllerClass string
	// ByName is --ingress-class-by-name: spec.ingressClassName equal to IngressClass is ours whatever the
	// IngressClass object says.
	ByName bool
	// WatchWithoutClass is --watch-ingress-without-class.
	WatchWithoutClass bool
}

// Filter applies the class rules to Ingresses, reading IngressClasses from a lister.
type Filter struct {
	opts    Options
	classes listersv1.IngressClassLister
}

// NewFilter returns a Filter for opts over the IngressClasses in classes.
func NewFilter(opts Options, classes listersv1.IngressClassLister) *Filter {
	return &Filter{opts: opts, classes: classes}
}

// Accepts reports whether ing is served by this controller.
func (f *Filter) Accepts(ing *networkingv1.Ingress) bool {
	if v, ok := ing.Annotations[LegacyClassAnnotation]; ok && v != "" {
		return v == f.opts.IngressClass || f.ours(v)
	}
	if ing.Spec.IngressClassName != nil && *ing.Spec.IngressClassName != "" {
		name := *ing.Spec.IngressClassName
		return f.ours(name) || (f.opts.ByName && name == f.opts.IngressClass)
	}
	return f.opts.WatchWithoutClass || f.oursIsDefault()
}

// ours reports whether the IngressClass called name exists and names our controller.
func (f *Filter) ours(name string) bool {
	class, err := f.classes.Get(name)
	return err == nil && f.isOurs(class)
}

func (f *Filter) isOurs(class *networkingv1.IngressClass) bool {
	if class.Spec.Controller == f.opts.ControllerClass {
		return true
	}
	return f.opts.ByName && class.Name == f.opts.IngressClass
}

// oursIsDefault reports whether one of our IngressClasses is the cluster's default class.
func (f *Filter) oursIsDefault() bool {
	all, err := f.classes.List(labels.Everything())
	if err != nil {
		return false
	}
	for _, c := range all {
		if c.Annotations[DefaultClassAnnotation] == "true" && f.isOurs(c) {
			return true
		}
	}
	return false
}

// classOf returns the class name an Ingress refers to, or "" when it names none.
func classOf(ing *networkingv1.Ingress) string {
	if v := ing.Annotations[LegacyClassAnnotation]; v != "" {
		return v
	}
	if ing.Spec.IngressClassName != nil {
		return *ing.Spec.IngressClassName
	}
	return ""
}
