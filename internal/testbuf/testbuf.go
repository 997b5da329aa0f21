// Package testbuf holds the one writer the project's tests share: a
// buffer that a process's output goes into while the test reads it.
package testbuf

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for one writer (an exec.Cmd's Stdout or
// Stderr copier) and concurrent readers (a test polling for a condition).
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
