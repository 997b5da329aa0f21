package secure

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func newTestCA(t testing.TB, jobID string) *CA {
	t.Helper()
	ca, err := NewJobCA(jobID)
	if err != nil {
		t.Fatalf("NewJobCA(%q): %v", jobID, err)
	}
	return ca
}

func issue(t testing.TB, ca *CA, name string) *Credentials {
	t.Helper()
	c, err := ca.Issue(name)
	if err != nil {
		t.Fatalf("Issue(%q): %v", name, err)
	}
	return c
}

func TestIssue(t *testing.T) {
	before := time.Now()
	ca := newTestCA(t, "job-1")
	c := issue(t, ca, "node017")
	if c.Name() != "node017" || c.JobID() != "job-1" {
		t.Fatalf("got name %q job %q", c.Name(), c.JobID())
	}
	if !c.cert.NotBefore.Before(before.Add(-ClockSkewSlack / 2)) {
		t.Errorf("NotBefore %v has no clock-skew slack (issued at %v)", c.cert.NotBefore, before)
	}
	if got, want := c.NotAfter(), ca.NotAfter(); !got.Equal(want) {
		t.Errorf("credentials expire %v, CA %v", got, want)
	}
	if d := ca.NotAfter().Sub(before); d < DefaultValidity-time.Minute || d > DefaultValidity+time.Minute {
		t.Errorf("CA valid for %v after creation, want about %v", d, DefaultValidity)
	}
	c2 := issue(t, ca, "node017")
	if bytes.Equal(c.cert.Raw, c2.cert.Raw) || c.key.Equal(c2.key) {
		t.Error("two issues for one name share a certificate or key")
	}
}

func TestInvalidNames(t *testing.T) {
	for _, id := range []string{"", strings.Repeat("j", MaxJobIDLen+1), "a\nb", "\xff"} {
		if _, err := NewJobCA(id); !errors.Is(err, ErrInvalidName) {
			t.Errorf("NewJobCA(%q): err %v, want ErrInvalidName", id, err)
		}
	}
	ca := newTestCA(t, "job")
	for _, n := range []string{"", strings.Repeat("n", MaxNameLen+1), "x\x00y", "tab\there"} {
		if _, err := ca.Issue(n); !errors.Is(err, ErrInvalidName) {
			t.Errorf("Issue(%q): err %v, want ErrInvalidName", n, err)
		}
	}
	if _, err := ca.Issue("nœud-ü.example"); err != nil {
		t.Errorf("Issue of a UTF-8 name: %v", err)
	}
}

func TestCredentialsRoundTrip(t *testing.T) {
	ca := newTestCA(t, "job-rt")
	c := issue(t, ca, "node-a")
	b := c.Marshal()
	if len(b) > 2<<10 {
		t.Errorf("encoded credentials are %d bytes, want compact (< 2 KiB)", len(b))
	}
	t.Logf("encoded credentials: %d bytes", len(b))
	got, err := UnmarshalCredentials(b)
	if err != nil {
		t.Fatalf("UnmarshalCredentials: %v", err)
	}
	if got.Name() != c.Name() || got.JobID() != c.JobID() || !got.key.Equal(c.key) ||
		!bytes.Equal(got.cert.Raw, c.cert.Raw) || !bytes.Equal(got.caCert.Raw, c.caCert.Raw) {
		t.Fatal("round trip changed the credentials")
	}
	if !bytes.Equal(got.Marshal(), b) {
		t.Fatal("re-encoding differs")
	}

	// ReadCredentials consumes exactly the encoding and leaves what follows.
	stream := io.MultiReader(bytes.NewReader(b), strings.NewReader("REST"))
	got, err = ReadCredentials(stream)
	if err != nil {
		t.Fatalf("ReadCredentials: %v", err)
	}
	if got.Name() != "node-a" {
		t.Fatalf("ReadCredentials name %q", got.Name())
	}
	rest, err := io.ReadAll(stream)
	if err != nil || string(rest) != "REST" {
		t.Fatalf("after ReadCredentials the stream holds %q, %v; want REST", rest, err)
	}
}

