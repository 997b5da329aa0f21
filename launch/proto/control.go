package proto

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/ftlaunch/ftlaunch/overlay/secure"
	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// Job control: `ftlaunch cancel` and `ftlaunch kill` reach a running job's
// root over the job's own mutual TLS. The root (the front-end, or the
// replica agent that took over) writes two files into the job's state
// directory: the credentials of the job's controller (ControlKey, mode
// 0600: whoever reads the user's state directory may control the job) and
// where it listens (ControlFile, replaced whenever the root moves). The
// controller dials one of the addresses, sends a Hello with Control set,
// then one MControl frame; the root answers with one MControlAck.

// ControlName is the name in the controller's certificate. It is no
// node's name (a host name has no space), so the controller cannot pose
// as an agent of the tree.
const ControlName = "ftlaunch control"

// Files of job control, in a job's state directory.
const (
	ControlFile = "control.json"
	ControlKey  = "control.key"
)

// Message types of a control connection (numbers beside those of
// messages.go, never reused).
const (
	MControlAck uint8 = 31 // down, on a control connection: ControlAck
	MControl    uint8 = 57 // up, on a control connection after its hello: Control
)

// Control operations.
const (
	OpCancel = "cancel" // end the job as the user's SIGTERM would
	OpSignal = "signal" // send Signal to every rank
)

// Control is a controller's request.
type Control struct {
	Op     string
	Signal int    // OpSignal: the signal's number
	From   string // who asks: "user@host pid N", for the root's log
}

func (c Control) Encode() []byte {
	var e wire.Encoder
	e.String(c.Op).Int(int64(c.Signal)).String(c.From)
	return e.Data()
}

func DecodeControl(p []byte) (Control, error) {
	d := wire.NewDecoder(p)
	c := Control{Op: d.String(), Signal: int(d.Int()), From: d.String()}
	if err := d.Err(); err != nil {
		return c, fmt.Errorf("control request: %w", err)
	}
	return c, nil
}

// ControlAck is the root's answer: Err empty if it carried the request
// out (the job is ending, or the signal went to every rank).
type ControlAck struct {
	Root string // the node the root runs on
	Err  string
}

func (a ControlAck) Encode() []byte {
	var e wire.Encoder
	e.String(a.Root).String(a.Err)
	return e.Data()
}

func DecodeControlAck(p []byte) (ControlAck, error) {
	d := wire.NewDecoder(p)
	a := ControlAck{Root: d.String(), Err: d.String()}
	if err := d.Err(); err != nil {
		return a, fmt.Errorf("control answer: %w", err)
	}
	return a, nil
}

// ControlInfo is where a job's root listens (ControlFile).
type ControlInfo struct {
	Job  string `json:"job"`
	Root string `json:"root"` // the node the root runs on
	// Name is the name in the certificate of the root's listener (the
	// front-end's RootName, a successor's node).
	Name string `json:"name"`
	// Addrs are the root's listener's addresses (host:port), in the
	// order to try; empty for a job without a launch tree (every agent
	// local), whose front-end is reached by its PID on Host instead.
	Addrs   []string  `json:"addrs,omitempty"`
	Host    string    `json:"host"` // the root's host name
	PID     int       `json:"pid"`  // the root's process
	Updated time.Time `json:"updated"`
}

// WriteControlInfo replaces a job's ControlFile (write, then rename).
func WriteControlInfo(jobDir string, ci ControlInfo) error {
	b, err := json.Marshal(ci)
	if err != nil {
		return err
	}
	tmp := filepath.Join(jobDir, "."+ControlFile+"."+ci.Root)
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", ControlFile, err)
	}
	if err := os.Rename(tmp, filepath.Join(jobDir, ControlFile)); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", ControlFile, err)
	}
	return nil
}

// ReadControlInfo reads a job's ControlFile.
func ReadControlInfo(jobDir string) (ControlInfo, error) {
	var ci ControlInfo
	b, err := os.ReadFile(filepath.Join(jobDir, ControlFile))
	if err != nil {
		return ci, err
	}
	if err := json.Unmarshal(b, &ci); err != nil {
		return ci, fmt.Errorf("%s: %w", filepath.Join(jobDir, ControlFile), err)
	}
	return ci, nil
}

