package sshspawn

// Integration tests against a real OpenSSH sshd, started by each test on
// 127.0.0.1 with its own host key, authorized_keys and clean HOME. They skip
// when /usr/sbin/sshd is not installed (the project's make test installs
// openssh-server) or when not running as root.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

const sshdPath = "/usr/sbin/sshd"

// sshd is a running OpenSSH server and a client home that can log into it.
type sshd struct {
	addr       string
	port       int
	dir        string // holds keys, config, pid file, log and the session HOME
	home       string // the client's home: ~/.ssh/id_ed25519 and known_hosts
	knownHosts string
	hostLine   string // the known_hosts line for this server

	mu  sync.Mutex
	log bytes.Buffer
}

// startSSHD starts sshd -D -e with extra config lines and stops it in
// t.Cleanup.
func startSSHD(tb testing.TB, extra ...string) *sshd {
	tb.Helper()
	if _, err := os.Stat(sshdPath); err != nil {
		tb.Skipf("skipping: %s not installed (install openssh-server; make test does)", sshdPath)
	}
	if os.Geteuid() != 0 {
		tb.Skip("skipping: sshd integration tests need root (sshd privilege separation)")
	}
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		tb.Skipf("skipping: cannot create sshd's privilege separation dir: %v", err)
	}
	d := &sshd{dir: tb.TempDir(), home: tb.TempDir()}
	sessionHome := filepath.Join(d.dir, "home")
	if err := os.Mkdir(sessionHome, 0o755); err != nil {
		tb.Fatal(err)
	}
	hostKey, hostPriv := newEd25519(tb)
	writeKey(tb, filepath.Join(d.dir, "host_ed25519"), hostPriv, "")
	client, clientPriv := newEd25519(tb)
	writeKey(tb, filepath.Join(d.home, ".ssh", "id_ed25519"), clientPriv, "")
	if err := os.WriteFile(filepath.Join(d.dir, "authorized_keys"), ssh.MarshalAuthorizedKey(client.PublicKey()), 0o600); err != nil {
		tb.Fatal(err)
	}

	for try := 1; ; try++ {
		port := freePort(tb)
		err := d.run(tb, port, sessionHome, extra)
		if err == nil {
			break
		}
		if try == 3 {
			tb.Fatalf("start sshd: %v\n%s", err, d.logText())
		}
	}
	d.hostLine = fmt.Sprintf("[127.0.0.1]:%d %s", d.port, bytes.TrimSpace(ssh.MarshalAuthorizedKey(hostKey.PublicKey())))
	d.knownHosts = filepath.Join(d.home, ".ssh", "known_hosts")
	if err := os.WriteFile(d.knownHosts, []byte(d.hostLine+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	return d
}

func freePort(tb testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// run starts sshd on port and waits until it reports that it listens.
func (d *sshd) run(tb testing.TB, port int, sessionHome string, extra []string) error {
	conf := strings.Join(append([]string{
		fmt.Sprintf("ListenAddress 127.0.0.1:%d", port),
		"HostKey " + filepath.Join(d.dir, "host_ed25519"),
		"PidFile " + filepath.Join(d.dir, "sshd.pid"),
		"AuthorizedKeysFile " + filepath.Join(d.dir, "authorized_keys"),
		"UsePAM no",
		"UseDNS no",
		"StrictModes no",
		"PermitRootLogin prohibit-password",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"PrintMotd no",
		"LogLevel INFO",
		// A clean HOME: no ~/.bashrc of the machine's root runs per command.
		"SetEnv HOME=" + sessionHome,
	}, extra...), "\n") + "\n"
	confFile := filepath.Join(d.dir, "sshd_config")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		return err
	}
	cmd := exec.Command(sshdPath, "-D", "-e", "-f", confFile)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return err
	}
	ready := make(chan struct{})
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		sc := bufio.NewScanner(stderr)
		signalled := false
		for sc.Scan() {
			d.mu.Lock()
			d.log.Write(sc.Bytes())
			d.log.WriteByte('\n')
			d.mu.Unlock()
			if !signalled && strings.Contains(sc.Text(), "Server listening on") {
				signalled = true
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case <-logDone: // sshd exited (e.g. the port was taken meanwhile)
		cmd.Wait()
		return fmt.Errorf("sshd exited before listening")
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		return fmt.Errorf("sshd did not listen within 20 s")
	}
	d.port, d.addr = port, fmt.Sprintf("127.0.0.1:%d", port)
	tb.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		<-logDone
		if tb.Failed() {
			tb.Logf("sshd log:\n%s", d.logText())
		}
	})
	return nil
}