func TestCARoundTrip(t *testing.T) {
	ca := newTestCA(t, "job-ca")
	b := ca.Marshal()
	got, err := UnmarshalCA(b)
	if err != nil {
		t.Fatalf("UnmarshalCA: %v", err)
	}
	if got.JobID() != ca.JobID() || !got.key.Equal(ca.key) || !bytes.Equal(got.cert.Raw, ca.cert.Raw) {
		t.Fatal("CA round trip changed it")
	}
	// A restored CA issues credentials of the same job.
	c := issue(t, got, "replacement")
	if err := checkLeaf(ca.JobID(), ca.cert, c.cert); err != nil {
		t.Fatalf("credentials of the restored CA: %v", err)
	}
	// The two kinds are not interchangeable.
	if _, err := UnmarshalCredentials(b); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("UnmarshalCredentials(CA): %v, want ErrBadCredentials", err)
	}
	if _, err := UnmarshalCA(c.Marshal()); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("UnmarshalCA(credentials): %v, want ErrBadCredentials", err)
	}
	if _, err := ReadCredentials(bytes.NewReader(b)); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("ReadCredentials(CA): %v, want ErrBadCredentials", err)
	}
}

func TestUnmarshalTruncated(t *testing.T) {
	b := issue(t, newTestCA(t, "job-tr"), "n").Marshal()
	for n := range len(b) {
		if _, err := UnmarshalCredentials(b[:n]); !errors.Is(err, ErrBadCredentials) {
			t.Fatalf("UnmarshalCredentials of %d of %d bytes: %v, want ErrBadCredentials", n, len(b), err)
		}
		if _, err := ReadCredentials(bytes.NewReader(b[:n])); !errors.Is(err, ErrBadCredentials) {
			t.Fatalf("ReadCredentials of %d of %d bytes: %v, want ErrBadCredentials", n, len(b), err)
		}
	}
	if _, err := UnmarshalCredentials(append(b, 0)); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("trailing byte accepted: %v", err)
	}
}

// TestUnmarshalCorrupted flips every bit of an encoding: each flip must be
// detected, by framing, parsing, signatures or the key check.
func TestUnmarshalCorrupted(t *testing.T) {
	b := issue(t, newTestCA(t, "job-corrupt"), "node-c").Marshal()
	for i := range b {
		for bit := range 8 {
			c := bytes.Clone(b)
			c[i] ^= 1 << bit
			if _, err := UnmarshalCredentials(c); !errors.Is(err, ErrBadCredentials) {
				t.Fatalf("flip of bit %d of byte %d of %d accepted: %v", bit, i, len(b), err)
			}
		}
	}
}

func TestUnmarshalGarbage(t *testing.T) {
	ca := newTestCA(t, "job-g")
	good := issue(t, ca, "n").Marshal()
	other := issue(t, newTestCA(t, "job-h"), "n").Marshal()
	random := make([]byte, 900)
	if _, err := rand.Read(random); err != nil {
		t.Fatal(err)
	}
	version2 := bytes.Clone(good)
	version2[4] = 2
	oversize := append(bytes.Clone(good[:headerLen]), make([]byte, MaxCredentialsSize)...)
	// Agent certificate of job-h inside job-g's credentials.
	mixed := swapField(t, good, other, 3)
	cases := map[string][]byte{
		"empty":     nil,
		"random":    random,
		"text":      []byte("-----BEGIN CERTIFICATE-----\n"),
		"version 2": version2,
		"oversize":  oversize,
		"mixed job": mixed,
	}
	for name, b := range cases {
		if _, err := UnmarshalCredentials(b); !errors.Is(err, ErrBadCredentials) {
			t.Errorf("%s: %v, want ErrBadCredentials", name, err)
		}
	}
	if _, err := UnmarshalCredentials(version2); err == nil || !strings.Contains(err.Error(), "version 2") {
		t.Errorf("version error does not say which version: %v", err)
	}
	big := append(bytes.Clone(good[:headerLen]), 0xff, 0xff)
	if _, err := ReadCredentials(io.MultiReader(bytes.NewReader(big), zeros{})); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("ReadCredentials of a 64 KiB field: %v, want ErrBadCredentials", err)
	}
}

// zeros is an endless reader of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// swapField returns a with field i (0-based, as in the encoding) taken from b.
func swapField(t *testing.T, a, b []byte, i int) []byte {
	t.Helper()
	da, err := decode(a)
	if err != nil {
		t.Fatal(err)
	}
	db, err := decode(b)
	if err != nil {
		t.Fatal(err)
	}
	f := [][]byte{[]byte(da.jobID), []byte(da.name), da.caDER, da.certDER}
	g := [][]byte{[]byte(db.jobID), []byte(db.name), db.caDER, db.certDER}
	f[i] = g[i]
	return encode(da.kind, string(f[0]), string(f[1]), f[2], f[3], da.seed)
}
