package sshspawn

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kevinburke/ssh_config"
)

// The OpenSSH client options this package honours. Other keywords in the file
// are accepted and ignored.
const (
	kwHostName       = "HostName"
	kwUser           = "User"
	kwPort           = "Port"
	kwIdentityFile   = "IdentityFile"
	kwKnownHosts     = "UserKnownHostsFile"
	kwStrictHostKey  = "StrictHostKeyChecking"
	kwConnectTimeout = "ConnectTimeout"
	kwForwardAgent   = "ForwardAgent"
)

// sshConfig is a parsed OpenSSH client configuration. A nil *sshConfig is an
// empty configuration. It is read-only after loadConfig and safe for
// concurrent use.
type sshConfig struct {
	file string
	cfg  *ssh_config.Config
}

// loadConfig reads the OpenSSH client configuration at path. When named is
// false (the default ~/.ssh/config) a missing file yields an empty
// configuration; a file named by the user must exist. "none" disables the
// configuration, as with ssh -F none.
func loadConfig(path string, named bool) (*sshConfig, error) {
	if path == "none" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		if !named && errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("ssh config %s: %w", path, err)
	}
	cfg, err := ssh_config.DecodeBytes(b)
	if err != nil {
		return nil, fmt.Errorf("ssh config %s: parse: %w", path, err)
	}
	if err := validateConfig(path, cfg); err != nil {
		return nil, err
	}
	return &sshConfig{file: path, cfg: cfg}, nil
}

// validateConfig checks the values of the keywords this package uses, so a
// typo is reported with its line when the spawner is made rather than at the
// first launch to an affected host.
func validateConfig(path string, cfg *ssh_config.Config) error {
	for _, h := range cfg.Hosts {
		if len(h.Patterns) == 0 {
			return fmt.Errorf("ssh config %s: a Host line without patterns", path)
		}
		for _, n := range h.Nodes {
			kv, ok := n.(*ssh_config.KV)
			if !ok {
				continue
			}
			if err := validateKV(kv.Key, kv.Value); err != nil {
				return fmt.Errorf("ssh config %s line %d: %w", path, kv.Pos().Line, err)
			}
		}
	}
	return nil
}

func validateKV(key, val string) error {
	switch {
	case strings.EqualFold(key, kwPort):
		if _, err := parsePort(val); err != nil {
			return err
		}
	case strings.EqualFold(key, kwConnectTimeout):
		if _, err := parseTimeout(val); err != nil {
			return err
		}
	case strings.EqualFold(key, kwStrictHostKey):
		if _, err := parseStrict(val); err != nil {
			return err
		}
	case strings.EqualFold(key, kwForwardAgent):
		if _, err := parseYesNo(kwForwardAgent, val); err != nil {
			return err
		}
	case strings.EqualFold(key, kwHostName), strings.EqualFold(key, kwUser),
		strings.EqualFold(key, kwIdentityFile), strings.EqualFold(key, kwKnownHosts):
		if strings.TrimSpace(val) == "" {
			return fmt.Errorf("%s needs a value", key)
		}
	}
	return nil
}

func parsePort(s string) (int, error) {
	p, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("bad Port %q: want a number from 1 to 65535", s)
	}
	return p, nil
}

func parseTimeout(s string) (time.Duration, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad ConnectTimeout %q: want whole seconds", s)
	}
	return time.Duration(n) * time.Second, nil
}

func parseStrict(s string) (HostKeyPolicy, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "yes", "ask":
		// "ask" needs a terminal; a launcher has none, so it is strict.
		return HostKeyStrict, nil
	case "accept-new":
		return HostKeyAcceptNew, nil
	case "no", "off":
		return HostKeyInsecure, nil
	}
	return 0, fmt.Errorf("bad StrictHostKeyChecking %q: want yes, no or accept-new", s)
}

func parseYesNo(key, s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "yes", "true":
		return true, nil
	case "no", "false":
		return false, nil
	}
	return false, fmt.Errorf("bad %s %q: want yes or no", key, s)
}

// get returns the first value of key for alias, as OpenSSH does (the first
// obtained value wins), or "".
func (c *sshConfig) get(alias, key string) (string, error) {
	if c == nil {
		return "", nil
	}
	v, err := c.cfg.Get(alias, key)
	if err != nil {
		return "", fmt.Errorf("ssh config %s: %s for %s: %w", c.file, key, alias, err)
	}
	return strings.TrimSpace(v), nil
}

// getAll returns every value of key for alias, in file order.
func (c *sshConfig) getAll(alias, key string) ([]string, error) {
	if c == nil {
		return nil, nil
	}
	v, err := c.cfg.GetAll(alias, key)
	if err != nil {
		return nil, fmt.Errorf("ssh config %s: %s for %s: %w", c.file, key, alias, err)
	}
	return v, nil
}

// target is everything needed to reach one host, resolved from the host
// argument, the spawner's Options and the OpenSSH configuration.
type target struct {
	alias           string // the host as the caller named it, without user@ and :port
	hostName        string // the name or address to dial
	port            int
	user            string
	identityFiles   []string
	knownHostsFiles []string
	policy          HostKeyPolicy
	connectTimeout  time.Duration
	forwardAgent    bool
}

// addr is the dial address, also the name checked against known_hosts.
func (t *target) addr() string {
	return net.JoinHostPort(t.hostName, strconv.Itoa(t.port))
}

