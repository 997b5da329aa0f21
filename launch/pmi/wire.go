package pmi

import (
	"errors"
	"fmt"
	"strconv"
)

// field is one key=value token of a request line.
type field struct {
	key, value string
}

// request is one parsed request line: its fields in order.
type request struct {
	fields []field
}

// get returns the value of key and whether it was present.
func (r *request) get(key string) (string, bool) {
	for _, f := range r.fields {
		if f.key == key {
			return f.value, true
		}
	}
	return "", false
}

// cmd returns the command name: the value of "cmd", or "mcmd=<v>" for the
// multi-line spawn command, or "".
func (r *request) cmd() string {
	if v, ok := r.get("cmd"); ok {
		return v
	}
	if v, ok := r.get("mcmd"); ok {
		return "mcmd=" + v
	}
	return ""
}

// parseLine parses one request line (without or with its trailing "\n" and
// an optional "\r" before it): space-separated key=value tokens. A value
// runs from the first '=' of its token to the next space and may contain
// '='. Empty lines, tokens without '=' or with an empty key, repeated keys
// and control characters are errors. parseLine never panics.
func parseLine(line []byte) (request, error) {
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	var req request
	for i := 0; i < len(line); {
		c := line[i]
		if c == ' ' {
			i++
			continue
		}
		j := i
		eq := -1
		for j < len(line) && line[j] != ' ' {
			b := line[j]
			if b < ' ' || b == 0x7f {
				return request{}, fmt.Errorf("control byte %#02x at offset %d", b, j)
			}
			if b == '=' && eq < 0 {
				eq = j
			}
			j++
		}
		tok := line[i:j]
		if eq < 0 {
			return request{}, fmt.Errorf("token %.40q has no '='", tok)
		}
		if eq == i {
			return request{}, fmt.Errorf("token %.40q has an empty key", tok)
		}
		f := field{key: string(line[i:eq]), value: string(line[eq+1 : j])}
		if _, dup := req.get(f.key); dup {
			return request{}, fmt.Errorf("key %.40q given twice", f.key)
		}
		req.fields = append(req.fields, f)
		i = j
	}
	if len(req.fields) == 0 {
		return request{}, errors.New("empty request")
	}
	return req, nil
}

// atoi parses a decimal int field that must be present.
func (r *request) atoi(key string) (int, error) {
	v, ok := r.get(key)
	if !ok {
		return 0, fmt.Errorf("missing %s", key)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("bad %s %.20q", key, v)
	}
	return n, nil
}

// word turns free text into a single protocol token: spaces and control
// bytes become '_', and the result is cut to 200 bytes.
func word(s string) string {
	b := []byte(s)
	if len(b) > 200 {
		b = b[:200]
	}
	for i, c := range b {
		if c <= ' ' || c == 0x7f {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "error"
	}
	return string(b)
}

// responseFits reports whether a get_result carrying value fits in MaxLine.
func responseFits(value string) bool {
	return len("cmd=get_result rc=0 msg=success value=\n")+len(value) <= MaxLine
}
