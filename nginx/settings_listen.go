package nginx

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
)

// The ConfigMap's keys about NGINX's public listeners (issue #18): reuse-port, disable-ipv6 and
// bind-address. The loopback listeners (the status server, the passthrough proxy's hand-over port) keep
// their addresses whatever these say.

// ListenSettings are the listener keys.
type ListenSettings struct {
	// ReusePort gives each worker a listening socket of its own (SO_REUSEPORT: reuseport).
	ReusePort bool
	// DisableIPv6 drops the IPv6 listeners.
	DisableIPv6 bool
	// BindIPv4 and BindIPv6 are bind-address's addresses by family, in canonical form; empty: the
	// family's wildcard.
	BindIPv4, BindIPv6 []string
}

// maxBindAddresses bounds bind-address.
const maxBindAddresses = 16

func init() {
	registerSettings(
		settingKey{Name: "reuse-port", Default: "true", Values: boolValues,
			Doc: "Each NGINX worker gets a listening socket of its own on the HTTP and HTTPS ports (`reuseport`), and the kernel spreads " +
				"new connections over them.",
			set: boolField(func(s *Settings) *bool { return &s.Listen.ReusePort })},
		settingKey{Name: "disable-ipv6", Default: "false", Values: boolValues,
			Doc: "Without it, NGINX listens on IPv6 (`[::]`, or bind-address's IPv6 addresses) besides IPv4 when the host has IPv6 " +
				"(checked at the start, as ingress-nginx does); `true` keeps to IPv4.",
			set: boolField(func(s *Settings) *bool { return &s.Listen.DisableIPv6 })},
		settingKey{Name: "bind-address", Values: fmt.Sprintf("IPv4 and IPv6 addresses separated by commas (at most %d); empty: every address", maxBindAddresses),
			Doc: "The addresses NGINX's HTTP and HTTPS listeners take instead of the wildcard, per family: IPv4 addresses replace the IPv4 " +
				"wildcard, IPv6 addresses the IPv6 one (which exists only with IPv6, see disable-ipv6). An address the pod does not have " +
				"makes NGINX fail to start the new configuration: the controller keeps serving the previous one and reports the failed reload.",
			Difference: "An entry that is not an IP address (or has a zone) makes the whole value invalid (its last good value stays applied); " +
				"ingress-nginx skipped the entry. With --enable-ssl-passthrough the public HTTPS port belongs to the passthrough proxy, which " +
				"listens on every address, and NGINX's TLS listener stays on its loopback port.",
			set: func(s *Settings, v string) error {
				v4, v6, err := parseBindAddresses(v)
				if err != nil {
					return err
				}
				s.Listen.BindIPv4, s.Listen.BindIPv6 = v4, v6
				return nil
			}},
	)
}

// parseBindAddresses splits a bind-address value into canonical IPv4 and IPv6 addresses, without repeats.
func parseBindAddresses(v string) (v4, v6 []string, err error) {
	n := 0
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		a, perr := netip.ParseAddr(item)
		if perr != nil || a.Zone() != "" {
			return nil, nil, fmt.Errorf("%s is not an IP address", quoteValue(item))
		}
		a = a.Unmap()
		if n++; n > maxBindAddresses {
			return nil, nil, fmt.Errorf("at most %d addresses", maxBindAddresses)
		}
		list := &v4
		if a.Is6() {
			list = &v6
		}
		if s := a.String(); !slices.Contains(*list, s) {
			*list = append(*list, s)
		}
	}
	return v4, v6, nil
}

// HostHasIPv6 reports whether this host (the pod's network namespace) has IPv6: the kernel has it on and
// some interface has an IPv6 address. It is the default of RenderConfig.IPv6, as ingress-nginx decided
// whether to listen on IPv6.
func HostHasIPv6() bool {
	disabled, err := os.ReadFile("/proc/sys/net/ipv6/conf/all/disable_ipv6")
	if err != nil || strings.TrimSpace(string(disabled)) == "1" {
		return false
	}
	addrs, err := os.ReadFile("/proc/net/if_inet6")
	return err == nil && len(strings.TrimSpace(string(addrs))) > 0
}

// listens returns the quoted listen addresses of a public port: bind-address's addresses, else
// cfg.ListenAddress, else the wildcards (IPv6 with cfg.IPv6, unless disable-ipv6).
func listens(q *quoter, cfg RenderConfig, port int) []string {
	p := fmt.Sprint(port)
	l := cfg.Settings.Listen
	ipv6 := cfg.IPv6 && !l.DisableIPv6
	if cfg.ListenAddress != "" && len(l.BindIPv4) == 0 && len(l.BindIPv6) == 0 {
		a := netip.MustParseAddr(cfg.ListenAddress)
		return []string{q.quote(netip.AddrPortFrom(a, uint16(port)).String())}
	}
	var out []string
	if len(l.BindIPv4) == 0 {
		out = append(out, q.quote(p))
	}
	for _, a := range l.BindIPv4 {
		out = append(out, q.quote(a+":"+p))
	}
	if !ipv6 {
		return out
	}
	if len(l.BindIPv6) == 0 {
		out = append(out, q.quote("[::]:"+p))
	}
	for _, a := range l.BindIPv6 {
		out = append(out, q.quote("["+a+"]:"+p))
	}
	return out
}
