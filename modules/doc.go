// Package modules holds the typed messages that flow between the controller's modules, and the few small
// values every module shares with the application (readiness checks, and ServiceRecord and SecretRecord,
// what the shared Service and Secret informers' caches hold, with Services and Secrets to look them up
// in it).
//
// Each module lives in its own sub-package and talks to the others only through these messages,
// published on pipeline.Topic values that the application provides. Changing a message is changing a
// contract: update every producer and consumer in the same commit.
package modules

// ReadyCheck is one condition of the /readyz endpoint (fx value group "readyz") or, for conditions that only
// a restart of the process can fix, of /healthz (value group "healthz").
type ReadyCheck struct {
	// Name appears in /readyz output when the check fails.
	Name string
	// Check returns nil when this part of the controller is ready to serve.
	Check func() error
}
