package root

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/ftlaunch/ftlaunch/launch/proto"
)

// outItem is one piece of output: complete lines of a rank's stream, or
// (with agent nil) one of ftlaunch's own messages for stderr.
type outItem struct {
	agent        *agentHandle
	seq          uint64 // the agent's frame number (outq.go)
	rank, stream int
	data         []byte
	progress     bool // data is the new progress line ("" clears it)
}

// outputWriter writes the job's output from a goroutine of its own, so
// that the front-end's event loop never waits for a slow stdout, and
// acknowledges what it wrote to each agent. Lines are written whole and
// never interleaved.
type outputWriter struct {
	label          bool
	stdout, stderr *bufio.Writer
	files          map[[2]int]*os.File // rank, stream → file, with --output-dir

	progressShown bool // a progress line is on the terminal (owned by run)

	mu     sync.Mutex
	q      []outItem
	closed bool
	wake   chan struct{}
	done   chan struct{}
}

func newOutputWriter(stdout, stderr io.Writer, label bool) *outputWriter {
	return &outputWriter{
		label:  label,
		stdout: bufio.NewWriterSize(stdout, 64<<10),
		stderr: bufio.NewWriterSize(stderr, 16<<10),
		files:  map[[2]int]*os.File{},
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
}

// openFiles creates dir/rank.R.out and dir/rank.R.err for every rank.
func (w *outputWriter) openFiles(dir string, n int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--output-dir: %w", err)
	}
	for r := range n {
		for stream, ext := range map[int]string{proto.StreamStdout: "out", proto.StreamStderr: "err"} {
			f, err := os.Create(filepath.Join(dir, fmt.Sprintf("rank.%d.%s", r, ext)))
			if err != nil {
				return fmt.Errorf("--output-dir: %w", err)
			}
			w.files[[2]int{r, stream}] = f
		}
	}
	return nil
}

// push queues an item. It never blocks; the agents' windows bound the
// queue.
func (w *outputWriter) push(it outItem) {
	w.mu.Lock()
	w.q = append(w.q, it)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// message queues one of ftlaunch's own lines for stderr.
func (w *outputWriter) message(line string) {
	w.push(outItem{stream: proto.StreamStderr, data: []byte(line)})
}

// close writes what is queued, closes the output files and stops run.
func (w *outputWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	<-w.done
}

// run writes queued items until close. It flushes whenever the queue runs
// dry and then acknowledges the written bytes to their agents.
func (w *outputWriter) run() {
	defer close(w.done)
	acks := map[*agentHandle]uint64{}
	for {
		w.mu.Lock()
		q, closed := w.q, w.closed
		w.q = nil
		w.mu.Unlock()
		for _, it := range q {
			w.write(it)
			if it.agent != nil {
				acks[it.agent] = max(acks[it.agent], it.seq)
			}
		}
		w.stdout.Flush()
		w.stderr.Flush()
		for a, seq := range acks {
			_ = a.send(proto.MOutputAck, proto.EncodeInt(int64(seq)))
			delete(acks, a)
		}
		if closed && len(q) == 0 {
			for _, f := range w.files {
				f.Close()
			}
			return
		}
		if len(q) == 0 {
			<-w.wake
		}
	}
}

func (w *outputWriter) write(it outItem) {
	if it.progress {
		// "\r\x1b[K": back to the start of the line and erase it.
		if w.progressShown || len(it.data) > 0 {
			w.stderr.WriteString("\r\x1b[K")
		}
		w.stderr.Write(it.data)
		w.stderr.Flush()
		w.progressShown = len(it.data) > 0
		return
	}
	if w.progressShown {
		w.stderr.WriteString("\r\x1b[K")
		w.stderr.Flush()
		w.progressShown = false
	}
	if it.agent == nil {
		w.stdout.Flush()
		w.stderr.Write(it.data)
		w.stderr.Flush()
		return
	}
	if f := w.files[[2]int{it.rank, it.stream}]; f != nil {
		if _, err := f.Write(it.data); err != nil {
			fmt.Fprintf(w.stderr, "ftlaunch: write output of rank %d: %v\n", it.rank, err)
		}
		return
	}
	out := w.stdout
	if it.stream == proto.StreamStderr {
		out = w.stderr
	}
	data := it.data
	if !w.label {
		out.Write(data)
		if data[len(data)-1] != '\n' {
			out.WriteByte('\n')
		}
		return
	}
	label := "[" + strconv.Itoa(it.rank) + "] "
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i+1], data[i+1:]
		} else {
			data = nil
		}
		out.WriteString(label)
		out.Write(line)
		if line[len(line)-1] != '\n' {
			out.WriteByte('\n')
		}
	}
}
