package app

import (
	"flag"

	"go.uber.org/fx"

	"github.com/ingress-reactor/ingress-reactor/modules/autoingress"
)

// bindAutoIngressFlags registers the flags of the optional auto-ingress module.
func bindAutoIngressFlags(fs *flag.FlagSet, c *Config) {
	fs.BoolVar(&c.EnableAutoIngress, "enable-auto-ingress", c.EnableAutoIngress,
		"Give every Service annotated with "+autoingress.AnnotationExpose+" an Ingress of its own, owned by the Service "+
			"(spec.ingressClassName defaults to --ingress-class). Needs RBAC to create, patch and delete Ingresses.")
}

// autoIngressModules returns the auto-ingress module and its options when --enable-auto-ingress is set,
// nil otherwise.
func autoIngressModules(cfg Config) []fx.Option {
	if !cfg.EnableAutoIngress {
		return nil
	}
	return []fx.Option{
		fx.Supply(autoingress.Options{IngressClass: cfg.IngressClass}),
		autoingress.Module,
	}
}