func (d *sshd) logText() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.log.String()
}

// spawner makes a Spawner for this server using only the test's files.
func (d *sshd) spawner(tb testing.TB, mod func(*Options)) *Spawner {
	tb.Helper()
	o := Options{HomeDir: d.home, ConfigFile: "none", AgentSocket: "none"}
	if mod != nil {
		mod(&o)
	}
	sp, err := New(o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { sp.Close() })
	return sp
}

func TestSSHDEchoStdinExit(t *testing.T) {
	d := startSSHD(t)
	sp := d.spawner(t, nil)

	out, _, err := run(t, sp, d.addr, []string{"sh", "-c", `echo "hello $1 from $HOME"`, "sh", "wide world"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("hello wide world from %s/home\n", d.dir); out != want {
		t.Errorf("stdout = %q, want %q", out, want)
	}

	payload := bytes.Repeat([]byte("credential\x00\xff"), 20000)
	out, _, err = run(t, sp, d.addr, []string{"head", "-c", strconv.Itoa(len(payload))}, payload)
	if err != nil || out != string(payload) {
		t.Errorf("stdin round trip: %d bytes back of %d, err %v", len(out), len(payload), err)
	}

	_, errOut, err := run(t, sp, d.addr, []string{"sh", "-c", "echo bad >&2; exit 42"}, nil)
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Status != 42 || errOut != "bad\n" {
		t.Errorf("exit: err = %v, stderr = %q; want status 42 and \"bad\"", err, errOut)
	}
}

func TestSSHDCloseDeliversEOF(t *testing.T) {
	d := startSSHD(t)
	sp := d.spawner(t, nil)
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// The remote command consumes its payload, then waits for EOF and
	// reports it through the FIFO.
	s, err := sp.Start(ctxT(t), d.addr, []string{"sh", "-c", `read x; cat >/dev/null; echo "eof after $x" > "$1"`, "sh", fifo}, []byte("token\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		b, err := os.ReadFile(fifo) // blocks until the remote side opens it
		if err != nil {
			got <- err.Error()
			return
		}
		got <- string(b)
	}()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-got:
		if g != "eof after token\n" {
			t.Errorf("remote side reported %q", g)
		}
	case <-time.After(20 * time.Second):
		// Unblock the reader before failing.
		if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		<-got
		t.Fatal("the remote command did not see EOF after Close")
	}
}

func TestSSHDKill(t *testing.T) {
	d := startSSHD(t)
	sp := d.spawner(t, nil)
	// The command exits on stdin EOF too, so it ends even where sshd
	// refuses the signal.
	s, err := sp.Start(ctxT(t), d.addr, []string{"sh", "-c", "echo $$; exec cat"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(s.Stdout()).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("pid line %q: %v", line, err)
	}
	err = s.Kill()
	if os.Geteuid() == 0 {
		// OpenSSH runs root's sessions without privilege separation and
		// then refuses "signal" requests; Kill says so and closes.
		if !errors.Is(err, ErrSignalRefused) {
			t.Errorf("Kill as root = %v, want ErrSignalRefused", err)
		}
	} else if err != nil {
		t.Errorf("Kill = %v", err)
	}
	// sshd and the test share this machine: wait until the process is gone.
	waitFor(t, func() bool { return syscall.Kill(pid, 0) == syscall.ESRCH })
}

func TestSSHDMaxStartupsBurst(t *testing.T) {
	// sshd drops every unauthenticated connection beyond the first.
	d := startSSHD(t, "MaxStartups 1:100:1")
	const n = 16
	burst := func(sp *Spawner) (ok int, attempts int64, errs []error) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var total atomic.Int64
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				begin := time.Now()
				s, err := sp.Start(ctxT(t), d.addr, []string{"true"}, nil)
				mu.Lock()
				defer mu.Unlock()
				if el := time.Since(begin); err != nil && el > 2*time.Second {
					t.Logf("slow failure after %v: %v", el, err)
				}
				if err != nil {
					errs = append(errs, err)
					return
				}
				ok++
				total.Add(int64(s.Timings().Attempts))
				if tm := s.Timings(); tm.Total > 2*time.Second {
					t.Logf("slow launch: %+v", tm)
				}
				s.Stdin().Close()
				w := time.Now()
				if err := s.Wait(); err != nil {
					errs = append(errs, err)
				}
				if el := time.Since(w); el > 2*time.Second {
					t.Logf("slow wait: %v", el)
				}
			}()
		}
		wg.Wait()
		return ok, total.Load(), errs
	}

	// Without retries some launches fail: the burst really is dropped.
	_, _, errs := burst(d.spawner(t, func(o *Options) { o.MaxPerHost = n; o.MaxAttempts = 1 }))
	if len(errs) == 0 {
		t.Fatal("no launch was dropped; the test does not exercise MaxStartups")
	}
	t.Logf("without retries: %d of %d failed, e.g. %v", len(errs), n, errs[0])

	ok, attempts, errs := burst(d.spawner(t, func(o *Options) { o.MaxPerHost = n }))
	for _, err := range errs {
		t.Error(err)
	}
	if ok != n {
		t.Fatalf("%d of %d launches succeeded", ok, n)
	}
	t.Logf("with retries: all %d succeeded in %d attempts", n, attempts)
	if attempts <= n {
		t.Errorf("%d attempts for %d launches: no retry happened", attempts, n)
	}

	// The default per-host limit alone is not enough for this sshd, but
	// with retries the defaults succeed too.
	ok, attempts, errs = burst(d.spawner(t, nil))
	if ok != n || len(errs) > 0 {
		t.Errorf("defaults: %d of %d succeeded, errors %v", ok, n, errs)
	}
	t.Logf("defaults: all %d succeeded in %d attempts", n, attempts)
}

