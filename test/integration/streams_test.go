//go:build integration

package integration

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/ingress-reactor/ingress-reactor/test/integration/harness"
)

// Spelled out rather than imported: they are the user-facing contract (docs/tcp-udp.md).
const (
	streamConnections   = "ingress_reactor_stream_connections_total"
	reasonInvalidStream = "InvalidStreamService"
	// The echo pods of these tests: TEST-NET-1 addresses at the top of the range, which the harness's
	// backends (handed out from .1 upwards, on ports 8080 and above) do not reach, on ports of their own.
	streamPodA   = "192.0.2.241"
	streamPodB   = "192.0.2.242"
	streamTCPPod = 17000
	streamUDPPod = 17053
)

// serveTCP listens on addr (a TEST-NET-1 address) until the test ends and hands each connection to
// handle, closing it afterwards.
func serveTCP(t *testing.T, addr string, handle func(net.Conn)) {
	t.Helper()
	harness.RequireNetns(t)
	l, err := net.Listen("tcp", addr)
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
				handle(c)
			}()
		}
	}()
}

// streamEcho runs a TCP and a UDP echo server on ip that answer "<name>:<what they got>".
func streamEcho(t *testing.T, ip, name string) {
	t.Helper()
	serveTCP(t, net.JoinHostPort(ip, strconv.Itoa(streamTCPPod)), func(c net.Conn) {
		buf := make([]byte, 512)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			if _, err := c.Write([]byte(name + ":" + string(buf[:n]))); err != nil {
				return
			}
		}
	})
	u, err := net.ListenPacket("udp", net.JoinHostPort(ip, strconv.Itoa(streamUDPPod)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = u.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := u.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = u.WriteTo([]byte(name+":"+string(buf[:n])), from)
		}
	}()
}

// streamService creates Service echo with a TCP port 7000 ("echo") and a UDP port 53 ("dns"), and sets its
// one EndpointSlice to the pod at ip.
func streamService(f *harness.Fixture) {
	f.T.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: f.Namespace},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "echo", Protocol: corev1.ProtocolTCP, Port: 7000, TargetPort: intstr.FromInt32(streamTCPPod)},
			{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(streamUDPPod)},
		}},
	}
	if _, err := f.Client.CoreV1().Services(f.Namespace).Create(f.Ctx, svc, metav1.CreateOptions{}); err != nil {
		f.T.Fatalf("create Service echo: %v", err)
	}
}

// streamSlice points Service echo's EndpointSlice (both ports) at the pod at ip.
func streamSlice(f *harness.Fixture, ip string) {
	f.T.Helper()
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	ready := true
	slice := f.EndpointSlice("echo-1", "echo", "echo", streamTCPPod)
	slice.Ports = []discoveryv1.EndpointPort{
		{Name: ptr.To("echo"), Port: ptr.To(int32(streamTCPPod)), Protocol: &tcp},
		{Name: ptr.To("dns"), Port: ptr.To(int32(streamUDPPod)), Protocol: &udp},
	}
	slice.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}}
	f.ApplyEndpointSlice(slice)
}

// applyConfigMap creates or replaces the data of a ConfigMap in the fixture's namespace.
func applyConfigMap(f *harness.Fixture, name string, data map[string]string) {
	f.T.Helper()
	api := f.Client.CoreV1().ConfigMaps(f.Namespace)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.Namespace}, Data: data}
	if _, err := api.Create(f.Ctx, cm, metav1.CreateOptions{}); err == nil {
		return
	} else if !apierrors.IsAlreadyExists(err) {
		f.T.Fatalf("create ConfigMap %s: %v", name, err)
	}
	cur, err := api.Get(f.Ctx, name, metav1.GetOptions{})
	if err != nil {
		f.T.Fatalf("get ConfigMap %s: %v", name, err)
	}
	cur.Data = data
	if _, err := api.Update(f.Ctx, cur, metav1.UpdateOptions{}); err != nil {
		f.T.Fatalf("update ConfigMap %s: %v", name, err)
	}
}

// tcpAsk sends msg on c and returns one answer.
func tcpAsk(c net.Conn, msg string) (string, error) {
	_ = c.SetDeadline(time.Now().Add(harness.DefaultTimeout))
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	return string(buf[:n]), err
}

