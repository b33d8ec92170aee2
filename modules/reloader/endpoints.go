package reloader

import (
	"context"
	"strings"

	"github.com/ingress-reactor/ingress-reactor/internal/sortedmap"
	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/nginx"
)

// endpointBatch is one endpoint push: upstream -> its endpoints (nil for an upstream that is gone).
type endpointBatch = map[nginx.UpstreamName][]nginx.Endpoint

// endpointStore is the endpoint lane's desired state: the endpoint list of every upstream (the list
// each EndpointsChange carried, not a copy: a published list is never modified), and the upstreams
// changed since the last push.
type endpointStore struct {
	// lists is a sorted table rather than a map: at 20,000 upstreams (two per Ingress at 10,000) a map
	// took about 80 bytes per upstream, the table about 40.
	lists *sortedmap.Map[nginx.UpstreamName, []nginx.Endpoint]
	dirty map[nginx.UpstreamName]struct{}
}

func newEndpointStore() *endpointStore {
	return &endpointStore{
		lists: sortedmap.New[nginx.UpstreamName, []nginx.Endpoint](func(a, b nginx.UpstreamName) int { return strings.Compare(string(a), string(b)) }),
		dirty: map[nginx.UpstreamName]struct{}{},
	}
}

// apply records one EndpointsChange.
func (s *endpointStore) apply(c modules.EndpointsChange) {
	if c.Removed {
		s.lists.Delete(c.Upstream.Name)
	} else {
		s.lists.Set(c.Upstream.Name, c.Endpoints)
	}
	s.markDirty(c.Upstream.Name)
}

func (s *endpointStore) markDirty(name nginx.UpstreamName) { s.dirty[name] = struct{}{} }

func (s *endpointStore) take(full bool) (endpointBatch, bool) {
	var batch endpointBatch
	if full {
		batch = make(endpointBatch, s.lists.Len())
		for name, eps := range s.lists.All() {
			batch[name] = eps
		}
	} else {
		batch = make(endpointBatch, len(s.dirty))
		for name := range s.dirty {
			batch[name], _ = s.lists.Get(name) // nil for removed upstreams: emptied
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
