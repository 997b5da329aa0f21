package secure

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"time"
	"unicode"
	"unicode/utf8"
)

const (
	// DefaultValidity is how long a job CA and the credentials it issues
	// stay valid after their creation.
	DefaultValidity = 7 * 24 * time.Hour

	// ClockSkewSlack back-dates every certificate so that a node whose
	// clock lags the front-end's still accepts it.
	ClockSkewSlack = time.Hour

	// MaxJobIDLen bounds the job identifier in bytes.
	MaxJobIDLen = 128

	// MaxNameLen bounds an agent name in bytes.
	MaxNameLen = 255

	// organization is the Subject organization of every certificate the
	// package makes; the job identifier is the organizational unit.
	organization = "ftlaunch"
)

// ErrInvalidName reports a job identifier or agent name that cannot be put
// in a certificate.
var ErrInvalidName = errors.New("secure: invalid name")

// CA is the ephemeral certificate authority of one job. It is immutable and
// safe for concurrent use; [CA.Issue] may run on many goroutines at once.
type CA struct {
	jobID string
	cert  *x509.Certificate
	key   ed25519.PrivateKey
}

// NewJobCA makes a fresh certificate authority for the job jobID, valid from
// [ClockSkewSlack] before now until [DefaultValidity] after now.
func NewJobCA(jobID string) (*CA, error) {
	return newJobCA(jobID, time.Now(), DefaultValidity)
}

// NewJobCAValidFor is [NewJobCA] for jobs that may outlive
// [DefaultValidity]: the CA and its credentials stay valid for validity
// after now. Established links survive expiry; new handshakes fail.
func NewJobCAValidFor(jobID string, validity time.Duration) (*CA, error) {
	if validity <= 0 {
		return nil, fmt.Errorf("secure: job %q: validity %v is not positive", jobID, validity)
	}
	return newJobCA(jobID, time.Now(), validity)
}

// newJobCA is NewJobCA with the clock and the validity given, for tests of
// expiry.
func newJobCA(jobID string, now time.Time, validity time.Duration) (*CA, error) {
	if err := checkName("job id", jobID, MaxJobIDLen); err != nil {
		return nil, err
	}
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("secure: generate CA key for job %q: %w", jobID, err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			CommonName:         "ftlaunch job CA",
			Organization:       []string{organization},
			OrganizationalUnit: []string{jobID},
		},
		NotBefore:             now.Add(-ClockSkewSlack),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key)
	if err != nil {
		return nil, fmt.Errorf("secure: create CA certificate for job %q: %w", jobID, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("secure: parse new CA certificate: %w", err)
	}
	return &CA{jobID: jobID, cert: cert, key: key}, nil
}

// JobID returns the identifier of the CA's job.
func (ca *CA) JobID() string { return ca.jobID }

// NotAfter returns the end of the CA's validity; no credentials it issues
// outlive it.
func (ca *CA) NotAfter() time.Time { return ca.cert.NotAfter }

// Issue makes credentials for the agent called name: a new Ed25519 key and a
// certificate for it, usable as both TLS client and server, valid from
// [ClockSkewSlack] before now until the CA expires. Issuing the same name
// twice gives two distinct, equally valid credentials (an agent restarted on
// the same node gets fresh ones).
func (ca *CA) Issue(name string) (*Credentials, error) {
	return ca.issue(name, time.Now())
}

func (ca *CA) issue(name string, now time.Time) (*Credentials, error) {
	if err := checkName("agent name", name, MaxNameLen); err != nil {
		return nil, err
	}
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("secure: generate key for agent %q: %w", name, err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	notBefore := now.Add(-ClockSkewSlack)
	if notBefore.Before(ca.cert.NotBefore) {
		notBefore = ca.cert.NotBefore
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			CommonName:         name,
			Organization:       []string{organization},
			OrganizationalUnit: []string{ca.jobID},
		},
		NotBefore:             notBefore,
		NotAfter:              ca.cert.NotAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	if err != nil {
		return nil, fmt.Errorf("secure: create certificate for agent %q: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("secure: parse new certificate of agent %q: %w", name, err)
	}
	// x509.CreateCertificate has verified the signature it made; the
	// checks of newCredentials are for credentials from elsewhere.
	return buildCredentials(ca.jobID, name, ca.cert, cert, key), nil
}

// newSerial returns a random positive 128-bit serial number.
func newSerial() (*big.Int, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("secure: read random serial: %w", err)
	}
	b[0] &= 0x7f
	b[0] |= 0x40 // positive, and never shorter than 16 bytes
	return new(big.Int).SetBytes(b[:]), nil
}

// checkName accepts non-empty valid UTF-8 of at most max bytes without
// control characters.
func checkName(what, s string, max int) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: empty %s", ErrInvalidName, what)
	case len(s) > max:
		return fmt.Errorf("%w: %s is %d bytes, more than %d", ErrInvalidName, what, len(s), max)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s %q is not valid UTF-8", ErrInvalidName, what, s)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: %s %q contains a control character", ErrInvalidName, what, s)
		}
	}
	return nil
}
