package pipeline

import "errors"

// terminalError marks an error that retrying cannot fix.
type terminalError struct{ err error }

func (e *terminalError) Error() string { return e.err.Error() }

func (e *terminalError) Unwrap() error { return e.err }

// Terminal marks err as permanent: a Controller logs it and forgets the item
// instead of retrying it (for example an object that is invalid until a user
// edits it, which produces a new event anyway). The message is unchanged and
// errors.Is/As still see err. Terminal(nil) is nil.
func Terminal(err error) error {
	if err == nil {
		return nil
	}
	return &terminalError{err: err}
}

// IsTerminal reports whether err, or any error it wraps, was marked by Terminal.
func IsTerminal(err error) bool {
	var t *terminalError
	return errors.As(err, &t)
}
