package strpack

import (
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

func TestJoin(t *testing.T) {
	parts := []string{"web", "", "uid-1", "42"}
	var ends [3]uint32
	joined := Join(parts, ends[:])
	if joined != "webuid-142" {
		t.Fatalf("joined %q", joined)
	}
	if ends != [3]uint32{3, 3, 8} {
		t.Fatalf("ends %v, want [3 3 8]", ends)
	}
	// Each part is found again from the ends, the last one running to the end.
	start := uint32(0)
	for i, want := range parts {
		end := uint32(len(joined))
		if i < len(ends) {
			end = ends[i]
		}
		if got := joined[start:end]; got != want {
			t.Errorf("part %d = %q, want %q", i, got, want)
		}
		start = end
	}
	if Join(nil, nil) != "" {
		t.Error("Join of nothing is not empty")
	}
}

// TestCopy: copies equal the input, in order, leave it as it was, and their text is one allocation.
func TestCopy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		parts := make([]string, rng.IntN(6))
		for i := range parts {
			b := make([]byte, rng.IntN(20))
			for j := range b {
				b[j] = "abc.-*0"[rng.IntN(7)]
			}
			parts[i] = string(b)
		}
		want := slices.Clone(parts)
		got := Copy(parts)
		if !slices.Equal(parts, want) {
			t.Fatalf("Copy changed its input to %q", parts)
		}
		if cap(got) != len(got) {
			t.Fatalf("Copy(%q) has room for %d strings", want, cap(got))
		}
		if len(want) == 0 {
			if got != nil {
				t.Fatalf("Copy(%q) = %q, want nil", want, got)
			}
			continue
		}
		if !slices.Equal(got, want) {
			t.Fatalf("Copy(%q) = %q", want, got)
		}
		var next uintptr
		for i, n := range got {
			if n == "" {
				continue
			}
			if unsafe.StringData(n) == unsafe.StringData(parts[i]) {
				t.Fatalf("Copy(%q): string %d shares the input's bytes", want, i)
			}
			at := uintptr(unsafe.Pointer(unsafe.StringData(n)))
			if next != 0 && at != next {
				t.Fatalf("Copy(%q): string %d is not stored right after the one before", want, i)
			}
			next = at + uintptr(len(n))
		}
	}
}
