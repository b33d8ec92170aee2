package streams

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/ingress-reactor/ingress-reactor/nginx"
	"github.com/ingress-reactor/ingress-reactor/tlsproxy"
)

// Entry is one usable line of a TCP or UDP services ConfigMap: `"<port>": "<namespace>/<service>:<port>[:PROXY][:PROXY]"`.
type Entry struct {
	// Port is the port the controller listens on (the ConfigMap key).
	Port int
	// UDP marks an entry of --udp-services-configmap.
	UDP bool
	// Service and ServicePort name the backend: a Service port by number or by name, of the entry's
	// protocol.
	Service     types.NamespacedName
	ServicePort intstr.IntOrString
	// DecodeProxy (the first PROXY) expects a PROXY protocol header from a load balancer in front on every
	// connection. TCP only.
	DecodeProxy bool
	// EncodeProxy (the second PROXY) sends the endpoint a PROXY protocol (v1) header with the client's
	// address. TCP only.
	EncodeProxy bool
}

// Protocol returns "tcp" or "udp", as the metrics spell it.
func (e Entry) Protocol() string {
	if e.UDP {
		return tlsproxy.ProtocolUDP
	}
	return tlsproxy.ProtocolTCP
}

// Backend returns "namespace/service:port", the Service as logs and metrics name it.
func (e Entry) Backend() string {
	return e.Service.String() + ":" + e.ServicePort.String()
}

// Upstream returns the upstream whose endpoints the entry uses.
func (e Entry) Upstream() nginx.Upstream {
	return nginx.NewStreamUpstream(e.Service, e.ServicePort, e.UDP)
}

// Route returns the proxy route for the entry with the given endpoints.
func (e Entry) Route(eps []netip.AddrPort) tlsproxy.StreamRoute {
	r := tlsproxy.StreamRoute{Backend: e.Backend(), Endpoints: eps, AcceptProxyProtocol: e.DecodeProxy}
	if e.EncodeProxy {
		// NGINX's "proxy_protocol on", which ingress-nginx renders for the second PROXY, sends version 1.
		r.ProxyProtocol = tlsproxy.ProxyProtocolV1
	}
	return r
}

// Problem is a ConfigMap entry that is refused, or applied without a part of it; Message says which and
// why, for the Warning Event and the log.
type Problem struct {
	Key     string
	Message string
}

// ParseEntries reads the data of a TCP (udp false) or UDP services ConfigMap. reserved maps the ports
// that the controller uses for something else to the flag that sets them; watchNamespace, when set, is
// the only namespace whose Services the controller sees. Entries come sorted by port, problems by key;
// a bad entry never affects the others.
func ParseEntries(data map[string]string, udp bool, reserved map[int]string, watchNamespace string) ([]Entry, []Problem) {
	var (
		entries  []Entry
		problems []Problem
		keys     = map[int][]string{} // the keys of the usable entries, by port
	)
	proto := "TCP"
	if udp {
		proto = "UDP"
	}
	for key, value := range data {
		refuse := func(format string, args ...any) {
			problems = append(problems, Problem{Key: key, Message: fmt.Sprintf("%s service %q: %q: ", proto, key, value) + fmt.Sprintf(format, args...) + "; the entry is not served"})
		}
		port, err := strconv.Atoi(strings.TrimSpace(key))
		if err != nil || port < 1 || port > 65535 {
			refuse("the key must be the port to listen on, a number from 1 to 65535")
			continue
		}
		if flag, ok := reserved[port]; ok {
			refuse("port %d is already used by the controller (%s)", port, flag)
			continue
		}
		fields := strings.Split(strings.TrimSpace(value), ":")
		if len(fields) < 2 || len(fields) > 4 {
			refuse("want <namespace>/<service>:<port>, optionally followed by :PROXY (decode) and :PROXY (encode)")
			continue
		}
		ns, name, ok := strings.Cut(fields[0], "/")
		if !ok {
			refuse("the Service must be given as <namespace>/<service>")
			continue
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			refuse("namespace %q: %s", ns, strings.Join(errs, "; "))
			continue
		}
		if errs := validation.IsDNS1035Label(name); len(errs) > 0 {
			refuse("Service name %q: %s", name, strings.Join(errs, "; "))
			continue
		}
		if watchNamespace != "" && ns != watchNamespace {
			refuse("namespace %s is not watched (--watch-namespace=%s)", ns, watchNamespace)
			continue
		}
		e := Entry{Port: port, UDP: udp, Service: types.NamespacedName{Namespace: ns, Name: name}}
		if n, err := strconv.Atoi(fields[1]); err == nil {
			if n < 1 || n > 65535 {
				refuse("Service port %d is not between 1 and 65535", n)
				continue
			}
			e.ServicePort = intstr.FromInt32(int32(n))
		} else if errs := validation.IsValidPortName(fields[1]); len(errs) == 0 {
			e.ServicePort = intstr.FromString(fields[1])
		} else {
			refuse("Service port %q is neither a number nor a port name", fields[1])
			continue
		}
		flags := []*bool{&e.DecodeProxy, &e.EncodeProxy}
		bad := false
		for i, f := range fields[2:] {
			switch {
			case f == "":
			case strings.EqualFold(f, "PROXY"):
				*flags[i] = true
			default:
				refuse("field %d is %q; want PROXY or nothing", i+3, f)
				bad = true
			}
			if bad {
				break
			}
		}
		if bad {
			continue
		}
		if udp && (e.DecodeProxy || e.EncodeProxy) {
			problems = append(problems, Problem{Key: key, Message: fmt.Sprintf("UDP service %q: %q: the PROXY protocol applies to TCP services only; "+
				"served without it, as ingress-nginx did", key, value)})
			e.DecodeProxy, e.EncodeProxy = false, false
		}
		entries = append(entries, e)
		keys[port] = append(keys[port], key)
	}
	entries, problems = dropDuplicatePorts(entries, keys, problems, proto)
	slices.SortFunc(entries, func(a, b Entry) int { return cmp.Compare(a.Port, b.Port) })
	slices.SortFunc(problems, func(a, b Problem) int { return cmp.Compare(a.Key, b.Key) })
	return entries, problems
}

// dropDuplicatePorts refuses every entry whose port another key also names ("9000" and "09000"): which
// one was meant cannot be told.
func dropDuplicatePorts(entries []Entry, keys map[int][]string, problems []Problem, proto string) ([]Entry, []Problem) {
	kept := entries[:0]
	reported := map[int]bool{}
	for _, e := range entries {
		ks := keys[e.Port]
		if len(ks) < 2 {
			kept = append(kept, e)
			continue
		}
		if !reported[e.Port] {
			reported[e.Port] = true
			slices.Sort(ks)
			problems = append(problems, Problem{Key: ks[0], Message: fmt.Sprintf("%s service port %d is given by several keys (%q); none of them is served",
				proto, e.Port, ks)})
		}
	}
	return kept, problems
}