// udpAskWithin sends msg on c and returns the answer; a missing answer is an error after wait.
func udpAskWithin(c net.Conn, msg string, wait time.Duration) (string, error) {
	_ = c.SetDeadline(time.Now().Add(wait))
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	buf := make([]byte, 2048)
	n, err := c.Read(buf)
	return string(buf[:n]), err
}

// newStreamAnswer dials a new connection (a new UDP flow: a new client port) and asks once; it returns the
// answer, the connection left open on success.
func newStreamAnswer(network, addr, msg string) (net.Conn, string, error) {
	c, err := net.DialTimeout(network, addr, harness.DefaultTimeout)
	if err != nil {
		return nil, "", err
	}
	var got string
	if network == "udp" {
		// A datagram sent before the listener opened, or while no endpoint was known, gets no answer:
		// ask again on the same flow a few times.
		for range 3 {
			if got, err = udpAskWithin(c, msg, time.Second); err == nil {
				break
			}
		}
	} else {
		got, err = tcpAsk(c, msg)
	}
	if err != nil {
		_ = c.Close()
		return nil, "", err
	}
	return c, got, nil
}

// waitStreamAnswer waits until a new connection (flow) to addr is answered by pod, and returns it open.
func waitStreamAnswer(r *harness.Reactor, network, addr, pod string) net.Conn {
	var open net.Conn
	r.Eventually(harness.DefaultTimeout, fmt.Sprintf("a new %s connection to %s to be answered by %s", network, addr, pod), func() (bool, string) {
		c, got, err := newStreamAnswer(network, addr, "ping")
		if err != nil {
			return false, err.Error()
		}
		if got != pod+":ping" {
			_ = c.Close()
			return false, "answered " + got
		}
		open = c
		return true, ""
	})
	return open
}

// TestStreamServicesFollowEndpointsWithoutReload: TCP and UDP services from the two ConfigMaps (created
// after the controller started: they are watched) reach the Service's endpoint; when the endpoint changes,
// the open TCP connection and UDP flow keep their endpoint while new ones go to the new endpoint, and
// NGINX is never reloaded. Bad entries and a port of the controller's own get a Warning Event on their
// ConfigMap while the good entry is served.
func TestStreamServicesFollowEndpointsWithoutReload(t *testing.T) {
	f := harness.New(t)
	streamEcho(t, streamPodA, "a")
	streamEcho(t, streamPodB, "b")
	streamService(f)
	streamSlice(f, streamPodA)
	r := f.StartReactor("--tcp-services-configmap="+f.Namespace+"/tcp-services", "--udp-services-configmap="+f.Namespace+"/udp-services")
	r.WaitReady()
	reloads := r.WaitConfigSettled()

	tcpPort, udpPort := harness.FreePort(t), harness.FreePort(t)
	tcpAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(tcpPort))
	udpAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(udpPort))
	applyConfigMap(f, "tcp-services", map[string]string{
		strconv.Itoa(tcpPort):       f.Namespace + "/echo:7000",
		"not-a-port":                f.Namespace + "/echo:7000",
		strconv.Itoa(r.HealthzPort): f.Namespace + "/echo:7000",
	})
	applyConfigMap(f, "udp-services", map[string]string{strconv.Itoa(udpPort): f.Namespace + "/echo:dns"})

	tcpOpen := waitStreamAnswer(r, "tcp", tcpAddr, "a")
	defer tcpOpen.Close()
	udpOpen := waitStreamAnswer(r, "udp", udpAddr, "a")
	defer udpOpen.Close()

	streamSlice(f, streamPodB)
	waitStreamAnswer(r, "tcp", tcpAddr, "b").Close()
	waitStreamAnswer(r, "udp", udpAddr, "b").Close()

	for i := range 3 {
		msg := "after-" + strconv.Itoa(i)
		if got, err := tcpAsk(tcpOpen, msg); err != nil || got != "a:"+msg {
			t.Fatalf("the TCP connection opened before the endpoint change: got %q, %v; want a:%s from its original endpoint", got, err, msg)
		}
		// A UDP flow ends when its endpoint leaves the Service: the client's next datagram goes to b.
		if got, err := udpAskWithin(udpOpen, msg, harness.DefaultTimeout); err != nil || got != "b:"+msg {
			t.Fatalf("the UDP client of a flow started before the endpoint change: got %q, %v; want b:%s from the current endpoint", got, err, msg)
		}
	}

	f.WaitEvent(r, "ConfigMap", "tcp-services", corev1.EventTypeWarning, reasonInvalidStream, "not-a-port")
	f.WaitEvent(r, "ConfigMap", "tcp-services", corev1.EventTypeWarning, reasonInvalidStream, strconv.Itoa(r.HealthzPort), "--healthz-port")
	if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(r.HealthzPort)), time.Second); err == nil {
		// The health server answers there; the stream service must not have taken it.
		_ = c.Close()
	} else {
		t.Errorf("the healthz port stopped accepting: %v", err)
	}

	labels := map[string]string{"protocol": "tcp", "port": strconv.Itoa(tcpPort), "service": f.Namespace + "/echo:7000"}
	if got := r.MetricValue(streamConnections, labels); got < 2 {
		t.Errorf("%s%v = %g, want at least the 2 connections that were answered", streamConnections, labels, got)
	}
	if got := r.MetricValue(harness.ReloadsMetric, nil); got != reloads {
		t.Errorf("%s went from %g to %g; TCP/UDP services and their endpoint changes must not reload NGINX", harness.ReloadsMetric, reloads, got)
	}

	// Removing an entry closes its port.
	applyConfigMap(f, "tcp-services", map[string]string{})
	r.Eventually(harness.DefaultTimeout, "the removed TCP service's port to close", func() (bool, string) {
		c, err := net.DialTimeout("tcp", tcpAddr, time.Second)
		if err != nil {
			return errors.Is(err, syscall.ECONNREFUSED), err.Error()
		}
		_ = c.Close()
		return false, "still accepting"
	})
}

