package reloader

import (
	"context"
	"iter"
	"maps"
	"slices"
	"strings"

	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/nginx"
)

// endpointBatch is one endpoint push: upstream -> its endpoints (nil for an upstream that is gone).
type endpointBatch = map[nginx.UpstreamName][]nginx.Endpoint

// endpointStore is the endpoint lane's desired state: the endpoint list of every upstream (the list
// each EndpointsChange carried, not a copy: a published list is never modified), and the upstreams
// changed since the last push.
type endpointStore struct {
	lists endpointTable
	dirty map[nginx.UpstreamName]struct{}
}

func newEndpointStore() *endpointStore {
	return &endpointStore{dirty: map[nginx.UpstreamName]struct{}{}}
}

// apply records one EndpointsChange.
func (s *endpointStore) apply(c modules.EndpointsChange) {
	if c.Removed {
		s.lists.remove(c.Upstream.Name)
	} else {
		s.lists.set(c.Upstream.Name, c.Endpoints)
	}
	s.markDirty(c.Upstream.Name)
}

func (s *endpointStore) markDirty(name nginx.UpstreamName) { s.dirty[name] = struct{}{} }

func (s *endpointStore) take(full bool) (endpointBatch, bool) {
	var batch endpointBatch
	if full {
		batch = make(endpointBatch, s.lists.len())
		for name, eps := range s.lists.all() {
			batch[name] = eps
		}
	} else {
		batch = make(endpointBatch, len(s.dirty))
		for name := range s.dirty {
			batch[name], _ = s.lists.get(name) // nil for removed upstreams: emptied
		}
	}
	s.dirty = map[nginx.UpstreamName]struct{}{}
	return batch, full || len(batch) > 0
}

func (s *endpointStore) send(ctx context.Context, a Applier, batch endpointBatch, full bool) error {
	return a.SetEndpoints(ctx, batch, full)
}

func (s *endpointStore) names(batch endpointBatch) []string {
	out := make([]string, 0, len(batch))
	for name := range batch {
		out = append(out, string(name))
	}
	return out
}

// failed marks the batch's upstreams changed again: the next push sends their current lists. A full
// batch needs nothing here, as the lane pushes everything again.
func (s *endpointStore) failed(batch endpointBatch) {
	for name := range batch {
		s.markDirty(name)
	}
}

// stored marks the upstreams that did not fit as changed, so they go out with the next push.
func (s *endpointStore) stored(batch endpointBatch, partial *nginx.DictFullError) {
	if partial == nil {
		return
	}
	for _, name := range partial.NotStored {
		if _, ok := batch[nginx.UpstreamName(name)]; ok {
			s.markDirty(nginx.UpstreamName(name))
		}
	}
}

// complete is always true: a full push carries every endpoint list.
func (s *endpointStore) complete() bool { return true }

// endpointTable maps upstream names to endpoint lists, in about 40 bytes per upstream: a list sorted by
// name, beside two small maps for the upstreams added to it and removed from it since it was last
// rebuilt. A map of every upstream took about 80 bytes per upstream at 20,000 (its slots, control
// bytes and free room), a megabyte and a half for two upstreams per Ingress at 10,000 Ingresses. A
// change of an upstream the list holds is made in place; the list is rebuilt once the maps hold an
// eighth of its length, so a rebuild's copy costs a few entries per change.
type endpointTable struct {
	// sorted holds upstreams by name, unique, removed ones included until the next rebuild.
	sorted []endpointEntry
	// added holds the upstreams that sorted lacks; removed the upstreams of sorted that are gone.
	added   map[nginx.UpstreamName][]nginx.Endpoint
	removed map[nginx.UpstreamName]struct{}
}

// endpointEntry is one upstream's endpoint list.
type endpointEntry struct {
	name nginx.UpstreamName
	eps  []nginx.Endpoint
}

// minRebuild is how many added and removed upstreams the table lets gather before it rebuilds its
// list, at least: a small table is rebuilt seldom, too.
const minRebuild = 256

func (t *endpointTable) find(name nginx.UpstreamName) (int, bool) {
	return slices.BinarySearchFunc(t.sorted, name, func(e endpointEntry, n nginx.UpstreamName) int {
		return strings.Compare(string(e.name), string(n))
	})
}

// len returns the number of upstreams.
func (t *endpointTable) len() int { return len(t.sorted) - len(t.removed) + len(t.added) }

// get returns the list of upstream name, and false when the table has none.
func (t *endpointTable) get(name nginx.UpstreamName) ([]nginx.Endpoint, bool) {
	if eps, ok := t.added[name]; ok {
		return eps, true
	}
	if _, gone := t.removed[name]; gone {
		return nil, false
	}
	if i, ok := t.find(name); ok {
		return t.sorted[i].eps, true
	}
	return nil, false
}

// set makes eps the list of upstream name.
func (t *endpointTable) set(name nginx.UpstreamName, eps []nginx.Endpoint) {
	if i, ok := t.find(name); ok {
		t.sorted[i].eps = eps
		delete(t.removed, name)
		return
	}
	if t.added == nil {
		t.added = map[nginx.UpstreamName][]nginx.Endpoint{}
	}
	t.added[name] = eps
	t.maybeRebuild()
}

// remove forgets upstream name.
func (t *endpointTable) remove(name nginx.UpstreamName) {
	if _, ok := t.added[name]; ok {
		delete(t.added, name)
		return
	}
	if i, ok := t.find(name); ok {
		t.sorted[i].eps = nil // not kept alive until the rebuild
		if t.removed == nil {
			t.removed = map[nginx.UpstreamName]struct{}{}
		}
		t.removed[name] = struct{}{}
		t.maybeRebuild()
	}
}

func (t *endpointTable) maybeRebuild() {
	if n := len(t.added) + len(t.removed); n > minRebuild && n > len(t.sorted)/8 {
		t.rebuild()
	}
}

// rebuild merges the added upstreams into the list and drops the removed ones. The list is made anew
// at its size, and so are the maps (a map keeps the room it once grew to).
func (t *endpointTable) rebuild() {
	added := slices.SortedFunc(maps.Keys(t.added), func(a, b nginx.UpstreamName) int { return strings.Compare(string(a), string(b)) })
	next := make([]endpointEntry, 0, t.len())
	old := t.sorted
	for len(old) > 0 || len(added) > 0 {
		if len(added) == 0 || len(old) > 0 && old[0].name < added[0] {
			if _, gone := t.removed[old[0].name]; !gone {
				next = append(next, old[0])
			}
			old = old[1:]
			continue
		}
		next = append(next, endpointEntry{name: added[0], eps: t.added[added[0]]})
		added = added[1:]
	}
	t.sorted, t.added, t.removed = next, nil, nil
}

// all yields every upstream with its list.
func (t *endpointTable) all() iter.Seq2[nginx.UpstreamName, []nginx.Endpoint] {
	return func(yield func(nginx.UpstreamName, []nginx.Endpoint) bool) {
		for _, e := range t.sorted {
			if _, gone := t.removed[e.name]; gone {
				continue
			}
			if !yield(e.name, e.eps) {
				return
			}
		}
		for name, eps := range t.added {
			if !yield(name, eps) {
				return
			}
		}
	}
}
