package nginx

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// mergeAll translates the Ingresses in objs (with the Services in objs) and merges them with opts.
func mergeAll(t *testing.T, objs []any, opts MergeOptions) MergeResult {
	t.Helper()
	svcs := services{}
	var ts []*IngressTranslation
	for _, o := range objs {
		if s, ok := o.(*corev1.Service); ok {
			svcs[nn(s.Namespace, s.Name)] = s
		}
	}
	for _, o := range objs {
		if ing, ok := o.(*networkingv1.Ingress); ok {
			tr, err := TranslateIngress(ing, svcs, DefaultTranslateOptions())
			if err != nil {
				t.Fatalf("translate %s/%s: %v", ing.Namespace, ing.Name, err)
			}
			ts = append(ts, tr)
		}
	}
	return MergeAll(ts, opts)
}

// server returns the model's server for host.
func server(m Model, host Hostname) (Server, bool) {
	for _, s := range m.Servers {
		if s.Host == host {
			return s, true
		}
	}
	return Server{}, false
}

func TestHostOwnership(t *testing.T) {
	objs := []any{service("team-a", "web", port(80, "http")), service("team-b", "web", port(80, "http")),
		ingress("team-a", "site", rule("shop.example", prefix("/", "web", 80))),
		ingress("team-b", "login", age(time.Minute),
			rule("shop.example", prefix("/login", "web", 80), exact("/", "web", 80)),
			rule("b.example", prefix("/", "web", 80))),
	}
	tests := map[string]struct {
		ownership     HostOwnership
		wantPaths     map[string]string // path of shop.example -> namespace serving it
		wantConflicts []Conflict
		wantTakeovers []Takeover
	}{
		"shared: B's narrower paths are served and announced as takeovers": {
			ownership: HostsShared,
			wantPaths: map[string]string{"/ Prefix": "team-a", "/ Exact": "team-b", "/login Prefix": "team-b"},
			wantTakeovers: []Takeover{
				{Taker: nn("team-b", "login"), From: nn("team-a", "site"), Host: "shop.example", Path: "/", PathType: PathExact, FromPath: "/"},
				{Taker: nn("team-b", "login"), From: nn("team-a", "site"), Host: "shop.example", Path: "/login", PathType: PathPrefix, FromPath: "/"},
			},
		},
		"namespace: the oldest Ingress's namespace owns the host; B keeps its own host": {
			ownership:     HostsByNamespace,
			wantPaths:     map[string]string{"/ Prefix": "team-a"},
			wantConflicts: []Conflict{{Kind: ConflictHostOwner, Loser: nn("team-b", "login"), Winner: nn("team-a", "site"), Host: "shop.example"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := mergeAll(t, objs, MergeOptions{Ownership: tc.ownership})
			s, ok := server(got.Model, "shop.example")
			if !ok {
				t.Fatal("no server for shop.example")
			}
			paths := map[string]string{}
			for _, l := range s.Locations {
				paths[l.Path+" "+l.PathType.String()] = l.Ingress.Namespace
			}
			same(t, "paths of shop.example", paths, tc.wantPaths)
			if _, ok := server(got.Model, "b.example"); !ok {
				t.Error("team-b's own host b.example is not served")
			}
			same(t, "conflicts", got.Conflicts, tc.wantConflicts)
			same(t, "takeovers", got.Takeovers, tc.wantTakeovers)
		})
	}
}

func TestTakeovers(t *testing.T) {
	a := service("team-a", "web", port(80, "http"))
	b := service("team-b", "web", port(80, "http"))
	tests := map[string]struct {
		objs []any
		want []Takeover
	}{
		"an older narrower path is not taken by a younger broader one": {
			objs: []any{a, b,
				ingress("team-a", "api", rule("h.example", prefix("/api", "web", 80))),
				ingress("team-b", "root", age(time.Minute), rule("h.example", prefix("/", "web", 80))),
			},
		},
		"element-wise: /foobar is not under /foo": {
			objs: []any{a, b,
				ingress("team-a", "foo", rule("h.example", prefix("/foo", "web", 80))),
				ingress("team-b", "foobar", age(time.Minute), rule("h.example", prefix("/foobar", "web", 80), prefix("/foo/bar", "web", 80))),
			},
			want: []Takeover{{Taker: nn("team-b", "foobar"), From: nn("team-a", "foo"), Host: "h.example", Path: "/foo/bar", PathType: PathPrefix, FromPath: "/foo"}},
		},
		"one namespace carving its own paths is no takeover": {
			objs: []any{a,
				ingress("team-a", "root", rule("h.example", prefix("/", "web", 80))),
				ingress("team-a", "login", age(time.Minute), rule("h.example", prefix("/login", "web", 80))),
			},
		},
		"an Exact path of the older Ingress is not taken": {
			objs: []any{a, b,
				ingress("team-a", "exact", rule("h.example", exact("/login", "web", 80))),
				ingress("team-b", "login", age(time.Minute), rule("h.example", prefix("/login/x", "web", 80))),
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			same(t, "takeovers", mergeAll(t, tc.objs, MergeOptions{}).Takeovers, tc.want)
		})
	}
}

func TestTakeoverMessages(t *testing.T) {
	tk := Takeover{Taker: nn("b", "login"), From: nn("a", "site"), Host: "shop.example", Path: "/login", PathType: PathPrefix, FromPath: "/"}
	if got, want := tk.TakerMessage(), `path "/login" (Prefix) on host shop.example takes requests that Ingress a/site of namespace a served with its path "/" (Prefix)`; got != want {
		t.Errorf("taker message:\n got %s\nwant %s", got, want)
	}
	if got, want := tk.FromMessage(), `requests for path "/login" (Prefix) on host shop.example, which this Ingress's path "/" (Prefix) served, now go to Ingress b/login of namespace b`; got != want {
		t.Errorf("from message:\n got %s\nwant %s", got, want)
	}
	c := Conflict{Kind: ConflictHostOwner, Loser: nn("b", "login"), Winner: nn("a", "site"), Host: "shop.example"}
	if got, want := c.Message(), `rules for host shop.example are not served: namespace a owns the host (its Ingress a/site is the oldest routing it) and hosts are owned by one namespace (--host-ownership=namespace)`; got != want {
		t.Errorf("conflict message:\n got %s\nwant %s", got, want)
	}
}

func TestParseHostOwnership(t *testing.T) {
	for _, ok := range []string{"shared", "namespace"} {
		if got, err := ParseHostOwnership(ok); err != nil || string(got) != ok {
			t.Errorf("ParseHostOwnership(%q) = %q, %v", ok, got, err)
		}
	}
	for _, bad := range []string{"", "Shared", "tenant"} {
		if _, err := ParseHostOwnership(bad); err == nil {
			t.Errorf("ParseHostOwnership(%q) accepted it", bad)
		}
	}
}
