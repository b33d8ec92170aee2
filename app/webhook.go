package app

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"strconv"

	"go.uber.org/fx"
	"k8s.io/client-go/informers"

	"github.com/ingress-reactor/ingress-reactor/modules/classfilter"
	"github.com/ingress-reactor/ingress-reactor/modules/webhook"
	"github.com/ingress-reactor/ingress-reactor/nginx"
)

// bindWebhookFlags registers ingress-nginx's admission webhook flags.
func bindWebhookFlags(fs *flag.FlagSet, c *Config) {
	fs.StringVar(&c.ValidatingWebhook, "validating-webhook", c.ValidatingWebhook,
		"Address (such as :8443) of the validating admission webhook for Ingresses of our class, served over TLS at "+webhook.Path+
			" as in ingress-nginx: an Ingress the controller would reject is refused at kubectl apply with the reason, one that loses a conflict is admitted with a warning. "+
			"It judges from the caches only and never runs NGINX. Empty disables it. See docs/admission-webhook.md.")
	fs.StringVar(&c.ValidatingWebhookCertificate, "validating-webhook-certificate", c.ValidatingWebhookCertificate,
		"PEM certificate (with its chain) that the admission webhook presents; read again when the file changes.")
	fs.StringVar(&c.ValidatingWebhookKey, "validating-webhook-key", c.ValidatingWebhookKey,
		"PEM private key of --validating-webhook-certificate; read again when the file changes.")
}

// validateWebhook reports errors in the webhook flags; Config.Validate includes them.
func (c *Config) validateWebhook() []error {
	if c.ValidatingWebhook == "" {
		return nil
	}
	var errs []error
	_, p, err := net.SplitHostPort(c.ValidatingWebhook)
	port, perr := strconv.Atoi(p)
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("--validating-webhook: want [host]:port, got %q", c.ValidatingWebhook))
	case perr != nil || port < 1 || port > 65535:
		errs = append(errs, fmt.Errorf("--validating-webhook: port must be between 1 and 65535, got %q", p))
	default:
		for other, name := range c.reservedPorts() {
			if other == port {
				errs = append(errs, fmt.Errorf("--validating-webhook and %s are both %d; each needs a port of its own", name, port))
			}
		}
	}
	if c.ValidatingWebhookCertificate == "" || c.ValidatingWebhookKey == "" {
		errs = append(errs, errors.New("--validating-webhook needs --validating-webhook-certificate and --validating-webhook-key"))
	}
	return errs
}

// webhookModules returns the admission webhook and its options when --validating-webhook is set. It
// judges with the class filter's rule and the renderer's translation options.
func webhookModules(cfg Config) []fx.Option {
	if cfg.ValidatingWebhook == "" {
		return nil
	}
	return []fx.Option{
		fx.Provide(func(f informers.SharedInformerFactory) webhook.Options {
			filter := classfilter.NewFilter(classfilter.Options{
				IngressClass:      cfg.IngressClass,
				ControllerClass:   cfg.ControllerClass,
				ByName:            cfg.IngressClassByName,
				WatchWithoutClass: cfg.WatchIngressWithoutClass,
			}, f.Networking().V1().IngressClasses().Lister())
			return webhook.Options{
				Address:        cfg.ValidatingWebhook,
				CertFile:       cfg.ValidatingWebhookCertificate,
				KeyFile:        cfg.ValidatingWebhookKey,
				Accepts:        filter.Accepts,
				WatchNamespace: cfg.WatchNamespace,
				Translate:      translateOptions(cfg),
				Ownership:      nginx.HostOwnership(cfg.HostOwnership),
			}
		}),
		webhook.Module,
	}
}
