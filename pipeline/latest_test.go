package pipeline

import (
	"testing"
)

func TestLatestEmpty(t *testing.T) {
	l := NewLatest[string]()
	if v, ok := l.Get(); ok || v != "" {
		t.Errorf("Get on a new Latest = %q, %v; want zero, false", v, ok)
	}
	select {
	case <-l.C():
		t.Error("a new Latest woke its consumer")
	default:
	}
}

func TestLatestCoalesces(t *testing.T) {
	l := NewLatest[int]()
	for i := 1; i <= 100; i++ {
		l.Set(i)
	}
	select {
	case <-l.C():
	default:
		t.Fatal("no wake-up after Set")
	}
	select {
	case <-l.C():
		t.Fatal("100 Sets caused more than one wake-up")
	default:
	}
	if v, ok := l.Get(); !ok || v != 100 {
		t.Errorf("Get = %d, %v; want the newest value 100", v, ok)
	}
	if v, _ := l.Get(); v != 100 {
		t.Errorf("second Get = %d; the value must stay until the next Set", v)
	}
	l.Set(101)
	select {
	case <-l.C():
	default:
		t.Fatal("no wake-up for a Set after the previous wake-up was taken")
	}
	if v, _ := l.Get(); v != 101 {
		t.Errorf("Get = %d, want 101", v)
	}
}

func TestLatestConsumerEndsOnTheNewestValue(t *testing.T) {
	l := NewLatest[int]()
	const n = 10000
	done := make(chan struct{})
	seen := make(chan int, 1)
	go func() {
		defer close(done)
		last := 0
		for range l.C() {
			v, _ := l.Get()
			if v < last {
				seen <- -v // went backwards
				return
			}
			last = v
			if v == n {
				seen <- v
				return
			}
		}
	}()
	for i := 1; i <= n; i++ {
		l.Set(i)
	}
	if got := receive(t, seen, "the consumer to see the newest value"); got != n {
		t.Fatalf("consumer saw values go backwards (at %d)", -got)
	}
	<-done
}
