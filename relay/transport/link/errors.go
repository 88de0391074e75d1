package link

import "strings"

// JoinErrors is errors.Join with a message on one line: the errors'
// messages are separated by "; " (a line break inside one becomes "; "
// too), so that a log line holds it whole. errors.Is and errors.As see
// every error, as with errors.Join. Nil errors are dropped; with none
// left, JoinErrors returns nil.
func JoinErrors(errs ...error) error {
	var kept []error
	for _, err := range errs {
		if err != nil {
			kept = append(kept, err)
		}
	}
	if len(kept) == 0 {
		return nil
	}
	return &joinError{errs: kept}
}

type joinError struct{ errs []error }

func (e *joinError) Error() string {
	var b strings.Builder
	for i, err := range e.errs {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	return b.String()
}

func (e *joinError) Unwrap() []error { return e.errs }
