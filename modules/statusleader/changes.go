package statusleader

import (
	"github.com/ingress-reactor/ingress-reactor/modules"
	"github.com/ingress-reactor/ingress-reactor/pipeline"
)

// subscribe is the one place that learns which Ingresses the class filter accepts.
func (l *Leader) subscribe(changes *pipeline.Topic[modules.IngressChange]) {
	changes.Subscribe(l.ingressChanged)
}

// ingressChanged tracks which Ingresses are ours and queues the one that changed.
func (l *Leader) ingressChanged(c modules.IngressChange) {
	l.mu.Lock()
	if c.Accepted {
		l.ours[c.Key] = struct{}{}
		delete(l.lost, c.Key)
	} else {
		delete(l.ours, c.Key)
		if _, err := l.ingresses.Ingresses(c.Key.Namespace).Get(c.Key.Name); err == nil {
			l.lost[c.Key] = struct{}{}
		} else {
			delete(l.lost, c.Key)
		}
	}
	l.mu.Unlock()
	l.ctrl.Queue().Add(c.Key)
}