// ControlTimeout bounds a control connection's request and answer.
const ControlTimeout = 5 * time.Second

// PublishControl writes where a job's root takes control connections (ci,
// into jobDir's ControlFile) and, once per job, the controller's
// credentials, issued by the job's CA (ControlKey; none without a CA or
// without addresses: a job without a launch tree is reached by its
// front-end's PID).
func PublishControl(jobDir string, ca *secure.CA, ci ControlInfo) error {
	if ca != nil && len(ci.Addrs) > 0 {
		keyFile := filepath.Join(jobDir, ControlKey)
		if _, err := os.Stat(keyFile); err != nil {
			creds, err := ca.Issue(ControlName)
			if err == nil {
				err = writeFileAtomic(keyFile, creds.Marshal())
			}
			if err != nil {
				return fmt.Errorf("the controller's credentials: %w", err)
			}
		}
	}
	return WriteControlInfo(jobDir, ci)
}

// writeFileAtomic writes b to a file of mode 0600 under a temporary name,
// then renames it.
func writeFileAtomic(name string, b []byte) error {
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, name); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// ListenAddrs are the addresses a controller dials for listener ln: its
// own, or, when it listens on every interface, this host's addresses
// (none without a listener).
func ListenAddrs(ln net.Listener) []string {
	if ln == nil {
		return nil
	}
	ta, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		return nil
	}
	port := fmt.Sprint(ta.Port)
	if !ta.IP.IsUnspecified() {
		return []string{net.JoinHostPort(ta.IP.String(), port)}
	}
	var addrs []string
	for _, h := range OwnAddrs() {
		addrs = append(addrs, net.JoinHostPort(h, port))
	}
	return addrs
}

// ReadControl reads the request of a control connection (after its
// hello), and sets the connection's deadline for the answer
// (ControlTimeout from now). Only the controller's certificate may ask
// (an agent's may not).
func ReadControl(conn net.Conn) (Control, error) {
	if name, err := secure.PeerName(conn); err != nil || name != ControlName {
		return Control{}, fmt.Errorf("control connection from %q: only the controller may ask (%v)", name, err)
	}
	_ = conn.SetDeadline(time.Now().Add(ControlTimeout))
	f, err := wire.ReadFrame(conn, 4096)
	if err != nil {
		return Control{}, fmt.Errorf("control request: %w", err)
	}
	if f.Type != MControl {
		return Control{}, fmt.Errorf("control request: message type %d", f.Type)
	}
	return DecodeControl(f.Payload)
}

// AnswerControl writes the root's answer on a control connection.
func AnswerControl(conn net.Conn, ack ControlAck) error {
	return wire.WriteFrame(conn, MControlAck, ack.Encode())
}

// ServeControl serves one control connection and closes it: the
// controller's request (ReadControl) goes to put with the channel its
// answer comes back on (put reports false: nobody will answer), and the
// answer to the controller, unless ctx ends first.
func ServeControl(ctx context.Context, conn net.Conn, put func(req Control, reply chan<- ControlAck) bool) {
	defer conn.Close()
	req, err := ReadControl(conn)
	if err != nil {
		return
	}
	reply := make(chan ControlAck, 1)
	if !put(req, reply) {
		return
	}
	select {
	case ack := <-reply:
		_ = AnswerControl(conn, ack)
	case <-ctx.Done():
	}
}

// Check is the signal a request sends every rank (a cancel: SIGTERM's,
// as the user's), or why it is no request a root carries out.
func (c Control) Check() (sig int, err error) {
	switch c.Op {
	case OpCancel:
		return int(syscall.SIGTERM), nil
	case OpSignal:
		if c.Signal <= 0 || c.Signal >= 65 {
			return 0, fmt.Errorf("no signal %d", c.Signal)
		}
		return c.Signal, nil
	}
	return 0, fmt.Errorf("unknown control request %q", c.Op)
}
