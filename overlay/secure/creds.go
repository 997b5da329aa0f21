package secure

import (
	"bytes"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
)

// ErrBadCredentials reports encoded credentials or a CA that are truncated,
// corrupted, of an unknown version, or inconsistent (a key that does not
// match its certificate, a certificate not signed by the job CA, ...).
var ErrBadCredentials = errors.New("secure: bad credentials")

// Encoding of credentials and CAs (all integers big-endian):
//
//	magic   "FTLK"           4 bytes
//	version 1                1 byte
//	kind    1 agent, 2 CA    1 byte
//	job id                   uint16 length + bytes
//	name    (empty for a CA) uint16 length + bytes
//	CA certificate, DER      uint16 length + bytes
//	agent certificate, DER   uint16 length + bytes (empty for a CA)
//	Ed25519 private key seed 32 bytes (the agent's, or the CA's)
//
// The encoding is self-delimiting, canonical (one value has one encoding)
// and at most MaxCredentialsSize bytes.
const (
	// MaxCredentialsSize bounds encoded credentials and CAs. The encodings
	// the package makes are about 1 KiB.
	MaxCredentialsSize = 8 << 10

	formatVersion = 1
	kindAgent     = 1
	kindCA        = 2
	headerLen     = 6
	numFields     = 4
)

var magic = [4]byte{'F', 'T', 'L', 'K'}

// Credentials are what one agent needs on its links: the job CA's
// certificate, the agent's private key and its certificate. They are
// immutable and safe for concurrent use.
type Credentials struct {
	jobID   string
	name    string
	caCert  *x509.Certificate
	cert    *x509.Certificate
	key     ed25519.PrivateKey
	tlsCert tls.Certificate
	pool    *x509.CertPool
}

// newCredentials checks that certDER is a certificate for name in jobID,
// signed by caCert, for key, and builds the credentials.
func newCredentials(jobID, name string, caCert *x509.Certificate, certDER []byte, key ed25519.PrivateKey) (*Credentials, error) {
	cert, err := x509.ParseCertificate(certDER)
	if err != nil {
		return nil, fmt.Errorf("%w: agent certificate: %v", ErrBadCredentials, err)
	}
	if err := checkLeaf(jobID, caCert, cert); err != nil {
		return nil, err
	}
	if cert.Subject.CommonName != name {
		return nil, fmt.Errorf("%w: certificate names agent %q, credentials say %q", ErrBadCredentials, cert.Subject.CommonName, name)
	}
	pub, ok := cert.PublicKey.(ed25519.PublicKey)
	if !ok || !pub.Equal(key.Public()) {
		return nil, fmt.Errorf("%w: private key does not match the certificate of agent %q", ErrBadCredentials, name)
	}
	return buildCredentials(jobID, name, caCert, cert, key), nil
}

// buildCredentials assembles checked parts.
func buildCredentials(jobID, name string, caCert, cert *x509.Certificate, key ed25519.PrivateKey) *Credentials {
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return &Credentials{
		jobID:  jobID,
		name:   name,
		caCert: caCert,
		cert:   cert,
		key:    key,
		tlsCert: tls.Certificate{
			Certificate: [][]byte{cert.Raw},
			PrivateKey:  key,
			Leaf:        cert,
		},
		pool: pool,
	}
}

// Name returns the agent name the credentials authenticate.
func (c *Credentials) Name() string { return c.name }

// JobID returns the job the credentials belong to.
func (c *Credentials) JobID() string { return c.jobID }

// NotAfter returns the end of the credentials' validity.
func (c *Credentials) NotAfter() time.Time { return c.cert.NotAfter }

// Marshal encodes the credentials, private key included, for delivery to
// their agent over a confidential channel (the SSH session's standard
// input). The result is about 1 KiB and never more than
// [MaxCredentialsSize].
func (c *Credentials) Marshal() []byte {
	return encode(kindAgent, c.jobID, c.name, c.caCert.Raw, c.cert.Raw, c.key.Seed())
}

// Marshal encodes the CA, private key included, for the job's root replicas
// only: whoever holds it can mint credentials for any agent of the job.
func (ca *CA) Marshal() []byte {
	return encode(kindCA, ca.jobID, "", ca.cert.Raw, nil, ca.key.Seed())
}

