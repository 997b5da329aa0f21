package sshspawn

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// keyring supplies public-key signers from ssh-agent and identity files. It
// is safe for concurrent use; Close ends the agent connection.
type keyring struct {
	agentSock string // "" when no agent is used

	mu     sync.Mutex
	conn   net.Conn // the agent connection, nil until first use or after an error
	agent  agent.ExtendedAgent
	files  map[string]fileKey // parsed identity files by path
	closed bool
}

type fileKey struct {
	signer ssh.Signer // nil when the file is absent or unusable
	note   string     // why it was skipped, for error messages
}

// agentSigners returns the agent's keys, reconnecting once if the
// connection broke. An unreachable agent yields no keys and a note.
func (k *keyring) agentSigners() ([]ssh.Signer, string) {
	if k.agentSock == "" {
		return nil, ""
	}
	for try := 0; try < 2; try++ {
		a, err := k.agentClient()
		if err != nil {
			return nil, fmt.Sprintf("ssh-agent %s: %v", k.agentSock, err)
		}
		signers, err := a.Signers()
		if err == nil {
			return signers, ""
		}
		k.dropAgent(a)
		if try == 1 {
			return nil, fmt.Sprintf("ssh-agent %s: %v", k.agentSock, err)
		}
	}
	return nil, ""
}

func (k *keyring) agentClient() (agent.ExtendedAgent, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil, errors.New("spawner closed")
	}
	if k.agent != nil {
		return k.agent, nil
	}
	c, err := net.Dial("unix", k.agentSock)
	if err != nil {
		return nil, err
	}
	k.conn, k.agent = c, agent.NewClient(c)
	return k.agent, nil
}

func (k *keyring) dropAgent(a agent.ExtendedAgent) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.agent == a && k.conn != nil {
		k.conn.Close()
		k.conn, k.agent = nil, nil
	}
}

// fileSigner parses an identity file once and caches the result.
func (k *keyring) fileSigner(path string) fileKey {
	k.mu.Lock()
	defer k.mu.Unlock()
	if fk, ok := k.files[path]; ok {
		return fk
	}
	fk := loadKeyFile(path)
	k.files[path] = fk
	return fk
}

func loadKeyFile(path string) fileKey {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fileKey{}
	}
	if err != nil {
		return fileKey{note: fmt.Sprintf("%s: %v", path, err)}
	}
	s, err := ssh.ParsePrivateKey(b)
	var pm *ssh.PassphraseMissingError
	if errors.As(err, &pm) {
		return fileKey{note: fmt.Sprintf("%s: protected by a passphrase (load it into ssh-agent)", path)}
	}
	if err != nil {
		return fileKey{note: fmt.Sprintf("%s: %v", path, err)}
	}
	return fileKey{signer: s}
}

// signers returns the agent's keys followed by the target's identity files,
// skipping a file whose public key the agent already offers, and notes on
// sources that could not be used.
func (k *keyring) signers(t *target) ([]ssh.Signer, []string) {
	var notes []string
	signers, note := k.agentSigners()
	if note != "" {
		notes = append(notes, note)
	}
	seen := make(map[string]bool, len(signers))
	for _, s := range signers {
		seen[string(s.PublicKey().Marshal())] = true
	}
	for _, f := range t.identityFiles {
		fk := k.fileSigner(f)
		if fk.note != "" {
			notes = append(notes, fk.note)
		}
		if fk.signer == nil || seen[string(fk.signer.PublicKey().Marshal())] {
			continue
		}
		seen[string(fk.signer.PublicKey().Marshal())] = true
		signers = append(signers, fk.signer)
	}
	return signers, notes
}

// describe names the key sources tried, for an authentication error.
func (k *keyring) describe(t *target, n int, notes []string) string {
	src := "identity files " + strings.Join(t.identityFiles, ", ")
	if k.agentSock != "" {
		src = "ssh-agent " + k.agentSock + " and " + src
	}
	s := fmt.Sprintf("%d key(s) from %s", n, src)
	if len(notes) > 0 {
		s += " (skipped: " + strings.Join(notes, "; ") + ")"
	}
	return s
}

func (k *keyring) close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closed = true
	if k.conn != nil {
		err := k.conn.Close()
		k.conn, k.agent = nil, nil
		return err
	}
	return nil
}
