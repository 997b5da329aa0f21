package sshspawn

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	"golang.org/x/sys/unix"
)

// Reasons carried by a HostKeyError; test with errors.Is.
var (
	// ErrHostKeyUnknown: no key is on record for the host.
	ErrHostKeyUnknown = errors.New("host key is unknown")
	// ErrHostKeyChanged: keys are on record for the host, none matches.
	ErrHostKeyChanged = errors.New("host key has changed")
	// ErrHostKeyRevoked: the key is marked @revoked.
	ErrHostKeyRevoked = errors.New("host key is revoked")
)

// HostKeyError is returned by Start when a host's key cannot be verified
// against the known_hosts files. It unwraps to ErrHostKeyUnknown,
// ErrHostKeyChanged or ErrHostKeyRevoked.
type HostKeyError struct {
	Host  string                // the address checked, host:port
	Key   ssh.PublicKey         // the key the server presented
	Files []string              // the known_hosts files consulted
	Known []knownhosts.KnownKey // the keys on record for Host (changed, revoked)
	Err   error                 // one of the ErrHostKey* reasons
}

func (e *HostKeyError) Error() string {
	fp := ssh.FingerprintSHA256(e.Key)
	files := strings.Join(e.Files, ", ")
	switch e.Err {
	case ErrHostKeyChanged:
		var known []string
		for _, k := range e.Known {
			known = append(known, fmt.Sprintf("%s:%d has %s %s", k.Filename, k.Line, k.Key.Type(), ssh.FingerprintSHA256(k.Key)))
		}
		return fmt.Sprintf("ssh %s: refusing connection: HOST KEY HAS CHANGED (possible man-in-the-middle): "+
			"server presented %s %s but %s; if the host was reinstalled, remove the stale line",
			e.Host, e.Key.Type(), fp, strings.Join(known, "; "))
	case ErrHostKeyRevoked:
		return fmt.Sprintf("ssh %s: refusing connection: host key %s %s is marked @revoked in %s",
			e.Host, e.Key.Type(), fp, files)
	default:
		return fmt.Sprintf("ssh %s: refusing connection: host key %s %s is not in %s "+
			"(add it with ssh-keyscan, or use StrictHostKeyChecking accept-new)",
			e.Host, e.Key.Type(), fp, files)
	}
}

func (e *HostKeyError) Unwrap() error { return e.Err }

// hostKeyDB caches the parsed known_hosts files and records new keys. It is
// safe for concurrent use.
type hostKeyDB struct {
	probe ssh.PublicKey // a key no file contains, to list a host's keys

	mu    sync.Mutex
	cache map[string]*khEntry // by the joined file list
}

type khEntry struct {
	stamps []fileStamp
	check  ssh.HostKeyCallback
}

type fileStamp struct {
	exists bool
	size   int64
	mod    time.Time
}

func stampFiles(files []string) ([]fileStamp, error) {
	st := make([]fileStamp, len(files))
	for i, f := range files {
		fi, err := os.Stat(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("known_hosts %s: %w", f, err)
		}
		st[i] = fileStamp{exists: true, size: fi.Size(), mod: fi.ModTime()}
	}
	return st, nil
}

// parse reads the files that exist; missing files hold no keys.
func parseKnownHosts(files []string, st []fileStamp) (ssh.HostKeyCallback, error) {
	var existing []string
	for i, f := range files {
		if st[i].exists {
			existing = append(existing, f)
		}
	}
	cb, err := knownhosts.New(existing...)
	if err != nil {
		return nil, fmt.Errorf("read known_hosts: %w", err)
	}
	return cb, nil
}

// checker returns the callback for files, re-reading them when one changed.
func (db *hostKeyDB) checker(files []string) (ssh.HostKeyCallback, error) {
	st, err := stampFiles(files)
	if err != nil {
		return nil, err
	}
	key := strings.Join(files, "\x00")
	db.mu.Lock()
	defer db.mu.Unlock()
	if e := db.cache[key]; e != nil && sameStamps(e.stamps, st) {
		return e.check, nil
	}
	cb, err := parseKnownHosts(files, st)
	if err != nil {
		return nil, err
	}
	db.cache[key] = &khEntry{stamps: st, check: cb}
	return cb, nil
}

func sameStamps(a, b []fileStamp) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].exists != b[i].exists || a[i].size != b[i].size || !a[i].mod.Equal(b[i].mod) {
			return false
		}
	}
	return true
}

