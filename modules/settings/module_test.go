package settings

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/modules/moduletest"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

func startWatcher(t *testing.T, key types.NamespacedName, objs ...*corev1.ConfigMap) (*moduletest.Harness, *Watcher, *moduletest.Collector[modules.SettingsChange], *modules.SettingsLoaded) {
	t.Helper()
	return startWatcherWith(t, moduletest.New(t), key, objs...)
}

// startWatcherWith is startWatcher on a harness the test has filled already.
func startWatcherWith(t *testing.T, h *moduletest.Harness, key types.NamespacedName, objs ...*corev1.ConfigMap) (*moduletest.Harness, *Watcher, *moduletest.Collector[modules.SettingsChange], *modules.SettingsLoaded) {
	t.Helper()
	for _, o := range objs {
		if _, err := h.Client.CoreV1().ConfigMaps(o.Namespace).Create(context.Background(), o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	topic := pipeline.NewTopic[modules.SettingsChange]("settings")
	t.Cleanup(topic.Close)
	got := moduletest.Collect(topic)
	loaded := modules.NewSettingsLoaded()
	w, err := New(Params{Options: Options{ConfigMap: key}, Client: h.Client, Changes: topic, Loaded: loaded,
		Recorder: h.Recorder, Registry: h.Registry, Log: h.Log})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	select {
	case <-loaded.Done():
	case <-time.After(moduletest.WaitLimit):
		t.Fatal("SettingsLoaded did not fire")
	}
	return h, w, got, loaded
}

func configMap(data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ingress", Name: "settings"}, Data: data}
}

func TestWithoutConfigMapTheDefaultsAreLoaded(t *testing.T) {
	_, _, got, _ := startWatcher(t, types.NamespacedName{})
	all := got.All()
	if len(all) != 1 || !all[0].Settings.Loaded() || !all[0].Settings.HSTS || all[0].Settings.UseGzip {
		t.Fatalf("published %+v, want the defaults once", all)
	}
}

func TestConfigMapChangesApplyWithLastGoodValues(t *testing.T) {
	key := types.NamespacedName{Namespace: "ingress", Name: "settings"}
	h, w, got, _ := startWatcher(t, key, configMap(map[string]string{"use-gzip": "true", "gzip-level": "4"}))
	if all := got.All(); len(all) != 1 || !all[0].Settings.UseGzip || all[0].Settings.GzipLevel != 4 {
		t.Fatalf("first publication %+v", all)
	}
	if ev := h.Recorder.All(); len(ev) != 0 {
		t.Errorf("Events for a valid ConfigMap: %+v", ev)
	}

	// An invalid gzip-level keeps 4; the rest of the change applies; one Warning names the key.
	if _, err := h.Client.CoreV1().ConfigMaps("ingress").Update(context.Background(),
		configMap(map[string]string{"use-gzip": "true", "gzip-level": "11", "server-tokens": "true", "http-snippet": "x"}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	latest := got.WaitFor(t, "the change", func(c modules.SettingsChange) bool { return c.Settings.ServerTokens })
	if s := latest[len(latest)-1].Settings; s.GzipLevel != 4 || !s.UseGzip {
		t.Errorf("gzip-level %d, use-gzip %v; want the last good 4 and true", s.GzipLevel, s.UseGzip)
	}
	moduletest.Eventually(t, "the Warning Event", func() bool { return len(h.Recorder.WithReason(ReasonInvalidSetting)) == 1 })
	ev := h.Recorder.WithReason(ReasonInvalidSetting)[0]
	if ev.Object != "ingress/settings" || ev.Kind != corev1.EventTypeWarning || !strings.Contains(ev.Message, "gzip-level: invalid value \"11\"") ||
		!strings.Contains(ev.Message, "last good value") || !strings.Contains(ev.Message, "http-snippet: refused") {
		t.Errorf("Event %+v", ev)
	}
	if v := moduletest.MetricValue(t, h.Registry, "ingress_reactor_configmap_problems"); v != 2 {
		t.Errorf("ingress_reactor_configmap_problems = %v, want 2", v)
	}

	// Deleting the ConfigMap keeps its settings (as ingress-nginx: the defaults would drop the global auth
	// of every Ingress); creating it again applies it.
	if err := h.Client.CoreV1().ConfigMaps("ingress").Delete(context.Background(), "settings", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	moduletest.Eventually(t, "the deletion in the cache", func() bool {
		_, exists, _ := w.informer.GetStore().GetByKey(key.String())
		return !exists
	})
	w.sync() // the deletion's own event may come later: read it now, as that event does
	if _, err := h.Client.CoreV1().ConfigMaps("ingress").Create(context.Background(),
		configMap(map[string]string{"use-gzip": "true", "gzip-level": "7", "server-tokens": "true"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	all := got.WaitFor(t, "the re-created ConfigMap", func(c modules.SettingsChange) bool { return c.Settings.GzipLevel == 7 })
	for _, c := range all {
		if !c.Settings.UseGzip || !c.Settings.ServerTokens {
			t.Errorf("published %+v between the deletion and the re-creation; want the ConfigMap's settings kept", c.Settings)
		}
	}
}

func TestMissingConfigMapLoadsDefaults(t *testing.T) {
	_, _, got, _ := startWatcher(t, types.NamespacedName{Namespace: "ingress", Name: "settings"})
	if all := got.All(); len(all) != 1 || all[0].Settings.UseGzip {
		t.Fatalf("published %+v, want the defaults", all)
	}
}

// TestReferencedConfigMapChangesApply: add-headers names another ConfigMap of the namespace; its
// creation and its changes re-publish the settings; a reference to another namespace is a problem.
func TestReferencedConfigMapChangesApply(t *testing.T) {
	key := types.NamespacedName{Namespace: "ingress", Name: "settings"}
	headers := func(v string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ingress", Name: "headers"}, Data: map[string]string{"X-Frame-Options": v}}
	}
	h, w, got, _ := startWatcher(t, key, configMap(map[string]string{"add-headers": "ingress/headers", "proxy-set-headers": "other/headers"}))
	if all := got.All(); len(all) != 1 || len(all[0].Settings.HeaderRefs.Add) != 0 {
		t.Fatalf("first publication %+v, want no headers (the ConfigMap does not exist yet)", all)
	}
	moduletest.Eventually(t, "the Warning Event", func() bool { return len(h.Recorder.WithReason(ReasonInvalidSetting)) == 1 })
	if ev := h.Recorder.WithReason(ReasonInvalidSetting)[0]; !strings.Contains(ev.Message, "add-headers") || !strings.Contains(ev.Message, "does not exist") ||
		!strings.Contains(ev.Message, "proxy-set-headers") || !strings.Contains(ev.Message, "not in the namespace of --configmap") {
		t.Errorf("Event %+v", ev)
	}
	ctx := context.Background()
	if _, err := h.Client.CoreV1().ConfigMaps("ingress").Create(ctx, headers("DENY"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got.WaitFor(t, "the created headers", func(c modules.SettingsChange) bool {
		a := c.Settings.HeaderRefs.Add
		return len(a) == 1 && a[0].Name == "X-Frame-Options" && a[0].Value == "DENY"
	})
	if _, err := h.Client.CoreV1().ConfigMaps("ingress").Update(ctx, headers("SAMEORIGIN"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got.WaitFor(t, "the changed headers", func(c modules.SettingsChange) bool {
		a := c.Settings.HeaderRefs.Add
		return len(a) == 1 && a[0].Value == "SAMEORIGIN"
	})
	// An invalid change keeps the last good headers.
	if _, err := h.Client.CoreV1().ConfigMaps("ingress").Update(ctx, headers("$host"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Each version so far had the refused proxy-set-headers: this is the fourth Warning.
	moduletest.Eventually(t, "the Warning Event of the invalid value", func() bool { return len(h.Recorder.WithReason(ReasonInvalidSetting)) == 4 })
	if ev := h.Recorder.WithReason(ReasonInvalidSetting)[3]; !strings.Contains(ev.Message, "add-headers: invalid value") || !strings.Contains(ev.Message, "last good value") {
		t.Errorf("Event %+v", ev)
	}
	w.mu.Lock()
	a := w.current.HeaderRefs.Add
	w.mu.Unlock()
	if len(a) != 1 || a[0].Value != "SAMEORIGIN" {
		t.Errorf("after an invalid change: %+v, want the last good SAMEORIGIN", a)
	}
	if rest := got.All(); len(rest) != 0 {
		t.Errorf("published %+v after an invalid change that keeps the last good headers", rest)
	}
}
