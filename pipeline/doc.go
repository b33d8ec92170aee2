// Package pipeline is the generic reactive framework that ingress-reactor's
// modules are built from. It knows nothing about Ingresses or NGINX and
// imports no other package of this project.
//
// A Queue is a typed work queue on client-go's rate-limited workqueue. It
// de-duplicates: a key added many times before a worker takes it is
// processed once, and a key added while it is being processed is processed
// again afterwards, never by two workers at once. A failed key is retried
// after the longer of its own exponential backoff (BaseDelay doubling up to
// MaxDelay) and the queue-wide token bucket (QPS, Burst). After MaxRetries
// retries in a row it is dropped: logged once with its last error, counted in
// ingress_reactor_pipeline_dropped_total, and handed to OnGiveUp. No retry
// loop runs forever.
//
// A Controller runs a SyncFunc over a Queue on N workers. Sync returns nil
// (done), Terminal(err) (never retried: for problems only a user's edit can
// fix, which arrives as a new event anyway) or another error (retried as
// above). A panic in Sync is recovered, logged with its stack, counted in
// ingress_reactor_pipeline_panics_total and retried under the same limit.
// Stop stops intake, lets the syncs in flight finish within a deadline, and
// returns; keys still queued are left for the next start, which re-lists.
//
// Topic and Latest connect modules. A Topic fans each published value out
// to every subscriber in publish order; each subscriber has its own
// goroutine and unbounded buffer, so a slow one never blocks the publisher or
// the others and never misses a value. Subscribers usually just add a key to
// their own Queue. A Latest is a single-slot mailbox for snapshots (a
// rendered configuration, an endpoint table): many Sets cause one wake-up and
// the newest value wins.
//
// The informer glue connects Kubernetes informers to queues. StripTransform
// drops managedFields and the kubectl last-applied-configuration annotation
// from every cached object. Handler turns add, update and delete events
// (tombstones included) into keys, with an optional filter, key function and
// update filter (ResourceVersionChanged skips resyncs). KeyOf gives the
// namespace/name of an object or tombstone.
//
// Metrics, created once per Prometheus registry with NewMetrics, carries
// client-go's workqueue metrics (workqueue_depth, workqueue_adds_total,
// workqueue_queue_duration_seconds, workqueue_work_duration_seconds,
// workqueue_retries_total, workqueue_unfinished_work_seconds,
// workqueue_longest_running_processor_seconds, all labelled by queue name)
// and the framework's own counters. It is passed to each queue explicitly;
// client-go's global metrics provider is never set, so registries never mix.
package pipeline
