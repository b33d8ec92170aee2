package tlsproxy

import (
	"errors"
	"net"
	"net/netip"
	"strconv"
	"testing"

	"go.uber.org/zap/zaptest"
)

// TestUDPRepliesLeaveFromTheAddressAsked: a UDP service listening on a wildcard address answers from the
// address the client sent to, not from the one the kernel would pick for the client (127.0.0.1 here): a
// client's connected socket drops replies from another address. Both an IPv4 and a dual-stack socket.
func TestUDPRepliesLeaveFromTheAddressAsked(t *testing.T) {
	for _, tc := range []struct {
		name, network string
		ip            net.IP
	}{
		{"IPv4 wildcard", "udp4", net.IPv4zero},
		{"dual-stack wildcard", "udp", net.IPv6unspecified},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := udpEcho(t, "a")
			u := NewUDP(UDPOptions{Log: zaptest.NewLogger(t)}, StreamRoute{Backend: "ns/dns:53", Endpoints: []netip.AddrPort{a}}, nil)
			c, err := net.ListenUDP(tc.network, &net.UDPAddr{IP: tc.ip})
			if err != nil {
				t.Fatal(err)
			}
			served := make(chan error, 1)
			go func() { served <- u.Serve(c) }()
			t.Cleanup(func() {
				if err := u.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
				if err := <-served; !errors.Is(err, ErrProxyClosed) {
					t.Errorf("Serve returned %v, want ErrProxyClosed", err)
				}
			})
			port := c.LocalAddr().(*net.UDPAddr).Port
			client := udpClient(t, net.JoinHostPort("127.0.0.2", strconv.Itoa(port)))
			if got := udpAsk(t, client, "one", bound); got != "a:one" {
				t.Fatalf("a client of 127.0.0.2 got %q, want a:one from 127.0.0.2", got)
			}
		})
	}
}