// algorithms returns the host key algorithms to offer for addr: those of the
// keys on record, so the server cannot pick a key type the files do not
// hold (which would look like a changed key). nil means "no preference".
func (db *hostKeyDB) algorithms(files []string, addr string) ([]string, error) {
	cb, err := db.checker(files)
	if err != nil {
		return nil, err
	}
	var ke *knownhosts.KeyError
	if err := cb(addr, &net.TCPAddr{IP: net.IPv4zero}, db.probe); !errors.As(err, &ke) {
		return nil, nil
	}
	var algs []string
	for _, k := range ke.Want {
		switch t := k.Key.Type(); t {
		case ssh.KeyAlgoRSA:
			for _, a := range []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA} {
				algs = appendUnique(algs, a)
			}
		default:
			algs = appendUnique(algs, t)
		}
	}
	return algs, nil
}

// verify checks key for addr under policy, recording it when the policy
// accepts new keys.
func (db *hostKeyDB) verify(files []string, policy HostKeyPolicy, addr string, remote net.Addr, key ssh.PublicKey) error {
	cb, err := db.checker(files)
	if err != nil {
		return err
	}
	err = cb(addr, remote, key)
	if err == nil {
		return nil
	}
	hkErr := classify(err, files, addr, key)
	if hkErr == nil {
		return fmt.Errorf("ssh %s: verify host key: %w", addr, err)
	}
	switch {
	case policy == HostKeyInsecure && hkErr.Err != ErrHostKeyRevoked:
		return nil
	case policy == HostKeyAcceptNew && hkErr.Err == ErrHostKeyUnknown:
		return db.record(files, addr, remote, key)
	}
	return hkErr
}

func classify(err error, files []string, addr string, key ssh.PublicKey) *HostKeyError {
	var ke *knownhosts.KeyError
	var re *knownhosts.RevokedError
	switch {
	case errors.As(err, &re):
		return &HostKeyError{Host: addr, Key: key, Files: files, Known: []knownhosts.KnownKey{re.Revoked}, Err: ErrHostKeyRevoked}
	case errors.As(err, &ke) && len(ke.Want) == 0:
		return &HostKeyError{Host: addr, Key: key, Files: files, Err: ErrHostKeyUnknown}
	case errors.As(err, &ke):
		return &HostKeyError{Host: addr, Key: key, Files: files, Known: ke.Want, Err: ErrHostKeyChanged}
	}
	return nil
}

// record appends key for addr to the first file (trust on first use). The
// file is locked with flock, and re-read under the lock, so that concurrent
// launches, in this process or others, neither duplicate the line nor accept
// two different keys for one host: the second one is refused as changed.
func (db *hostKeyDB) record(files []string, addr string, remote net.Addr, key ssh.PublicKey) error {
	file := files[0]
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return fmt.Errorf("record host key of %s: %w", addr, err)
	}
	f, err := os.OpenFile(file, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("record host key of %s: %w", addr, err)
	}
	defer f.Close()
	if err := flock(f, unix.LOCK_EX); err != nil {
		return fmt.Errorf("record host key of %s: lock %s: %w", addr, file, err)
	}
	defer flock(f, unix.LOCK_UN)

	st, err := stampFiles(files)
	if err != nil {
		return err
	}
	cb, err := parseKnownHosts(files, st)
	if err != nil {
		return err
	}
	if err := cb(addr, remote, key); err == nil {
		return nil // another launch recorded this very key meanwhile
	} else if hk := classify(err, files, addr, key); hk == nil || hk.Err != ErrHostKeyUnknown {
		if hk != nil {
			return hk
		}
		return fmt.Errorf("ssh %s: verify host key: %w", addr, err)
	}

	line := knownhosts.Line([]string{knownhosts.Normalize(addr)}, key) + "\n"
	if fi, err := f.Stat(); err != nil {
		return fmt.Errorf("record host key of %s: %w", addr, err)
	} else if fi.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, fi.Size()-1); err != nil && err != io.EOF {
			return fmt.Errorf("record host key of %s: read %s: %w", addr, file, err)
		}
		if last[0] != '\n' {
			line = "\n" + line
		}
	}
	if _, err := f.WriteString(line); err != nil {
		return fmt.Errorf("record host key of %s: write %s: %w", addr, file, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("record host key of %s: sync %s: %w", addr, file, err)
	}
	return nil
}

func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			return err
		}
	}
}
