package streams

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestParseEntries(t *testing.T) {
	reserved := map[int]string{80: "--http-port", 10254: "--healthz-port"}
	db := types.NamespacedName{Namespace: "default", Name: "db"}
	tests := map[string]struct {
		data  map[string]string
		udp   bool
		watch string
		want  []Entry
		// problems are substrings of the messages, by key.
		problems map[string]string
	}{
		"service port by number": {
			data: map[string]string{"9000": "default/db:5432"},
			want: []Entry{{Port: 9000, Service: db, ServicePort: intstr.FromInt32(5432)}},
		},
		"service port by name": {
			data: map[string]string{"9000": "default/db:postgres"},
			want: []Entry{{Port: 9000, Service: db, ServicePort: intstr.FromString("postgres")}},
		},
		"first PROXY decodes": {
			data: map[string]string{"9000": "default/db:5432:PROXY"},
			want: []Entry{{Port: 9000, Service: db, ServicePort: intstr.FromInt32(5432), DecodeProxy: true}},
		},
		"second PROXY encodes, the first left empty": {
			data: map[string]string{"9000": "default/db:5432::PROXY"},
			want: []Entry{{Port: 9000, Service: db, ServicePort: intstr.FromInt32(5432), EncodeProxy: true}},
		},
		"both, any case": {
			data: map[string]string{"9000": "default/db:5432:proxy:Proxy"},
			want: []Entry{{Port: 9000, Service: db, ServicePort: intstr.FromInt32(5432), DecodeProxy: true, EncodeProxy: true}},
		},
		"spaces around key and value": {
			data: map[string]string{" 9000 ": " default/db:5432\n"},
			want: []Entry{{Port: 9000, Service: db, ServicePort: intstr.FromInt32(5432)}},
		},
		"sorted by port; bad entries leave the others": {
			data: map[string]string{"9001": "default/db:5432", "9000": "default/db:5433", "x": "default/db:1", "80": "default/db:80"},
			want: []Entry{
				{Port: 9000, Service: db, ServicePort: intstr.FromInt32(5433)},
				{Port: 9001, Service: db, ServicePort: intstr.FromInt32(5432)},
			},
			problems: map[string]string{"x": "the key must be the port", "80": "already used by the controller (--http-port)"},
		},
		"UDP": {
			data: map[string]string{"53": "kube-system/kube-dns:53"}, udp: true,
			want: []Entry{{Port: 53, UDP: true, Service: types.NamespacedName{Namespace: "kube-system", Name: "kube-dns"}, ServicePort: intstr.FromInt32(53)}},
		},
		"UDP ignores PROXY, with a warning": {
			data: map[string]string{"53": "kube-system/kube-dns:53:PROXY:PROXY"}, udp: true,
			want:     []Entry{{Port: 53, UDP: true, Service: types.NamespacedName{Namespace: "kube-system", Name: "kube-dns"}, ServicePort: intstr.FromInt32(53)}},
			problems: map[string]string{"53": "TCP services only"},
		},
		"reserved port refused for UDP too": {
			data: map[string]string{"10254": "default/db:53"}, udp: true,
			problems: map[string]string{"10254": "--healthz-port"},
		},
		"port out of range": {
			data:     map[string]string{"0": "default/db:1", "65536": "default/db:1", "-1": "default/db:1"},
			problems: map[string]string{"0": "1 to 65535", "65536": "1 to 65535", "-1": "1 to 65535"},
		},
		"no namespace": {
			data:     map[string]string{"9000": "db:5432"},
			problems: map[string]string{"9000": "<namespace>/<service>"},
		},
		"no port": {
			data:     map[string]string{"9000": "default/db"},
			problems: map[string]string{"9000": "want <namespace>/<service>:<port>"},
		},
		"too many fields": {
			data:     map[string]string{"9000": "default/db:1:PROXY:PROXY:PROXY"},
			problems: map[string]string{"9000": "want <namespace>/<service>:<port>"},
		},
		"bad PROXY field": {
			data:     map[string]string{"9000": "default/db:1:PROXYv2", "9001": "default/db:1::yes"},
			problems: map[string]string{"9000": `field 3 is "PROXYv2"`, "9001": `field 4 is "yes"`},
		},
		"bad names": {
			data: map[string]string{"9000": "Default/db:1", "9001": "default/1db:1", "9002": "default/db:99999", "9003": "default/db:not_a_port",
				"9004": "default/db/x:1", "9005": "/db:1"},
			problems: map[string]string{"9000": "namespace", "9001": "Service name", "9002": "not between 1 and 65535", "9003": "neither a number nor a port name",
				"9004": "Service name", "9005": "namespace"},
		},
		"injection attempts are refused": {
			data:     map[string]string{"9000": "default/db:1;\nlisten 1", "9001": "default/db:1 proxy_pass x"},
			problems: map[string]string{"9000": "", "9001": ""},
		},
		"one port under two keys": {
			data:     map[string]string{"9000": "default/db:1", "09000": "default/db:2", "9001": "default/db:3"},
			want:     []Entry{{Port: 9001, Service: db, ServicePort: intstr.FromInt32(3)}},
			problems: map[string]string{"09000": "port 9000 is given by several keys"},
		},
		"namespace not watched": {
			data: map[string]string{"9000": "other/db:1", "9001": "default/db:1"}, watch: "default",
			want:     []Entry{{Port: 9001, Service: db, ServicePort: intstr.FromInt32(1)}},
			problems: map[string]string{"9000": "--watch-namespace=default"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, problems := ParseEntries(tc.data, tc.udp, reserved, tc.watch)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("entries\n got %+v\nwant %+v", got, tc.want)
			}
			if len(problems) != len(tc.problems) {
				t.Errorf("problems = %+v, want one for each of %v", problems, tc.problems)
			}
			for _, p := range problems {
				want, ok := tc.problems[p.Key]
				if !ok || !strings.Contains(p.Message, want) {
					t.Errorf("problem for %q = %q, want it to contain %q", p.Key, p.Message, want)
				}
				if !strings.Contains(p.Message, p.Key) && strings.TrimSpace(p.Key) == p.Key {
					t.Errorf("problem %q does not name its key %q", p.Message, p.Key)
				}
			}
		})
	}
}

