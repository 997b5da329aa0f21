package journal

import (
	"crypto/rand"
	"encoding/hex"
)

// NewJobID makes a job's id, which names its directory of the state dir:
// JobPrefix and 12 random hex digits.
func NewJobID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return JobPrefix + hex.EncodeToString(b[:])
}
