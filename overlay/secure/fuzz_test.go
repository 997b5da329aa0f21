package secure

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

// TestDecodesCheckedInV1 keeps format version 1 readable: the file was
// written by the first version of Marshal (its validity dates have passed
// or will; decoding ignores them).
func TestDecodesCheckedInV1(t *testing.T) {
	b, err := os.ReadFile("testdata/credentials-v1.bin")
	if err != nil {
		t.Fatal(err)
	}
	c, err := UnmarshalCredentials(b)
	if err != nil {
		t.Fatalf("UnmarshalCredentials(credentials-v1.bin): %v", err)
	}
	if c.Name() != "seed-node" || c.JobID() != "seed-job" {
		t.Fatalf("decoded agent %q of job %q", c.Name(), c.JobID())
	}
	if !bytes.Equal(c.Marshal(), b) {
		t.Fatal("re-encoding of the v1 file differs")
	}
}

// FuzzUnmarshalCredentials checks that no input panics, every failure wraps
// ErrBadCredentials, accepted inputs are canonical (re-encode to the same
// bytes), and ReadCredentials agrees with UnmarshalCredentials.
func FuzzUnmarshalCredentials(f *testing.F) {
	ca, err := NewJobCA("fuzz-job")
	if err != nil {
		f.Fatal(err)
	}
	c, err := ca.Issue("fuzz-node")
	if err != nil {
		f.Fatal(err)
	}
	good := c.Marshal()
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add(append(bytes.Clone(good), 0))
	f.Add(ca.Marshal())
	f.Add([]byte("FTLK"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := UnmarshalCredentials(b)
		viaReader, rerr := ReadCredentials(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, ErrBadCredentials) {
				t.Fatalf("error does not wrap ErrBadCredentials: %v", err)
			}
			if rerr == nil && len(viaReader.Marshal()) == len(b) {
				t.Fatalf("ReadCredentials accepted what UnmarshalCredentials refused (%v)", err)
			}
			return
		}
		if !bytes.Equal(got.Marshal(), b) {
			t.Fatal("accepted input is not canonical")
		}
		if rerr != nil {
			t.Fatalf("ReadCredentials refused what UnmarshalCredentials accepted: %v", rerr)
		}
		if got.ServerConfig() == nil || got.ClientConfig() == nil {
			t.Fatal("no TLS configuration")
		}
	})
}
