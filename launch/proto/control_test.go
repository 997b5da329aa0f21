package proto

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/ftlaunch/ftlaunch/overlay/secure"
)

// TestPublishControl: a root with a launch tree publishes where it
// listens and, once per job, the controller's credentials (mode 0600); a
// job without addresses is reached by its PID and gets no credentials.
func TestPublishControl(t *testing.T) {
	ca, err := secure.NewJobCA("ft-test")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	key := filepath.Join(dir, ControlKey)
	if err := PublishControl(dir, ca, ControlInfo{Job: "ft-test", Root: "fe", PID: 7}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(key); !os.IsNotExist(err) {
		t.Errorf("credentials for a job without addresses: %v", err)
	}
	ci := ControlInfo{Job: "ft-test", Root: "fe", Name: RootName, Addrs: []string{"127.0.0.1:1"}}
	if err := PublishControl(dir, ca, ci); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(key)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the controller's credentials: %v, %v", st, err)
	}
	first, _ := os.ReadFile(key)
	ci.Root, ci.Addrs = "node1", []string{"127.0.0.1:2"} // a successor's
	if err := PublishControl(dir, ca, ci); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(key); !bytes.Equal(first, again) {
		t.Error("the controller's credentials were issued again")
	}
	got, err := ReadControlInfo(dir)
	if err != nil || got.Root != "node1" || len(got.Addrs) != 1 || got.Addrs[0] != "127.0.0.1:2" {
		t.Errorf("control info %+v, %v: want the successor's", got, err)
	}
}

// TestListenAddrs: a listener on one address is dialled there; one on
// every interface, at each of this host's addresses.
func TestListenAddrs(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if got := ListenAddrs(ln); len(got) != 1 || got[0] != ln.Addr().String() {
		t.Errorf("addresses of %s: %v", ln.Addr(), got)
	}
	all, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	if got := ListenAddrs(all); len(got) != len(OwnAddrs()) {
		t.Errorf("addresses of %s: %v, want one per host address %v", all.Addr(), got, OwnAddrs())
	}
}

// TestReadStaged: the program is read with its mode, found as a rank
// would find it; a missing one is an error.
func TestReadStaged(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "prog"), []byte("#!/bin/sh\n"), 0o750); err != nil {
		t.Fatal(err)
	}
	s, err := ReadStaged("./prog", dir, "")
	if err != nil || s.Name != "prog" || s.Mode != 0o750 || string(s.Data) != "#!/bin/sh\n" {
		t.Fatalf("staged %+v, %v", s, err)
	}
	if _, err := ReadStaged("./absent", dir, ""); err == nil {
		t.Error("a missing program was staged")
	}
}

// TestControlCheck: a cancel sends SIGTERM, a signal its own number if it
// is one; anything else is refused with why.
func TestControlCheck(t *testing.T) {
	for _, tc := range []struct {
		c   Control
		sig int
		err string
	}{
		{Control{Op: OpCancel}, int(syscall.SIGTERM), ""},
		{Control{Op: OpSignal, Signal: 10}, 10, ""},
		{Control{Op: OpSignal, Signal: 0}, 0, "no signal 0"},
		{Control{Op: OpSignal, Signal: 65}, 0, "no signal 65"},
		{Control{Op: "stop"}, 0, `unknown control request "stop"`},
	} {
		sig, err := tc.c.Check()
		if got := fmt.Sprint(err); sig != tc.sig || (tc.err == "") != (err == nil) || err != nil && got != tc.err {
			t.Errorf("%+v: %d, %v; want %d, %q", tc.c, sig, err, tc.sig, tc.err)
		}
	}
}