// splitHost splits "[user@]host[:port]". A bare IPv6 address is accepted
// without brackets when it carries no port.
func splitHost(arg string) (user, host string, port int, err error) {
	host = arg
	if i := strings.LastIndex(host, "@"); i >= 0 {
		user, host = host[:i], host[i+1:]
		if user == "" {
			return "", "", 0, fmt.Errorf("bad host %q: empty user name before @", arg)
		}
	}
	if h, p, perr := net.SplitHostPort(host); perr == nil {
		port, err = parsePort(p)
		if err != nil {
			return "", "", 0, fmt.Errorf("bad host %q: %w", arg, err)
		}
		host = h
	}
	if host == "" || strings.ContainsAny(host, " \t\r\n/'\"\\") {
		return "", "", 0, fmt.Errorf("bad host %q", arg)
	}
	return user, host, port, nil
}

// resolve computes the target for hostArg. Precedence, highest first:
// user@ and :port in hostArg; explicit Options; the OpenSSH configuration;
// defaults. Options.DefaultUser is the exception: it is only a fallback
// below the configuration's User.
func (s *Spawner) resolve(hostArg string) (*target, error) {
	user, alias, port, err := splitHost(hostArg)
	if err != nil {
		return nil, err
	}
	c := s.cfg
	t := &target{alias: alias, hostName: alias, port: 22}

	if v, err := c.get(alias, kwHostName); err != nil {
		return nil, err
	} else if v != "" {
		t.hostName = expandTokens(v, map[byte]string{'h': alias})
	}

	if port != 0 {
		t.port = port
	} else if v, err := c.get(alias, kwPort); err != nil {
		return nil, err
	} else if v != "" {
		if t.port, err = parsePort(v); err != nil {
			return nil, fmt.Errorf("ssh config %s: host %s: %w", s.cfg.file, alias, err)
		}
	}

	switch v, err := c.get(alias, kwUser); {
	case err != nil:
		return nil, err
	case user != "":
		t.user = user
	case v != "":
		t.user = v
	case s.opts.DefaultUser != "":
		t.user = s.opts.DefaultUser
	default:
		t.user = s.localUser
	}

	tokens := map[byte]string{
		'h': t.hostName, 'n': alias, 'p': strconv.Itoa(t.port),
		'r': t.user, 'u': s.localUser, 'd': s.home,
	}
	ids, err := c.getAll(alias, kwIdentityFile)
	if err != nil {
		return nil, err
	}
	for _, f := range append(append([]string(nil), s.opts.IdentityFiles...), ids...) {
		t.identityFiles = appendUnique(t.identityFiles, s.expandPath(f, tokens))
	}
	if len(t.identityFiles) == 0 {
		for _, f := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
			t.identityFiles = append(t.identityFiles, filepath.Join(s.home, ".ssh", f))
		}
	}

	if len(s.opts.KnownHostsFiles) > 0 {
		for _, f := range s.opts.KnownHostsFiles {
			t.knownHostsFiles = appendUnique(t.knownHostsFiles, s.expandPath(f, tokens))
		}
	} else if v, err := c.get(alias, kwKnownHosts); err != nil {
		return nil, err
	} else if v != "" {
		for _, f := range strings.Fields(v) {
			t.knownHostsFiles = appendUnique(t.knownHostsFiles, s.expandPath(f, tokens))
		}
	} else {
		t.knownHostsFiles = []string{filepath.Join(s.home, ".ssh", "known_hosts")}
	}

	t.policy = s.opts.HostKeyPolicy
	if t.policy == HostKeyFromConfig {
		t.policy = HostKeyStrict
		if v, err := c.get(alias, kwStrictHostKey); err != nil {
			return nil, err
		} else if v != "" {
			if t.policy, err = parseStrict(v); err != nil {
				return nil, fmt.Errorf("ssh config %s: host %s: %w", s.cfg.file, alias, err)
			}
		}
	}

	t.connectTimeout = s.opts.ConnectTimeout
	if t.connectTimeout == 0 {
		t.connectTimeout = defaultConnectTimeout
		if v, err := c.get(alias, kwConnectTimeout); err != nil {
			return nil, err
		} else if v != "" {
			d, err := parseTimeout(v)
			if err != nil {
				return nil, fmt.Errorf("ssh config %s: host %s: %w", s.cfg.file, alias, err)
			}
			if d > 0 {
				t.connectTimeout = d
			}
		}
	}

	t.forwardAgent = s.opts.ForwardAgent
	if !t.forwardAgent {
		if v, err := c.get(alias, kwForwardAgent); err != nil {
			return nil, err
		} else if v != "" {
			if t.forwardAgent, err = parseYesNo(kwForwardAgent, v); err != nil {
				return nil, fmt.Errorf("ssh config %s: host %s: %w", s.cfg.file, alias, err)
			}
		}
	}
	return t, nil
}

// expandPath expands a leading ~ and the % tokens of an OpenSSH path option.
func (s *Spawner) expandPath(p string, tokens map[byte]string) string {
	p = expandTokens(p, tokens)
	if p == "~" {
		return s.home
	}
	if strings.HasPrefix(p, "~/") {
		return filepath.Join(s.home, p[2:])
	}
	return p
}

// expandTokens replaces %x by tokens[x] and %% by %. Unknown tokens are kept.
func expandTokens(s string, tokens map[byte]string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		if s[i] == '%' {
			b.WriteByte('%')
		} else if v, ok := tokens[s[i]]; ok {
			b.WriteString(v)
		} else {
			b.WriteByte('%')
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

func appendUnique(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}
