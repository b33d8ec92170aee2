package streams

import (
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ingress-reactor/ingress-reactor/internal/freeport"
	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/modules/moduletest"
	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) int { t.Helper(); return freeport.Get(t) }

// echoOn runs a TCP server on loopback that answers with name and what it got.
func echoOn(t *testing.T, name string) (string, int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 64)
				n, err := c.Read(buf)
				if err == nil {
					_, _ = c.Write([]byte(name + ":" + string(buf[:n])))
				}
			}()
		}
	}()
	a := l.Addr().(*net.TCPAddr)
	return a.IP.String(), int32(a.Port)
}

func askPort(port int, msg string) (string, error) {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	return string(buf[:n]), err
}

// TestModuleServesAndFollowsTheConfigMap: the module listens for the valid entries, asks the endpoint
// lane for their upstreams, routes to the endpoints it publishes, reports bad entries, reserved and
// occupied ports on the ConfigMap, and follows ConfigMap edits.
func TestModuleServesAndFollowsTheConfigMap(t *testing.T) {
	port, reserved, spare := freePort(t), freePort(t), freePort(t)
	occupied, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer occupied.Close()
	busy := occupied.Addr().(*net.TCPAddr).Port
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ingress", Name: "tcp-services", ResourceVersion: "1"}, Data: map[string]string{
		strconv.Itoa(port):     "default/db:5432",
		strconv.Itoa(reserved): "default/db:5432",
		strconv.Itoa(busy):     "default/db:5432",
		"bad":                  "default/db",
	}}
	h := moduletest.New(t, cm)
	eps := pipeline.NewTopic[modules.EndpointsChange]("endpoints")
	ups := pipeline.NewTopic[modules.StreamUpstreams]("streams")
	wanted := moduletest.Collect(ups)
	s, err := New(Params{
		Options: Options{
			TCPConfigMap: types.NamespacedName{Namespace: "ingress", Name: "tcp-services"},
			ListenHost:   "127.0.0.1",
			Reserved:     map[int]string{reserved: "--http-port"},
		},
		Client: h.Client, Endpoints: eps, Streams: ups, Recorder: h.Recorder, Registry: h.Registry, Log: h.Log,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.Start()
	h.Run(s)

	db := nginx.NewStreamUpstream(types.NamespacedName{Namespace: "default", Name: "db"}, intstr.FromInt32(5432), false)
	wanted.WaitFor(t, "the upstream to be asked for", func(m modules.StreamUpstreams) bool {
		return len(m.Upstreams) == 1 && *m.Upstreams[0] == db
	})
	moduletest.Eventually(t, "the valid entry to listen", func() bool { return slices.Equal(s.Ports(), []string{"tcp/" + strconv.Itoa(port)}) })
	if got, err := askPort(port, "x"); err == nil && got != "" {
		t.Fatalf("without endpoints the connection got %q, want it closed", got)
	}

	ip, target := echoOn(t, "a")
	eps.Publish(modules.EndpointsChange{Upstream: db, Endpoints: []nginx.Endpoint{{Address: ip, Port: target}}})
	moduletest.Eventually(t, "the endpoint to answer", func() bool {
		got, _ := askPort(port, "hi")
		return got == "a:hi"
	})

	events := h.Recorder.WithReason(ReasonInvalid)
	var msgs []string
	for _, e := range events {
		msgs = append(msgs, e.Message)
	}
	joined := strings.Join(msgs, "\n")
	if len(events) != 2 || !strings.Contains(joined, `"bad"`) || !strings.Contains(joined, "--http-port") {
		t.Errorf("InvalidStreamService Events:\n%s\nwant one for the key \"bad\" and one for the reserved port", joined)
	}
	if ev := h.Recorder.WithReason(ReasonListenFailed); len(ev) != 1 || !strings.Contains(ev[0].Message, strconv.Itoa(busy)) {
		t.Errorf("StreamPortUnavailable Events = %+v, want one naming port %d", ev, busy)
	}

	// An edit: the served entry moves to another port; the occupied port is still refused.
	cm = cm.DeepCopy()
	cm.ResourceVersion = "2"
	cm.Data = map[string]string{strconv.Itoa(spare): "default/db:5432", strconv.Itoa(busy): "default/db:5432"}
	if _, err := h.Client.CoreV1().ConfigMaps("ingress").Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	moduletest.Eventually(t, "the moved entry to listen and the removed one to close", func() bool {
		return slices.Equal(s.Ports(), []string{"tcp/" + strconv.Itoa(spare)})
	})
	if got, err := askPort(spare, "again"); err != nil || got != "a:again" {
		t.Errorf("the moved entry answered %q, %v; want a:again", got, err)
	}
	if _, err := askPort(port, "gone"); err == nil {
		t.Errorf("the removed entry's port %d still accepts connections", port)
	}
}

// TestModuleWaitsForAMissingConfigMap: a ConfigMap that does not exist yet is logged once and serves
// nothing; once created, its entries are served without a restart.
func TestModuleWaitsForAMissingConfigMap(t *testing.T) {
	h := moduletest.New(t)
	ups := pipeline.NewTopic[modules.StreamUpstreams]("streams")
	s, err := New(Params{
		Options: Options{UDPConfigMap: types.NamespacedName{Namespace: "ingress", Name: "udp-services"}, ListenHost: "127.0.0.1"},
		Client:  h.Client, Endpoints: pipeline.NewTopic[modules.EndpointsChange]("endpoints"), Streams: ups,
		Recorder: h.Recorder, Registry: h.Registry, Log: h.Log,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.Start()
	h.Run(s)
	moduletest.Eventually(t, "the missing ConfigMap to be logged", func() bool {
		return h.Logs.FilterMessageSnippet("ConfigMap not found").Len() == 1
	})
	port := freePort(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ingress", Name: "udp-services"}, Data: map[string]string{strconv.Itoa(port): "kube-system/kube-dns:dns"}}
	if _, err := h.Client.CoreV1().ConfigMaps("ingress").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	moduletest.Eventually(t, "the UDP service to listen", func() bool { return slices.Equal(s.Ports(), []string{"udp/" + strconv.Itoa(port)}) })
	if n := h.Logs.FilterMessageSnippet("ConfigMap not found").Len(); n != 1 {
		t.Errorf("the missing ConfigMap was logged %d times, want once", n)
	}
}

// TestModuleKeepsEndpointsOfAnEntryThatComesBack: an entry removed and restored before the endpoint lane
// noticed (a ConfigMap replaced by delete and create) gets nothing new from the lane, so the endpoints it
// had must still be there; a Removed from the lane forgets them.
func TestModuleKeepsEndpointsOfAnEntryThatComesBack(t *testing.T) {
	port := freePort(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ingress", Name: "tcp-services"}, Data: map[string]string{
		strconv.Itoa(port): "default/db:5432",
	}}
	h := moduletest.New(t, cm)
	eps := pipeline.NewTopic[modules.EndpointsChange]("endpoints")
	ups := pipeline.NewTopic[modules.StreamUpstreams]("streams")
	wanted := moduletest.Collect(ups)
	s, err := New(Params{
		Options: Options{TCPConfigMap: types.NamespacedName{Namespace: "ingress", Name: "tcp-services"}, ListenHost: "127.0.0.1"},
		Client:  h.Client, Endpoints: eps, Streams: ups, Recorder: h.Recorder, Registry: h.Registry, Log: h.Log,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.Start()
	h.Run(s)
	db := nginx.NewStreamUpstream(types.NamespacedName{Namespace: "default", Name: "db"}, intstr.FromInt32(5432), false)
	wanted.WaitFor(t, "the upstream to be asked for", func(m modules.StreamUpstreams) bool {
		return len(m.Upstreams) == 1 && *m.Upstreams[0] == db
	})
	ip, target := echoOn(t, "a")
	eps.Publish(modules.EndpointsChange{Upstream: db, Endpoints: []nginx.Endpoint{{Address: ip, Port: target}}})
	moduletest.Eventually(t, "the endpoint to answer", func() bool {
		got, _ := askPort(port, "hi")
		return got == "a:hi"
	})

	cms := h.Client.CoreV1().ConfigMaps("ingress")
	if err := cms.Delete(context.Background(), "tcp-services", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	moduletest.Eventually(t, "the port to close", func() bool { return len(s.Ports()) == 0 })
	wanted.WaitFor(t, "the upstream to be released", func(m modules.StreamUpstreams) bool { return len(m.Upstreams) == 0 })
	cm.ResourceVersion = ""
	if _, err := cms.Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	moduletest.Eventually(t, "the port to open again", func() bool { return slices.Equal(s.Ports(), []string{"tcp/" + strconv.Itoa(port)}) })
	if got, err := askPort(port, "back"); err != nil || got != "a:back" {
		t.Errorf("the restored entry answered %q, %v; want a:back from the endpoint it had", got, err)
	}

	eps.Publish(modules.EndpointsChange{Upstream: db, Removed: true})
	moduletest.Eventually(t, "a Removed to take the endpoint away", func() bool {
		got, _ := askPort(port, "x")
		return got == ""
	})
}