func encode(kind byte, jobID, name string, caDER, certDER, seed []byte) []byte {
	fields := [numFields][]byte{[]byte(jobID), []byte(name), caDER, certDER}
	n := headerLen + ed25519.SeedSize
	for _, f := range fields {
		n += 2 + len(f)
	}
	b := make([]byte, 0, n)
	b = append(b, magic[:]...)
	b = append(b, formatVersion, kind)
	for _, f := range fields {
		b = binary.BigEndian.AppendUint16(b, uint16(len(f)))
		b = append(b, f...)
	}
	return append(b, seed...)
}

// decoded is the raw content of an encoding.
type decoded struct {
	kind                 byte
	jobID, name          string
	caDER, certDER, seed []byte
}

var fieldNames = [numFields]string{"job id", "name", "CA certificate", "agent certificate"}

// decode splits b into its fields; it checks framing only.
func decode(b []byte) (decoded, error) {
	var d decoded
	if len(b) > MaxCredentialsSize {
		return d, fmt.Errorf("%w: %d bytes, more than the limit of %d", ErrBadCredentials, len(b), MaxCredentialsSize)
	}
	if err := checkHeader(b); err != nil {
		return d, err
	}
	d.kind = b[5]
	rest := b[headerLen:]
	var fields [numFields][]byte
	for i := range fields {
		if len(rest) < 2 {
			return d, fmt.Errorf("%w: truncated before the length of the %s", ErrBadCredentials, fieldNames[i])
		}
		n := int(binary.BigEndian.Uint16(rest))
		rest = rest[2:]
		if len(rest) < n {
			return d, fmt.Errorf("%w: truncated in the %s (%d of %d bytes)", ErrBadCredentials, fieldNames[i], len(rest), n)
		}
		fields[i], rest = rest[:n], rest[n:]
	}
	if len(rest) < ed25519.SeedSize {
		return d, fmt.Errorf("%w: truncated in the private key (%d of %d bytes)", ErrBadCredentials, len(rest), ed25519.SeedSize)
	}
	if len(rest) > ed25519.SeedSize {
		return d, fmt.Errorf("%w: %d unexpected bytes after the private key", ErrBadCredentials, len(rest)-ed25519.SeedSize)
	}
	d.jobID, d.name = string(fields[0]), string(fields[1])
	d.caDER, d.certDER, d.seed = fields[2], fields[3], rest
	return d, nil
}

func checkHeader(b []byte) error {
	if len(b) < headerLen {
		return fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrBadCredentials, len(b), headerLen)
	}
	if !bytes.Equal(b[:4], magic[:]) {
		return fmt.Errorf("%w: not ftlaunch credentials (magic %q)", ErrBadCredentials, b[:4])
	}
	if b[4] != formatVersion {
		return fmt.Errorf("%w: unsupported format version %d (this build reads %d)", ErrBadCredentials, b[4], formatVersion)
	}
	if b[5] != kindAgent && b[5] != kindCA {
		return fmt.Errorf("%w: unknown kind %d", ErrBadCredentials, b[5])
	}
	return nil
}

// UnmarshalCredentials decodes and validates what [Credentials.Marshal]
// made. Any truncation, corruption or inconsistency gives an error wrapping
// [ErrBadCredentials]. Validity dates are not checked here: expired
// credentials decode, and fail at the TLS handshake.
func UnmarshalCredentials(b []byte) (*Credentials, error) {
	d, err := decode(b)
	if err != nil {
		return nil, err
	}
	if d.kind != kindAgent {
		return nil, fmt.Errorf("%w: this is an encoded job CA, not agent credentials", ErrBadCredentials)
	}
	if err := checkName("job id", d.jobID, MaxJobIDLen); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadCredentials, err)
	}
	if err := checkName("agent name", d.name, MaxNameLen); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadCredentials, err)
	}
	caCert, err := parseCA(d.jobID, d.caDER)
	if err != nil {
		return nil, err
	}
	return newCredentials(d.jobID, d.name, caCert, d.certDER, ed25519.NewKeyFromSeed(d.seed))
}

// UnmarshalCA decodes and validates what [CA.Marshal] made.
func UnmarshalCA(b []byte) (*CA, error) {
	d, err := decode(b)
	if err != nil {
		return nil, err
	}
	if d.kind != kindCA {
		return nil, fmt.Errorf("%w: these are agent credentials, not an encoded job CA", ErrBadCredentials)
	}
	if d.name != "" || len(d.certDER) != 0 {
		return nil, fmt.Errorf("%w: an encoded CA carries an agent name or certificate", ErrBadCredentials)
	}
	if err := checkName("job id", d.jobID, MaxJobIDLen); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadCredentials, err)
	}
	caCert, err := parseCA(d.jobID, d.caDER)
	if err != nil {
		return nil, err
	}
	key := ed25519.NewKeyFromSeed(d.seed)
	if pub, ok := caCert.PublicKey.(ed25519.PublicKey); !ok || !pub.Equal(key.Public()) {
		return nil, fmt.Errorf("%w: CA private key does not match the CA certificate", ErrBadCredentials)
	}
	return &CA{jobID: d.jobID, cert: caCert, key: key}, nil
}

