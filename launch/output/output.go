package output

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

// Item is one piece of output: complete lines of a rank's stream, or
// (with agent nil) one of ftlaunch's own messages for stderr.
type Item struct {
	Agent        Source
	Seq          uint64 // the agent's frame number (launch/proto/outq.go)
	Rank, Stream int
	Data         []byte
	Progress     bool // data is the new progress line ("" clears it)
}

// Source is where output comes from: an agent, which the writer
// tells how far it wrote (its frame number).
type Source interface {
	AckOutput(seq uint64)
}

// outputWriter writes the job's output from a goroutine of its own, so
// that the front-end's event loop never waits for a slow stdout, and
// acknowledges what it wrote to each agent. Lines are written whole and
// never interleaved.
type Writer struct {
	label          bool
	stdout, stderr *bufio.Writer
	files          map[[2]int]*os.File // rank, stream → file, with --output-dir

	progressShown bool // a progress line is on the terminal (owned by run)

	mu     sync.Mutex
	q      []Item
	closed bool
	wake   chan struct{}
	done   chan struct{}
}

func NewWriter(stdout, stderr io.Writer, label bool) *Writer {
	return &Writer{
		label:  label,
		stdout: bufio.NewWriterSize(stdout, 64<<10),
		stderr: bufio.NewWriterSize(stderr, 16<<10),
		files:  map[[2]int]*os.File{},
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
}

// OpenFiles creates dir/rank.R.out and dir/rank.R.err for every rank.
func (w *Writer) OpenFiles(dir string, n int) error {
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

// Push queues an item. It never blocks; the agents' windows bound the
// queue.
func (w *Writer) Push(it Item) {
	w.mu.Lock()
	w.q = append(w.q, it)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Message queues one of ftlaunch's own lines for stderr.
func (w *Writer) Message(line string) {
	w.Push(Item{Stream: proto.StreamStderr, Data: []byte(line)})
}

// Logf queues one of ftlaunch's own lines for stderr, formatted.
func (w *Writer) Logf(format string, args ...any) { w.Message(fmt.Sprintf(format, args...) + "\n") }

// Start starts the writer's goroutine (run); Close stops and joins it.
func (w *Writer) Start() { go w.run() }

// Close writes what is queued, closes the output files and stops run.
func (w *Writer) Close() {
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
func (w *Writer) run() {
	defer close(w.done)
	acks := map[Source]uint64{}
	for {
		w.mu.Lock()
		q, closed := w.q, w.closed
		w.q = nil
		w.mu.Unlock()
		for _, it := range q {
			w.write(it)
			if it.Agent != nil {
				acks[it.Agent] = max(acks[it.Agent], it.Seq)
			}
		}
		w.stdout.Flush()
		w.stderr.Flush()
		for a, seq := range acks {
			a.AckOutput(seq)
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

func (w *Writer) write(it Item) {
	if it.Progress {
		// "\r\x1b[K": back to the start of the line and erase it.
		if w.progressShown || len(it.Data) > 0 {
			w.stderr.WriteString("\r\x1b[K")
		}
		w.stderr.Write(it.Data)
		w.stderr.Flush()
		w.progressShown = len(it.Data) > 0
		return
	}
	if w.progressShown {
		w.stderr.WriteString("\r\x1b[K")
		w.stderr.Flush()
		w.progressShown = false
	}
	if it.Agent == nil {
		w.stdout.Flush()
		w.stderr.Write(it.Data)
		w.stderr.Flush()
		return
	}
	if f := w.files[[2]int{it.Rank, it.Stream}]; f != nil {
		if _, err := f.Write(it.Data); err != nil {
			fmt.Fprintf(w.stderr, "ftlaunch: write output of rank %d: %v\n", it.Rank, err)
		}
		return
	}
	out := w.stdout
	if it.Stream == proto.StreamStderr {
		out = w.stderr
	}
	data := it.Data
	if !w.label {
		out.Write(data)
		if data[len(data)-1] != '\n' {
			out.WriteByte('\n')
		}
		return
	}
	label := "[" + strconv.Itoa(it.Rank) + "] "
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

// Where a successor root writes the job's output, in the job's state
// directory (it has no terminal): the ranks' files in JobOutput
// (rank.R.out, rank.R.err) and ftlaunch's messages in JobOutput/JobLog,
// which ftlaunch attach follows (launch/jobctl).
const (
	JobOutput = "output"
	JobLog    = "ftlaunch.log"
)

// OpenJob opens a successor root's output in jobDir for n ranks: a
// writer of labelled lines to the ranks' files, whose messages (and
// stdout and stderr) go to the log, appended to (an earlier successor's
// stays). The caller closes the log after the writer.
func OpenJob(jobDir string, n int) (*Writer, *os.File, error) {
	dir := filepath.Join(jobDir, JobOutput)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("the job's output: %w", err)
	}
	logf, err := os.OpenFile(filepath.Join(dir, JobLog), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("the job's output: %w", err)
	}
	w := NewWriter(logf, logf, true)
	if err := w.OpenFiles(dir, n); err != nil {
		logf.Close()
		return nil, nil, err
	}
	return w, logf, nil
}
