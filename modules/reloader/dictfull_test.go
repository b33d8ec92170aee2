package reloader

import (
	"maps"
	"slices"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ingress-reactor/ingress-reactor/nginx"
)

// TestDictRoom follows what a dict had no room for across pushes, and logs each change once.
func TestDictRoom(t *testing.T) {
	full := func(names ...string) *nginx.DictFullError {
		return &nginx.DictFullError{Dict: "certificates", NotStored: names, Message: "certificates dict full"}
	}
	steps := []struct {
		name    string
		full    bool
		sent    []string
		answer  *nginx.DictFullError
		want    []string
		wantLog string // "" when nothing is logged
	}{
		{"a full push that did not fit", true, []string{"a", "b", "c"}, full("b", "c"), []string{"b", "c"}, "certificates dict full: raise --certificates-dict-size; what did not fit keeps what it had before, if anything"},
		{"the same answer again", true, []string{"a", "b", "c"}, full("b", "c"), []string{"b", "c"}, ""},
		{"an incremental push that fit: the others still did not", false, []string{"a", "d"}, nil, []string{"b", "c"}, ""},
		{"c sent again and stored", false, []string{"c"}, nil, []string{"b"}, "certificates dict full: raise --certificates-dict-size; what did not fit keeps what it had before, if anything"},
		{"a full push that fit", true, []string{"a", "b"}, nil, nil, "certificates dict has room for everything again"},
		{"nothing to report", false, []string{"a"}, nil, nil, ""},
	}
	d := newDictRoom("certificates", "--certificates-dict-size")
	core, logs := observer.New(zapcore.InfoLevel)
	log := zap.New(core)
	for _, s := range steps {
		if d.pushed(s.full, s.sent, s.answer) {
			d.log(log, s.answer)
		}
		if got := slices.Sorted(maps.Keys(d.notStored)); !slices.Equal(got, s.want) {
			t.Errorf("%s: not stored %v, want %v", s.name, got, s.want)
		}
		entries := logs.TakeAll()
		switch {
		case s.wantLog == "" && len(entries) != 0:
			t.Errorf("%s: logged %q, want nothing", s.name, entries[0].Message)
		case s.wantLog != "" && (len(entries) != 1 || entries[0].Message != s.wantLog):
			t.Errorf("%s: logged %v, want once %q", s.name, entries, s.wantLog)
		}
	}
}
