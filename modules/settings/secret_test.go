package settings

import (
	"context"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/modules/moduletest"
)

// dhParam2 and dhParam5 are RFC 3526's 2048-bit MODP prime with the generators 2 and 5.
var (
	dhParam2 = mustRead("../../nginx/testdata/dhparam-2048-g2.pem")
	dhParam5 = mustRead("../../nginx/testdata/dhparam-2048-g5.pem")
)

func mustRead(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func dhSecret(pemText string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "certs", Name: "dh"}, Data: map[string][]byte{"dhparam.pem": []byte(pemText)}}
}

// TestDHParamSecretIsFollowed: the Secret ssl-dh-param names (in another namespace) is read at the start,
// its change re-publishes the settings, an invalid change keeps the last good parameters with a Warning
// Event, and removing the key drops them.
func TestDHParamSecretIsFollowed(t *testing.T) {
	key := types.NamespacedName{Namespace: "ingress", Name: "settings"}
	h := moduletest.New(t)
	ctx := context.Background()
	if _, err := h.Client.CoreV1().Secrets("certs").Create(ctx, dhSecret(dhParam2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h, _, got, _ := startWatcherWith(t, h, key, configMap(map[string]string{"ssl-dh-param": "certs/dh", "use-gzip": "true"}))
	if all := got.All(); len(all) != 1 || all[0].Settings.SSLDHParam != dhParam2 || !all[0].Settings.UseGzip {
		t.Fatalf("first publication %+v, want the Secret's parameters", all)
	}

	if _, err := h.Client.CoreV1().Secrets("certs").Update(ctx, dhSecret(dhParam5), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got.WaitFor(t, "the changed parameters", func(c modules.SettingsChange) bool { return c.Settings.SSLDHParam == dhParam5 })

	if _, err := h.Client.CoreV1().Secrets("certs").Update(ctx, dhSecret("not parameters"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	moduletest.Eventually(t, "the Warning Event", func() bool { return len(h.Recorder.WithReason(ReasonInvalidSetting)) == 1 })
	if ev := h.Recorder.WithReason(ReasonInvalidSetting)[0]; !strings.Contains(ev.Message, "ssl-dh-param") || !strings.Contains(ev.Message, "last good value stays applied") {
		t.Errorf("Event %q", ev.Message)
	}
	for _, c := range got.All() {
		if c.Settings.SSLDHParam != dhParam5 {
			t.Errorf("parameters published after an invalid Secret: %q, want the last good ones", c.Settings.SSLDHParam)
		}
	}

	if _, err := h.Client.CoreV1().ConfigMaps("ingress").Update(ctx, configMap(map[string]string{"use-gzip": "true"}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got.WaitFor(t, "the parameters dropped", func(c modules.SettingsChange) bool { return c.Settings.SSLDHParam == "" })
}

// TestDHParamSecretMissing: a Secret that does not exist is a problem; the rest of the ConfigMap applies
// at once, and the Secret's creation applies it.
func TestDHParamSecretMissing(t *testing.T) {
	key := types.NamespacedName{Namespace: "ingress", Name: "settings"}
	h, _, got, _ := startWatcherWith(t, moduletest.New(t), key, configMap(map[string]string{"ssl-dh-param": "certs/dh", "use-gzip": "true"}))
	if all := got.All(); len(all) != 1 || all[0].Settings.SSLDHParam != "" || !all[0].Settings.UseGzip {
		t.Fatalf("first publication %+v", all)
	}
	moduletest.Eventually(t, "the Warning Event", func() bool { return len(h.Recorder.WithReason(ReasonInvalidSetting)) == 1 })
	if _, err := h.Client.CoreV1().Secrets("certs").Create(context.Background(), dhSecret(dhParam2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got.WaitFor(t, "the created Secret's parameters", func(c modules.SettingsChange) bool { return c.Settings.SSLDHParam == dhParam2 })
}

// TestDHParamSecretNotFollowedAfterStop: a sync that runs after Stop (it passed its check of the stop
// channel before Stop ran) starts no Secret informer, which nothing would stop.
func TestDHParamSecretNotFollowedAfterStop(t *testing.T) {
	key := types.NamespacedName{Namespace: "ingress", Name: "settings"}
	_, w, _, _ := startWatcherWith(t, moduletest.New(t), key, configMap(map[string]string{"use-gzip": "true"}))
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	w.followSecret(map[string]string{"ssl-dh-param": "certs/dh"})
	followed := w.secret
	w.mu.Unlock()
	if followed != nil {
		w.stopSecret()
		t.Error("a Secret informer was started after Stop")
	}
}
