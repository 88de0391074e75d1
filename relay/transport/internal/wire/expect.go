package wire

import (
	"errors"
	"fmt"
)

// ErrUnexpected is returned by Expect for a frame of another type.
var ErrUnexpected = errors.New("wire: unexpected frame")

// RemoteError is an Error frame received by Expect: the peer refused or
// failed. Its text is the peer's message.
type RemoteError struct {
	Code    ErrorCode
	Message string
}

func (e *RemoteError) Error() string { return e.Message }

// Expect reads the next frame and requires it to be a T. An Error frame
// comes back as a *RemoteError; any other type wraps ErrUnexpected.
func Expect[T Message](r *Reader) (T, error) {
	var zero T
	m, err := r.Read()
	if err != nil {
		return zero, err
	}
	if e, ok := m.(*Error); ok {
		return zero, &RemoteError{Code: e.Code, Message: e.Message}
	}
	t, ok := m.(T)
	if !ok {
		return zero, fmt.Errorf("%w: got %s, want %s", ErrUnexpected, m.Type(), zero.Type())
	}
	return t, nil
}

// Send writes one message and flushes it.
func (w *Writer) Send(m Message) error {
	if err := w.Write(m); err != nil {
		return err
	}
	return w.Flush()
}
