package app

import (
	"context"
	"slices"

	"go.uber.org/fx"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/modules/classfilter"
	"github.com/ingress-reactor/ingress-reactor/modules/settings"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

// Modules returns the fx modules that cfg switches on. This list is the one place that names modules.
func Modules(cfg Config) []fx.Option {
	return append([]fx.Option{
		fx.Provide(topics...),
		fx.Supply(classfilter.Options{
			IngressClass:      cfg.IngressClass,
			ControllerClass:   cfg.ControllerClass,
			ByName:            cfg.IngressClassByName,
			WatchWithoutClass: cfg.WatchIngressWithoutClass,
		}),
		classfilter.Module,
		fx.Supply(settings.Options{ConfigMap: configMapKey(cfg)}),
		settings.Module,
	}, slices.Concat(dataPlaneModules(cfg), autoIngressModules(cfg), statusModules(cfg), passthroughModules(cfg), streamsModules(cfg), webhookModules(cfg), requestMetricsModules(cfg))...)
}

// topics are the typed channels between modules; each is closed when the application stops. The
// IngressesAnnounced signal travels beside the IngressChange topic.
var topics = []any{
	newTopic[modules.IngressChange]("ingress-changes"),
	newTopic[modules.EndpointsChange]("endpoints-changes"),
	newTopic[modules.Rendered]("rendered"),
	newTopic[modules.CertChange]("cert-changes"),
	newTopic[modules.RoutesRefused]("routes-refused"),
	newTopic[modules.SettingsChange]("settings-changes"),
	newTopic[modules.StreamUpstreams]("stream-upstreams"),
	newTopic[modules.OCSPChange]("ocsp-changes"),
	modules.NewIngressesAnnounced,
	modules.NewSettingsLoaded,
}

func newTopic[T any](name string) func(*zap.Logger, *pipeline.Metrics, fx.Lifecycle) *pipeline.Topic[T] {
	return func(log *zap.Logger, m *pipeline.Metrics, lc fx.Lifecycle) *pipeline.Topic[T] {
		t := pipeline.NewTopic[T](name, pipeline.WithTopicLogger(log.Named("topic")), pipeline.WithTopicMetrics(m))
		lc.Append(fx.Hook{OnStop: func(context.Context) error { t.Close(); return nil }})
		return t
	}
}

// configMapKey is --configmap, validated by Config.Validate; zero without it.
func configMapKey(cfg Config) types.NamespacedName {
	if cfg.ConfigMap == "" {
		return types.NamespacedName{}
	}
	key, _ := ParseNamespacedName(cfg.ConfigMap)
	return key
}
