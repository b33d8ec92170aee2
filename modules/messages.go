package modules

import "k8s.io/apimachinery/pkg/types"

// IngressChange says that an Ingress became ours, changed while ours, or stopped being ours (deleted or
// moved to another class). Consumers read the Ingress itself from the informer cache, so a change never
// carries a stale copy.
type IngressChange struct {
	Key types.NamespacedName
	// Accepted is true while the Ingress is served by this controller, false once it is not.
	Accepted bool
}