func TestSSHDHostKeys(t *testing.T) {
	d := startSSHD(t)
	if err := os.WriteFile(d.knownHosts, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	sp := d.spawner(t, nil)
	_, err := sp.Start(ctxT(t), d.addr, []string{"true"}, nil)
	if !errors.Is(err, ErrHostKeyUnknown) || !strings.Contains(err.Error(), d.addr) || !strings.Contains(err.Error(), d.knownHosts) {
		t.Fatalf("unknown host key: err = %v", err)
	}
	t.Logf("refusal reads: %v", err)

	acc := d.spawner(t, func(o *Options) { o.HostKeyPolicy = HostKeyAcceptNew })
	if _, _, err := run(t, acc, d.addr, []string{"true"}, nil); err != nil {
		t.Fatalf("accept-new: %v", err)
	}
	if b, _ := os.ReadFile(d.knownHosts); string(b) != d.hostLine+"\n" {
		t.Errorf("known_hosts after accept-new = %q, want %q", b, d.hostLine+"\n")
	}
	if _, _, err := run(t, sp, d.addr, []string{"true"}, nil); err != nil {
		t.Errorf("strict after accept-new: %v", err)
	}
}

func TestSSHDForwardAgent(t *testing.T) {
	if _, err := exec.LookPath("ssh-add"); err != nil {
		t.Skip("skipping: ssh-add not installed")
	}
	d := startSSHD(t)
	_, priv := newEd25519(t)
	pub, _ := ssh.NewPublicKey(priv.Public())
	sock := serveAgent(t, priv)
	sp := d.spawner(t, func(o *Options) { o.AgentSocket = sock; o.ForwardAgent = true })
	out, _, err := run(t, sp, d.addr, []string{"ssh-add", "-L"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The agent holds the forwarded key and the client authenticated with
	// the identity file; only the agent's key is listed remotely.
	if want := string(bytes.TrimSpace(ssh.MarshalAuthorizedKey(pub))); !strings.Contains(out, want) {
		t.Errorf("remote ssh-add -L = %q, want the agent's key %q", out, want)
	}
}

// BenchmarkSSHDLaunch measures sequential launches of `true`-like commands
// against a local sshd, with and without TCP_QUICKACK. REM-ms is the time
// from Start to the first byte of the remote command's output (the command
// runs); SEQ-ms is the time Start holds the caller (what a parent spends
// before it can start its next child). Run with
//
//	go test -run '^$' -bench SSHDLaunch -benchtime 200x ./launch/sshspawn
func BenchmarkSSHDLaunch(b *testing.B) {
	d := startSSHD(b)
	for _, qa := range []bool{true, false} {
		name := "quickack"
		if !qa {
			name = "noquickack"
		}
		b.Run(name, func(b *testing.B) {
			sp := d.spawner(b, func(o *Options) { o.DisableQuickAck = !qa })
			var rem, seq, hs, auth, sess time.Duration
			buf := make([]byte, 1)
			n := 0
			for b.Loop() {
				begin := time.Now()
				s, err := sp.Start(context.Background(), d.addr, []string{"echo", "x"}, nil)
				if err != nil {
					b.Fatal(err)
				}
				seq += time.Since(begin)
				if _, err := io.ReadFull(s.Stdout(), buf); err != nil {
					b.Fatal(err)
				}
				rem += time.Since(begin)
				tm := s.Timings()
				hs += tm.Handshake
				auth += tm.Auth
				sess += tm.Session
				s.Stdin().Close()
				io.Copy(io.Discard, s.Stdout())
				if err := s.Wait(); err != nil {
					b.Fatal(err)
				}
				n++
			}
			ms := func(d time.Duration) float64 { return float64(d) / float64(n) / 1e6 }
			b.ReportMetric(ms(rem), "REM-ms")
			b.ReportMetric(ms(seq), "SEQ-ms")
			b.ReportMetric(ms(hs), "kex-ms")
			b.ReportMetric(ms(auth), "auth-ms")
			b.ReportMetric(ms(sess), "exec-ms")
		})
	}
}

// BenchmarkSSHDBurst32 starts 32 sessions at once against one sshd with the
// default MaxStartups (10:30:100) and the default Options (8 handshakes per
// host, adaptive), and reports the time until all commands ran and the
// connection attempts per launch. Run with
//
//	go test -run '^$' -bench SSHDBurst32 -benchtime 10x ./launch/sshspawn
func BenchmarkSSHDBurst32(b *testing.B) {
	d := startSSHD(b)
	sp := d.spawner(b, nil)
	const n = 32
	var attempts atomic.Int64
	runs := 0
	for b.Loop() {
		var wg sync.WaitGroup
		sessions := make(chan *Session, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := sp.Start(context.Background(), d.addr, []string{"true"}, nil)
				if err != nil {
					b.Error(err)
					return
				}
				attempts.Add(int64(s.Timings().Attempts))
				sessions <- s
			}()
		}
		wg.Wait()
		close(sessions)
		b.StopTimer()
		for s := range sessions {
			s.Stdin().Close()
			s.Wait()
		}
		b.StartTimer()
		runs++
	}
	b.ReportMetric(float64(attempts.Load())/float64(runs*n), "attempts/launch")
}
