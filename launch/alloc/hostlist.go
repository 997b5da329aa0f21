package alloc

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// maxNumberDigits bounds the digits of one number in a hostlist range so
// that it always fits an int64.
const maxNumberDigits = 18

// ExpandHostlist expands a Slurm hostlist expression such as
// "node[001-004,010],gpu[1-2],login" into host names, in order. Ranges keep
// the zero padding of their lower bound ("[08-10]" gives 08, 09, 10); a name
// may hold several bracket groups ("r[1-2]n[1-2]" gives r1n1, r1n2, r2n1,
// r2n2). It returns an error for unbalanced or nested brackets, empty
// entries, descending ranges, invalid host names, and expansions of more
// than MaxHosts names. Duplicates are returned as they are.
func ExpandHostlist(expr string) ([]string, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return nil, errors.New("empty hostlist")
	}
	items, err := splitTopLevel(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, item := range items {
		parts, count, err := parseHostlistItem(item)
		if err != nil {
			return nil, fmt.Errorf("hostlist entry %q: %w", item, err)
		}
		if len(names)+count > MaxHosts {
			return nil, fmt.Errorf("hostlist expands to more than %d hosts", MaxHosts)
		}
		before := len(names)
		names = expandParts(names, "", parts)
		for _, n := range names[before:] {
			if err := validHostname(n); err != nil {
				return nil, fmt.Errorf("hostlist entry %q: %w", item, err)
			}
		}
	}
	return names, nil
}

// splitTopLevel splits expr at commas outside brackets, checking that
// brackets are balanced and not nested.
func splitTopLevel(expr string) ([]string, error) {
	var items []string
	depth, start := 0, 0
	for i := 0; i < len(expr); i++ {
		switch expr[i] {
		case '[':
			if depth > 0 {
				return nil, fmt.Errorf("nested '[' at offset %d in hostlist", i)
			}
			depth++
		case ']':
			if depth == 0 {
				return nil, fmt.Errorf("unbalanced ']' at offset %d in hostlist", i)
			}
			depth--
		case ',':
			if depth == 0 {
				items = append(items, expr[start:i])
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, errors.New("unclosed '[' in hostlist")
	}
	items = append(items, expr[start:])
	for i, it := range items {
		if it == "" {
			return nil, fmt.Errorf("empty entry %d in hostlist", i+1)
		}
	}
	return items, nil
}

// hostPart is a literal piece of a name or, when choices is non-nil, one
// bracket group whose alternatives are already formatted.
type hostPart struct {
	literal string
	choices []string
}

// parseHostlistItem splits one entry into literal parts and bracket groups
// and returns how many names it expands to (at most MaxHosts).
func parseHostlistItem(item string) ([]hostPart, int, error) {
	var parts []hostPart
	count := 1
	for item != "" {
		open := strings.IndexByte(item, '[')
		if open < 0 {
			parts = append(parts, hostPart{literal: item})
			break
		}
		if open > 0 {
			parts = append(parts, hostPart{literal: item[:open]})
		}
		end := strings.IndexByte(item[open:], ']')
		if end < 0 { // splitTopLevel guarantees balance; keep the check local anyway
			return nil, 0, errors.New("unclosed '['")
		}
		choices, err := expandRanges(item[open+1:open+end], MaxHosts/count)
		if err != nil {
			return nil, 0, err
		}
		count *= len(choices)
		parts = append(parts, hostPart{choices: choices})
		item = item[open+end+1:]
	}
	return parts, count, nil
}

// expandRanges expands the inside of one bracket group ("001-004,010") into
// at most limit formatted numbers.
func expandRanges(spec string, limit int) ([]string, error) {
	if spec == "" {
		return nil, errors.New("empty brackets")
	}
	var out []string
	for _, r := range strings.Split(spec, ",") {
		loStr, hiStr, isRange := strings.Cut(r, "-")
		lo, err := parseRangeNumber(loStr)
		if err != nil {
			return nil, err
		}
		hi := lo
		if isRange {
			if hi, err = parseRangeNumber(hiStr); err != nil {
				return nil, err
			}
			if hi < lo {
				return nil, fmt.Errorf("descending range %q", r)
			}
		}
		if hi-lo >= int64(limit-len(out)) {
			return nil, fmt.Errorf("range %q expands to more than %d hosts", r, MaxHosts)
		}
		width := len(loStr)
		for v := lo; v <= hi; v++ {
			s := strconv.FormatInt(v, 10)
			if len(s) < width {
				s = strings.Repeat("0", width-len(s)) + s
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// parseRangeNumber parses one unsigned decimal bound of a range.
func parseRangeNumber(s string) (int64, error) {
	if s == "" {
		return 0, errors.New("empty number in range")
	}
	if len(s) > maxNumberDigits {
		return 0, fmt.Errorf("number %.20q too long", s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("bad number %q in range", s)
		}
	}
	return strconv.ParseInt(s, 10, 64)
}

// expandParts appends to names every name formed by prefix followed by the
// cartesian product of parts (the first group varies slowest).
func expandParts(names []string, prefix string, parts []hostPart) []string {
	if len(parts) == 0 {
		return append(names, prefix)
	}
	p := parts[0]
	if p.choices == nil {
		return expandParts(names, prefix+p.literal, parts[1:])
	}
	for _, c := range p.choices {
		names = expandParts(names, prefix+c, parts[1:])
	}
	return names
}

// ParseTasksPerNode parses Slurm's SLURM_TASKS_PER_NODE (or
// SLURM_JOB_CPUS_PER_NODE) syntax, "2(x3),1", into one count per node:
// [2 2 2 1]. Counts must be in [1, MaxSlots] and the list at most MaxHosts
// long.
func ParseTasksPerNode(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("empty tasks-per-node list")
	}
	var out []int
	for _, item := range strings.Split(s, ",") {
		countStr, rep := item, 1
		if open := strings.IndexByte(item, '('); open >= 0 {
			countStr = item[:open]
			inner, ok := strings.CutSuffix(item[open+1:], ")")
			if !ok || !strings.HasPrefix(inner, "x") {
				return nil, fmt.Errorf("tasks per node %q: want N or N(xM)", item)
			}
			r, err := parseCount(inner[1:])
			if err != nil {
				return nil, fmt.Errorf("tasks per node %q: bad repeat: %w", item, err)
			}
			rep = r
		}
		n, err := parseCount(countStr)
		if err != nil {
			return nil, fmt.Errorf("tasks per node %q: %w", item, err)
		}
		if len(out)+rep > MaxHosts {
			return nil, fmt.Errorf("tasks per node list longer than %d nodes", MaxHosts)
		}
		for range rep {
			out = append(out, n)
		}
	}
	return out, nil
}
