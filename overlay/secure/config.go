package secure

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
)

// ALPN is the TLS application protocol every ftlaunch link negotiates; a
// peer offering anything else is refused during the handshake.
const ALPN = "ftlaunch/1"

// ErrPeerRefused reports a peer whose certificate was refused: signed by
// another CA (another job's), expired, for another job, absent, or naming
// another agent than the one expected.
var ErrPeerRefused = errors.New("secure: peer refused")

// ServerConfig returns a new TLS 1.3 server configuration presenting the
// agent's certificate, requiring a client certificate and verifying it
// against the job CA only. Session tickets are off, so every connection is
// authenticated by a full handshake. The caller may modify the result.
func (c *Credentials) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion:             tls.VersionTLS13,
		Certificates:           []tls.Certificate{c.tlsCert},
		ClientAuth:             tls.RequireAndVerifyClientCert,
		ClientCAs:              c.pool,
		NextProtos:             []string{ALPN},
		SessionTicketsDisabled: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			// The chain was verified against ClientCAs already; check
			// the job and the shape of the leaf as well.
			return c.verifyPeer(cs, x509.ExtKeyUsageClientAuth, "")
		},
	}
}

// ClientConfig returns a new TLS 1.3 client configuration presenting the
// agent's certificate and verifying the server's certificate against the job
// CA only, accepting any agent name (peers are agents, not DNS names; use
// [PeerName] after the handshake, or [WithPeerName] with [Dial]). The
// caller may modify the result.
func (c *Credentials) ClientConfig() *tls.Config {
	return c.clientConfig("")
}

func (c *Credentials) clientConfig(expect string) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{c.tlsCert},
		NextProtos:   []string{ALPN},
		// Host name verification does not apply to agents; the full
		// chain verification against the job CA happens in
		// VerifyConnection, which crypto/tls always calls.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return c.verifyPeer(cs, x509.ExtKeyUsageServerAuth, expect)
		},
	}
}

// verifyPeer verifies the peer's chain against the job CA at the current
// time, for usage, and checks that the leaf is an agent certificate of this
// job, naming expect if expect is not empty.
func (c *Credentials) verifyPeer(cs tls.ConnectionState, usage x509.ExtKeyUsage, expect string) error {
	if len(cs.PeerCertificates) == 0 {
		return fmt.Errorf("%w: no certificate", ErrPeerRefused)
	}
	if len(cs.PeerCertificates) > 1 {
		return fmt.Errorf("%w: %d certificates; agents send exactly one", ErrPeerRefused, len(cs.PeerCertificates))
	}
	leaf := cs.PeerCertificates[0]
	// A server configuration has crypto/tls verify the chain against the
	// job CA (VerifiedChains is then set); a client one does it here.
	if len(cs.VerifiedChains) == 0 {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: c.pool, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			return fmt.Errorf("%w: %w", ErrPeerRefused, err)
		}
	}
	if err := checkLeafFields(c.jobID, leaf); err != nil {
		return fmt.Errorf("%w: %w", ErrPeerRefused, err)
	}
	if expect != "" && leaf.Subject.CommonName != expect {
		return fmt.Errorf("%w: peer is agent %q, expected %q", ErrPeerRefused, leaf.Subject.CommonName, expect)
	}
	if cs.NegotiatedProtocol != ALPN {
		return fmt.Errorf("%w: application protocol %q, want %q", ErrPeerRefused, cs.NegotiatedProtocol, ALPN)
	}
	return nil
}

// connectionStater is what *tls.Conn offers.
type connectionStater interface {
	ConnectionState() tls.ConnectionState
}

// PeerName returns the authenticated agent name of the peer of conn, a
// connection from [Listen] or [Dial] (or any *tls.Conn that completed a
// handshake with this package's configurations). It fails if conn is not a
// TLS connection or its handshake has not completed.
func PeerName(conn net.Conn) (string, error) {
	cs, ok := conn.(connectionStater)
	if !ok {
		return "", fmt.Errorf("secure: peer name: %T is not a TLS connection", conn)
	}
	st := cs.ConnectionState()
	if !st.HandshakeComplete {
		return "", errors.New("secure: peer name: handshake not complete")
	}
	if len(st.PeerCertificates) == 0 {
		return "", errors.New("secure: peer name: peer sent no certificate")
	}
	return st.PeerCertificates[0].Subject.CommonName, nil
}
