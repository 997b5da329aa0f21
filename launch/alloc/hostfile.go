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
// ignored. A host listed twice, an empty entry and a bad count are errors.
func ParseHostList(list string) ([]Host, error) {
	if strings.TrimSpace(list) == "" {
		return nil, errors.New("-H: empty host list")
	}
	entries := strings.Split(list, ",")
	if len(entries) > MaxHosts {
		return nil, fmt.Errorf("-H: more than %d hosts", MaxHosts)
	}
	hosts := make([]Host, 0, len(entries))
	seen := hostSet{}
	for i, e := range entries {
		h, err := parseHostSpec(strings.TrimSpace(e))
		if err != nil {
			return nil, fmt.Errorf("-H entry %d %q: %w", i+1, e, err)
		}
		if prev, ok := seen.add(h.Name, i+1); !ok {
			return nil, fmt.Errorf("-H: host %q listed twice (entries %d and %d)", h.Name, prev, i+1)
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
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
// blank lines are skipped. A host listed twice is an error.
func ParseHostfile(name string, r io.Reader) ([]Host, error) {
	var hosts []Host
	seen := hostSet{}
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
		if prev, ok := seen.add(h.Name, n); !ok {
			return nil, fmt.Errorf("%s:%d: host %q listed twice (first on line %d)", name, n, h.Name, prev)
		}
		if len(hosts) >= MaxHosts {
			return nil, fmt.Errorf("%s:%d: more than %d hosts", name, n, MaxHosts)
		}
		hosts = append(hosts, h)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%s:%d: line longer than %d bytes", name, n+1, maxLineLen)
		}
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("%s: no hosts", name)
	}
	return hosts, nil
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
	var hosts []Host
	index := map[string]int{}
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
		key := strings.ToLower(line)
		if i, ok := index[key]; ok {
			if hosts[i].Slots >= MaxSlots {
				return nil, fmt.Errorf("%s:%d: host %q has more than %d slots", name, n, line, MaxSlots)
			}
			hosts[i].Slots++
			continue
		}
		if len(hosts) >= MaxHosts {
			return nil, fmt.Errorf("%s:%d: more than %d hosts", name, n, MaxHosts)
		}
		index[key] = len(hosts)
		hosts = append(hosts, Host{Name: line, Slots: 1})
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%s:%d: line longer than %d bytes", name, n+1, maxLineLen)
		}
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("%s: no hosts", name)
	}
	return hosts, nil
}
