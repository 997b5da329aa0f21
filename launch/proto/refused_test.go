package proto

import (
	"net"
	"testing"
)

// TestRefused: a lost root whose address refuses connections is gone (its
// process ended); one that accepts them is not.
func TestRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if Refused(t.Context(), addr) {
		t.Errorf("%s refused while it listens", addr)
	}
	ln.Close()
	if !Refused(t.Context(), addr) {
		t.Errorf("%s not refused once closed", addr)
	}
}
