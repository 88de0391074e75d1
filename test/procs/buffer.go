package procs

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for a writer goroutine (a process's
// output, a logger) and a test reading it meanwhile. The zero value is an
// empty buffer.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