// ReadCredentials reads one encoding of credentials from r, consuming
// exactly its bytes and nothing after them, so that a stream (such as an
// agent's standard input) can carry other data behind the credentials. It
// validates them as [UnmarshalCredentials] does.
func ReadCredentials(r io.Reader) (*Credentials, error) {
	b := make([]byte, headerLen, 1<<10)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("%w: read header: %w", ErrBadCredentials, err)
	}
	if err := checkHeader(b); err != nil {
		return nil, err
	}
	for i := range numFields {
		var l [2]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return nil, fmt.Errorf("%w: read length of the %s: %w", ErrBadCredentials, fieldNames[i], err)
		}
		n := int(binary.BigEndian.Uint16(l[:]))
		if len(b)+2+n+ed25519.SeedSize > MaxCredentialsSize {
			return nil, fmt.Errorf("%w: %s of %d bytes exceeds the limit of %d in all", ErrBadCredentials, fieldNames[i], n, MaxCredentialsSize)
		}
		b = append(b, l[:]...)
		b = slices.Grow(b, n)
		if _, err := io.ReadFull(r, b[len(b):len(b)+n]); err != nil {
			return nil, fmt.Errorf("%w: read the %s: %w", ErrBadCredentials, fieldNames[i], err)
		}
		b = b[:len(b)+n]
	}
	b = slices.Grow(b, ed25519.SeedSize)
	if _, err := io.ReadFull(r, b[len(b):len(b)+ed25519.SeedSize]); err != nil {
		return nil, fmt.Errorf("%w: read the private key: %w", ErrBadCredentials, err)
	}
	return UnmarshalCredentials(b[:len(b)+ed25519.SeedSize])
}

// parseCA parses and checks the job CA certificate: a self-signed Ed25519
// CA of the ftlaunch job jobID.
func parseCA(jobID string, der []byte) (*x509.Certificate, error) {
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("%w: CA certificate: %v", ErrBadCredentials, err)
	}
	if !ca.IsCA || !ca.BasicConstraintsValid {
		return nil, fmt.Errorf("%w: CA certificate is not a CA", ErrBadCredentials)
	}
	if _, ok := ca.PublicKey.(ed25519.PublicKey); !ok {
		return nil, fmt.Errorf("%w: CA key is not Ed25519", ErrBadCredentials)
	}
	if j, ok := jobOf(ca); !ok || j != jobID {
		return nil, fmt.Errorf("%w: CA certificate is not for job %q", ErrBadCredentials, jobID)
	}
	if err := ca.CheckSignatureFrom(ca); err != nil {
		return nil, fmt.Errorf("%w: CA certificate signature: %v", ErrBadCredentials, err)
	}
	return ca, nil
}

// checkLeaf checks that cert is an agent certificate of job jobID signed by
// ca. It does not look at dates.
func checkLeaf(jobID string, ca, cert *x509.Certificate) error {
	if err := checkLeafFields(jobID, cert); err != nil {
		return err
	}
	if err := cert.CheckSignatureFrom(ca); err != nil {
		return fmt.Errorf("%w: agent certificate is not signed by the job CA: %v", ErrBadCredentials, err)
	}
	return nil
}

// checkLeafFields checks that cert is an agent certificate of job jobID,
// without its signature or dates.
func checkLeafFields(jobID string, cert *x509.Certificate) error {
	if cert.IsCA {
		return fmt.Errorf("%w: agent certificate is a CA", ErrBadCredentials)
	}
	if j, ok := jobOf(cert); !ok || j != jobID {
		return fmt.Errorf("%w: agent certificate is not for job %q", ErrBadCredentials, jobID)
	}
	if err := checkName("agent name", cert.Subject.CommonName, MaxNameLen); err != nil {
		return fmt.Errorf("%w: %v", ErrBadCredentials, err)
	}
	return nil
}

// jobOf returns the job identifier an ftlaunch certificate carries.
func jobOf(cert *x509.Certificate) (string, bool) {
	s := cert.Subject
	if len(s.Organization) != 1 || s.Organization[0] != organization || len(s.OrganizationalUnit) != 1 {
		return "", false
	}
	return s.OrganizationalUnit[0], true
}