// TestEntryRoute: the second PROXY sends version 1, as NGINX's proxy_protocol did; names are distinct per
// protocol.
func TestEntryRoute(t *testing.T) {
	e := Entry{Port: 9000, Service: types.NamespacedName{Namespace: "default", Name: "db"}, ServicePort: intstr.FromInt32(5432), DecodeProxy: true, EncodeProxy: true}
	r := e.Route(nil)
	if r.Backend != "default/db:5432" || !r.AcceptProxyProtocol || r.ProxyProtocol.String() != "v1" {
		t.Errorf("route = %+v", r)
	}
	u := e
	u.UDP = true
	if e.Upstream().Name == u.Upstream().Name || !strings.HasPrefix(string(e.Upstream().Name), "tcp-") || !strings.HasPrefix(string(u.Upstream().Name), "udp-") {
		t.Errorf("upstream names %q and %q: want tcp- and udp- names of their own", e.Upstream().Name, u.Upstream().Name)
	}
}

// FuzzParseEntries: whatever a ConfigMap holds, an entry that is accepted names a valid port, namespace,
// Service and Service port, and none is both accepted and refused.
func FuzzParseEntries(f *testing.F) {
	for _, seed := range [][2]string{
		{"9000", "default/db:5432"}, {"53", "kube-system/kube-dns:dns:PROXY:PROXY"}, {"x", "a/b"},
		{"9000", "default/db:1;\nlisten 1"}, {"9000", "default/db:1::PROXY"}, {"09000", "a/b:c:"},
	} {
		f.Add(seed[0], seed[1], false)
	}
	f.Fuzz(func(t *testing.T, key, value string, udp bool) {
		entries, problems := ParseEntries(map[string]string{key: value}, udp, map[int]string{80: "--http-port"}, "")
		if len(entries) > 1 {
			t.Fatalf("one key gave %d entries", len(entries))
		}
		for _, e := range entries {
			if e.Port < 1 || e.Port > 65535 || e.Port == 80 {
				t.Fatalf("accepted port %d", e.Port)
			}
			for _, s := range []string{e.Service.Namespace, e.Service.Name, e.ServicePort.String()} {
				if s == "" || strings.ContainsAny(s, " \t\r\n;:/{}\"'$\\") {
					t.Fatalf("accepted %q from %q: %+v", s, value, e)
				}
			}
			if udp && (e.DecodeProxy || e.EncodeProxy) {
				t.Fatalf("UDP entry with PROXY: %+v", e)
			}
			for _, p := range problems {
				if strings.Contains(p.Message, "not served") {
					t.Fatalf("entry %+v both accepted and refused: %s", e, p.Message)
				}
			}
		}
	})
}
