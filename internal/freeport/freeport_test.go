package freeport

import "testing"

// TestGetNeverRepeats: many ports in a row, each taken and released at once, are all different.
func TestGetNeverRepeats(t *testing.T) {
	seen := map[int]bool{}
	for range 500 {
		p := Get(t)
		if p <= 0 || p > 65535 {
			t.Fatalf("port %d out of range", p)
		}
		if seen[p] {
			t.Fatalf("port %d returned twice", p)
		}
		seen[p] = true
	}
}
