// Package status is the domain of Ingress status: which addresses an Ingress is served on
// (status.loadBalancer.ingress), how they are discovered (a fixed list, a published Service, or the nodes
// running the controller), how they are compared and written, and the Lease-based leader election that
// makes sure only one replica writes them.
//
// It is plain Go on client-go: no fx and no pipeline messages. The statusleader module wires it into the
// application.
package status
