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
