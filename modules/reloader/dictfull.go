package reloader

import (
	"errors"
	"maps"
	"slices"

	"go.uber.org/zap"

	"github.com/ingress-reactor/ingress-reactor/nginx"
)

// dictRoom follows the entries that a data-plane store (a shared dict) had no room for, from the
// answers to the pushes into it, for the log and the ingress_reactor_shared_dict_not_stored metric.
// A push answered with *nginx.DictFullError is a partial success: what fit is live.
type dictRoom struct {
	// dict is "endpoints" or "certificates"; flag the command-line flag that sizes it.
	dict, flag string
	// notStored are the names (upstreams, certificate IDs, SNI hosts) that the data plane last refused
	// for want of room and that no later push stored.
	notStored map[string]struct{}
}

func newDictRoom(dict, flag string) *dictRoom {
	return &dictRoom{dict: dict, flag: flag, notStored: map[string]struct{}{}}
}

// dictFull returns the partial success in err, or nil.
func dictFull(err error) *nginx.DictFullError {
	var e *nginx.DictFullError
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// pushed records the answer to a push that carried the names sent (full: every entry of the store)
// and reports whether the set of names without room changed.
func (d *dictRoom) pushed(full bool, sent []string, e *nginx.DictFullError) (changed bool) {
	before := maps.Clone(d.notStored)
	if full {
		clear(d.notStored)
	}
	for _, name := range sent {
		delete(d.notStored, name)
	}
	if e != nil {
		for _, name := range e.NotStored {
			d.notStored[name] = struct{}{}
		}
		for _, host := range e.HostsNotStored {
			d.notStored[string(host)] = struct{}{}
		}
	}
	return !maps.Equal(before, d.notStored)
}

// log says what the store holds, once per change of the names without room.
func (d *dictRoom) log(log *zap.Logger, e *nginx.DictFullError) {
	if len(d.notStored) == 0 {
		log.Info(d.dict+" dict has room for everything again", zap.String("dict", d.dict))
		return
	}
	names := slices.Sorted(maps.Keys(d.notStored))
	msg := ""
	if e != nil {
		msg = e.Message
	}
	log.Error(d.dict+" dict full: raise "+d.flag+"; what did not fit keeps what it had before, if anything",
		zap.String("dict", d.dict), zap.Int("not_stored", len(names)), zap.Strings("first", names[:min(len(names), 10)]),
		zap.String("nginx", msg))
}