// TestStreamServicesProxyProtocol: with both PROXY fields, the client address from a load balancer's PROXY
// header is what the endpoint is told in the header the controller sends; a connection without a header
// is closed.
func TestStreamServicesProxyProtocol(t *testing.T) {
	f := harness.New(t)
	const podPort = 17001
	serveTCP(t, net.JoinHostPort(streamPodA, strconv.Itoa(podPort)), func(c net.Conn) {
		_ = c.SetDeadline(time.Now().Add(harness.DefaultTimeout))
		r := bufio.NewReader(c)
		header, err := r.ReadString('\n')
		if err != nil {
			return
		}
		// "PROXY TCP4 <src> <dst> <srcport> <dstport>\r\n"
		fields := strings.Fields(header)
		if len(fields) != 6 || fields[0] != "PROXY" {
			_, _ = c.Write([]byte("no PROXY header: " + header))
			return
		}
		rest := make([]byte, 5)
		if _, err := io.ReadFull(r, rest); err != nil {
			return
		}
		_, _ = fmt.Fprintf(c, "from %s:%s %s", fields[2], fields[4], rest)
	})
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "pp", Namespace: f.Namespace},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "pp", Protocol: corev1.ProtocolTCP, Port: 7001, TargetPort: intstr.FromInt32(podPort)},
		}},
	}
	if _, err := f.Client.CoreV1().Services(f.Namespace).Create(f.Ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Service pp: %v", err)
	}
	f.ApplyEndpointSlice(f.EndpointSlice("pp-1", "pp", "pp", podPort, harness.Endpoint{IP: streamPodA, Port: podPort, Ready: true, Serving: true}))
	port := harness.FreePort(t)
	applyConfigMap(f, "tcp-services", map[string]string{strconv.Itoa(port): f.Namespace + "/pp:pp:PROXY:PROXY"})
	r := f.StartReactor("--tcp-services-configmap=" + f.Namespace + "/tcp-services")
	r.WaitReady()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))

	r.Eventually(harness.DefaultTimeout, "the endpoint to be told the load balancer's client", func() (bool, string) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false, err.Error()
		}
		defer c.Close()
		got, err := tcpAsk(c, "PROXY TCP4 203.0.113.9 198.51.100.1 40000 9000\r\nhello")
		if err != nil {
			return false, err.Error()
		}
		return got == "from 203.0.113.9:40000 hello", "answered " + got
	})

	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := tcpAsk(c, "hello without a header\r\n"); err == nil {
		t.Errorf("a connection without a PROXY header was answered %q; want it closed", got)
	}
}
