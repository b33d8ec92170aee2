package tlsproxy

import (
	"net/netip"
	"testing"
)

func TestTableLookup(t *testing.T) {
	table := NewTable([]Route{
		{Host: "shop.example.com", Backend: "shop"},
		{Host: "*.example.com", Backend: "wild"},
		{Host: "*.apps.example.com", Backend: "apps"},
		{Host: "shop.example.com", Backend: "second-claim"}, // the first claim wins
		{Host: "", Backend: "no-host"},
		{Host: "nobackend.example.com"},
	})
	tests := map[string]string{
		"shop.example.com":         "shop",
		"cart.example.com":         "wild",
		"example.com":              "",
		"a.b.example.com":          "", // a wildcard covers exactly one label
		"x.apps.example.com":       "apps",
		"apps.example.com":         "wild",
		"shop.example.com.evil.io": "",
		"":                         "",
		".example.com":             "",
		"nobackend.example.com":    "wild",
	}
	for name, want := range tests {
		r, ok := table.Lookup(name)
		if ok != (want != "") || r.Backend != want {
			t.Errorf("Lookup(%q) = %q, %v; want %q", name, r.Backend, ok, want)
		}
	}
	if table.Len() != 3 {
		t.Errorf("Len = %d, want 3", table.Len())
	}
	var nilTable *Table
	if _, ok := nilTable.Lookup("shop.example.com"); ok || nilTable.Len() != 0 {
		t.Error("a nil table must be empty")
	}
}

// TestRoutePickRoundRobin: consecutive connections start at consecutive endpoints, and each gets the
// following ones as fallbacks, bounded by the attempts.
func TestRoutePickRoundRobin(t *testing.T) {
	eps := []netip.AddrPort{
		netip.MustParseAddrPort("192.0.2.1:443"),
		netip.MustParseAddrPort("192.0.2.2:443"),
		netip.MustParseAddrPort("192.0.2.3:443"),
	}
	table := NewTable([]Route{{Host: "a.example", Backend: "a", Endpoints: eps}})
	r := table.lookup("a.example")
	firsts := map[netip.AddrPort]int{}
	var prev netip.AddrPort
	for i := range 30 {
		got := r.pick(nil, 2)
		if len(got) != 2 {
			t.Fatalf("pick returned %d endpoints, want 2 attempts", len(got))
		}
		if got[0] == got[1] {
			t.Fatalf("the fallback repeats the first endpoint: %v", got)
		}
		if i > 0 && got[0] == prev {
			t.Fatalf("two connections in a row start at %v", prev)
		}
		prev = got[0]
		firsts[got[0]]++
	}
	for _, ep := range eps {
		if firsts[ep] != 10 {
			t.Errorf("endpoint %v was first %d times of 30, want 10", ep, firsts[ep])
		}
	}
	if got := r.pick(nil, 10); len(got) != 3 {
		t.Errorf("with more attempts than endpoints, pick returned %d, want each endpoint once", len(got))
	}
	empty := NewTable([]Route{{Host: "b.example", Backend: "b"}}).lookup("b.example")
	if got := empty.pick(nil, 3); len(got) != 0 {
		t.Errorf("a route without endpoints picked %v", got)
	}
}

// TestNewTableCopiesEndpoints: a caller reusing its slice after building a table cannot change the table.
func TestNewTableCopiesEndpoints(t *testing.T) {
	eps := []netip.AddrPort{netip.MustParseAddrPort("192.0.2.1:443")}
	table := NewTable([]Route{{Host: "a.example", Backend: "a", Endpoints: eps}})
	eps[0] = netip.MustParseAddrPort("192.0.2.99:443")
	if r, _ := table.Lookup("a.example"); r.Endpoints[0] != netip.MustParseAddrPort("192.0.2.1:443") {
		t.Errorf("table endpoint changed to %v with the caller's slice", r.Endpoints[0])
	}
}
