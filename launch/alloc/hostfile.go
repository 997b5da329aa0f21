package alloc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
)

// maxLineLen bounds one line of a hostfile or node file.
const maxLineLen = 64 << 10

// ParseHostList parses the value of -H: comma-separated host names, each
// optionally followed by ":N" slots ("a,b:4"). Spaces around entries are
// ignored. A host listed again adds its slots ("a,b,a" gives a 2 slots and
// b none given). An empty entry and a bad count are errors.
func ParseHostList(list string) ([]Host, error) {
	if strings.TrimSpace(list) == "" {
		return nil, errors.New("-H: empty host list")
	}
	entries := strings.Split(list, ",")
	if len(entries) > MaxHosts {
		return nil, fmt.Errorf("-H: more than %d hosts", MaxHosts)
	}
	var m hostMerger
	for i, e := range entries {
		h, err := parseHostSpec(strings.TrimSpace(e))
		if err != nil {
			return nil, fmt.Errorf("-H entry %d %q: %w", i+1, e, err)
		}
		if err := m.add(h); err != nil {
			return nil, fmt.Errorf("-H entry %d: %w", i+1, err)
		}
	}
	return m.hosts, nil
}

// parseHostSpec parses "name" or "name:N".
func parseHostSpec(s string) (Host, error) {
	name, count, hasCount := strings.Cut(s, ":")
	if err := validHostname(name); err != nil {
		return Host{}, err
	}
	h := Host{Name: name}
	if hasCount {
		n, err := parseCount(count)
		if err != nil {
			return Host{}, err
		}
		h.Slots = n
	}
	return h, nil
}

// ParseHostfile parses a hostfile read from r; name is used in error
// messages ("hosts:3: bad slot count \"x\""). Each line holds one host,
// written "host", "host:N", "host slots=N" or "host:N" (Open MPI's
// "max_slots=M" is accepted and ignored). Everything after '#' is a comment;
// blank lines are skipped. A host on several lines adds their slots (a line
// without a count is one slot then), as in a PBS node file.
func ParseHostfile(name string, r io.Reader) ([]Host, error) {
	var m hostMerger
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLineLen)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		h, err := parseHostfileLine(fields)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		if err := m.add(h); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%s:%d: line longer than %d bytes", name, n+1, maxLineLen)
		}
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(m.hosts) == 0 {
		return nil, fmt.Errorf("%s: no hosts", name)
	}
	return m.hosts, nil
}

// parseHostfileLine parses the fields of one non-empty hostfile line.
func parseHostfileLine(fields []string) (Host, error) {
	h, err := parseHostSpec(fields[0])
	if err != nil {
		return Host{}, err
	}
	for _, f := range fields[1:] {
		key, val, ok := strings.Cut(f, "=")
		if !ok {
			return Host{}, fmt.Errorf("unexpected field %q (want slots=N)", f)
		}
		switch key {
		case "slots":
			if h.Slots != 0 {
				return Host{}, fmt.Errorf("slot count given twice for %q", h.Name)
			}
			n, err := parseCount(val)
			if err != nil {
				return Host{}, err
			}
			h.Slots = n
		case "max_slots":
			if _, err := parseCount(val); err != nil {
				return Host{}, fmt.Errorf("max_slots: %w", err)
			}
		default:
			return Host{}, fmt.Errorf("unknown field %q", key)
		}
	}
	return h, nil
}

// ParsePBSNodefile parses a PBS/Torque node file read from r (name is used
// in error messages): one host name per line and one line per slot, so a host
// repeated k times gets k slots. Hosts keep the order of their first line.
func ParsePBSNodefile(name string, r io.Reader) ([]Host, error) {
	var m hostMerger
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLineLen)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if err := validHostname(line); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		if err := m.add(Host{Name: line, Slots: 1}); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%s:%d: line longer than %d bytes", name, n+1, maxLineLen)
		}
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(m.hosts) == 0 {
		return nil, fmt.Errorf("%s: no hosts", name)
	}
	return m.hosts, nil
}
