package pipeline

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// topicPendingDesc describes ingress_reactor_pipeline_topic_pending.
var topicPendingDesc = prometheus.NewDesc(
	"ingress_reactor_pipeline_topic_pending",
	"Values published on a topic and not yet taken by its subscribers (summed over subscribers): a subscriber that falls behind shows here.",
	[]string{nameLabel}, nil,
)

// topicPending reports each topic's backlog when scraped, so publishing costs nothing extra.
type topicPending struct {
	mu     sync.Mutex
	topics map[string]func() int
}

func newTopicPending() *topicPending { return &topicPending{topics: map[string]func() int{}} }

// Describe implements prometheus.Collector.
func (c *topicPending) Describe(ch chan<- *prometheus.Desc) { ch <- topicPendingDesc }

// Collect implements prometheus.Collector.
func (c *topicPending) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, pending := range c.topics {
		ch <- prometheus.MustNewConstMetric(topicPendingDesc, prometheus.GaugeValue, float64(pending()), name)
	}
}

// watchTopic makes the topic's backlog part of the metrics until the topic is closed.
func (m *Metrics) watchTopic(name string, pending func() int) {
	if m == nil {
		return
	}
	m.topicPending.mu.Lock()
	m.topicPending.topics[name] = pending
	m.topicPending.mu.Unlock()
}

func (m *Metrics) forgetTopic(name string) {
	if m == nil {
		return
	}
	m.topicPending.mu.Lock()
	delete(m.topicPending.topics, name)
	m.topicPending.mu.Unlock()
}
