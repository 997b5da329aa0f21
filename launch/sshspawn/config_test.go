package sshspawn

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const testConfig = `
# cluster nodes
Host node* !node9
    HostName 10.77.0.%h.example
    User launcher
    Port 2222
    IdentityFile ~/.ssh/cluster_%r
    IdentityFile /keys/%n.key
    UserKnownHostsFile ~/kh1 /etc/kh2
    StrictHostKeyChecking accept-new
    ConnectTimeout 3

Host node9
    HostName = nine.example
    StrictHostKeyChecking no

Host *
    User fallback
    Port 2200
    ConnectTimeout 7
    ForwardAgent yes
`

func TestResolve(t *testing.T) {
	home := t.TempDir()
	cfg := writeFile(t, home, "config", testConfig)
	sp, err := New(Options{HomeDir: home, ConfigFile: cfg, AgentSocket: "none", DefaultUser: "dflt"})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()

	n1, err := sp.resolve("node1")
	if err != nil {
		t.Fatal(err)
	}
	want := &target{
		alias: "node1", hostName: "10.77.0.node1.example", port: 2222, user: "launcher",
		identityFiles:   []string{filepath.Join(home, ".ssh/cluster_launcher"), "/keys/node1.key"},
		knownHostsFiles: []string{filepath.Join(home, "kh1"), "/etc/kh2"},
		policy:          HostKeyAcceptNew, connectTimeout: 3 * time.Second, forwardAgent: true,
	}
	if !reflect.DeepEqual(n1, want) {
		t.Errorf("node1:\n got %+v\nwant %+v", n1, want)
	}
	if n1.addr() != "10.77.0.node1.example:2222" {
		t.Errorf("addr = %s", n1.addr())
	}

	// The negated pattern excludes node9 from the first block.
	n9, err := sp.resolve("bob@node9:23")
	if err != nil {
		t.Fatal(err)
	}
	if n9.hostName != "nine.example" || n9.user != "bob" || n9.port != 23 || n9.policy != HostKeyInsecure ||
		n9.connectTimeout != 7*time.Second || len(n9.identityFiles) != 3 ||
		n9.identityFiles[0] != filepath.Join(home, ".ssh", "id_ed25519") ||
		!reflect.DeepEqual(n9.knownHostsFiles, []string{filepath.Join(home, ".ssh", "known_hosts")}) {
		t.Errorf("node9: %+v", n9)
	}

	// Explicit options beat the configuration; DefaultUser does not.
	sp2, err := New(Options{HomeDir: home, ConfigFile: cfg, AgentSocket: "none", DefaultUser: "dflt",
		HostKeyPolicy: HostKeyStrict, ConnectTimeout: time.Second, KnownHostsFiles: []string{"~/mine"},
		IdentityFiles: []string{"/first"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sp2.Close()
	o, err := sp2.resolve("other")
	if err != nil {
		t.Fatal(err)
	}
	if o.user != "fallback" || o.port != 2200 || o.policy != HostKeyStrict || o.connectTimeout != time.Second ||
		!reflect.DeepEqual(o.knownHostsFiles, []string{filepath.Join(home, "mine")}) ||
		!reflect.DeepEqual(o.identityFiles, []string{"/first"}) {
		t.Errorf("other: %+v", o)
	}
	// IPv6 literals.
	if v6, err := sp2.resolve("[::1]:2022"); err != nil || v6.addr() != "[::1]:2022" {
		t.Errorf("[::1]:2022 -> %+v, %v", v6, err)
	}
	if v6, err := sp2.resolve("::1"); err != nil || v6.addr() != "[::1]:2200" {
		t.Errorf("::1 -> %+v, %v", v6, err)
	}
}

func TestResolveDefaults(t *testing.T) {
	home := t.TempDir() // no ~/.ssh/config: fine
	sp, err := New(Options{HomeDir: home, AgentSocket: "none"})
	if err != nil {
		t.Fatalf("missing default config: %v", err)
	}
	defer sp.Close()
	tg, err := sp.resolve("h")
	if err != nil {
		t.Fatal(err)
	}
	if tg.port != 22 || tg.user == "" || tg.policy != HostKeyStrict || tg.connectTimeout != defaultConnectTimeout || tg.forwardAgent {
		t.Errorf("defaults: %+v", tg)
	}
	// The default config file is read when present.
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	writeFile(t, home, ".ssh/config", "Host h\n  Port 99\n")
	sp2, err := New(Options{HomeDir: home, AgentSocket: "none"})
	if err != nil {
		t.Fatal(err)
	}
	defer sp2.Close()
	if tg, _ := sp2.resolve("h"); tg.port != 99 {
		t.Errorf("default config not read: %+v", tg)
	}
}

func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct{ body, want string }{
		"badport":    {"Host a\n  Port 99999\n", "line 2: bad Port"},
		"badstrict":  {"Host a\n\n  StrictHostKeyChecking maybe\n", "line 3: bad StrictHostKeyChecking"},
		"badtimeout": {"ConnectTimeout 1.5\n", "line 1: bad ConnectTimeout"},
		"badfwd":     {"Host *\n ForwardAgent sometimes\n", "line 2: bad ForwardAgent"},
		"emptyhost":  {"Host\n  Port 22\n", "Host line without patterns"},
		"novalue":    {"Host a\n  HostName\n", "HostName needs a value"},
	} {
		p := writeFile(t, dir, name, tc.body)
		_, err := New(Options{HomeDir: dir, ConfigFile: p, AgentSocket: "none"})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: err = %v, want it to name %s and say %q", name, err, p, tc.want)
		}
	}
	missing := filepath.Join(dir, "missing")
	if _, err := New(Options{HomeDir: dir, ConfigFile: missing}); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing named config: err = %v", err)
	}
	if _, err := New(Options{HomeDir: dir, ConfigFile: "none", AgentSocket: "none"}); err != nil {
		t.Errorf("ConfigFile none: %v", err)
	}
}

func TestSplitHostErrors(t *testing.T) {
	for _, h := range []string{"", "@host", "host:0", "host:x", "a b", "user@", "h/x"} {
		if _, _, _, err := splitHost(h); err == nil {
			t.Errorf("splitHost(%q) accepted", h)
		}
	}
}

func TestExpandTokens(t *testing.T) {
	got := expandTokens("%h-%%-%r-%z-%", map[byte]string{'h': "H", 'r': "R"})
	if want := "H-%-R-%z-%"; got != want {
		t.Errorf("expandTokens = %q, want %q", got, want)
	}
}
