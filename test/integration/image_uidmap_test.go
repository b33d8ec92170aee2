//go:build integration

package integration

import "testing"

func TestMapsImageIDs(t *testing.T) {
	for uidMap, want := range map[string]bool{
		"         0          0 4294967295\n": true,  // the initial user namespace
		"         0       1000          1\n": false, // unshare --map-root-user (hack/in-netns.sh without root)
		"         0     100000      65536\n": true,  // a subordinate range
		"":                                   false,
	} {
		if got := mapsImageIDs(uidMap); got != want {
			t.Errorf("mapsImageIDs(%q) = %v, want %v", uidMap, got, want)
		}
	}
}

func TestBuiltFrom(t *testing.T) {
	head := "060cc13a1b2c3d4e5f60718293a4b5c6d7e8f901"
	for rev, want := range map[string]bool{"060cc13": true, "060cc13a1b": true, "a9561b0": false, "": false, "unknown": false, "06": false} {
		if got := builtFrom(rev, head); got != want {
			t.Errorf("builtFrom(%q, %s) = %v, want %v", rev, head, got, want)
		}
	}
}
