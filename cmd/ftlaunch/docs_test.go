package main

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// docCommand matches a command line of the user's documentation: an
// indented or fenced line that runs ftlaunch, with or without a prompt or
// the repository's bin/.
var docCommand = regexp.MustCompile(`^\s*(?:\$ )?(?:\./)?(?:bin/)?ftlaunch ([a-z]+)(?: (.*))?$`)

// TestDocumentedCommandsParse: every `ftlaunch run`, `plan`, `inspect` and
// `chaos` command line shown in README.md and docs/ parses with the
// command's own flag parser (a flag renamed or removed fails here, not in
// a user's shell), and every other command line names a command that
// exists. Synopses (with [OPTIONAL] parts, PLACEHOLDERS or ...) are
// skipped.
func TestDocumentedCommandsParse(t *testing.T) {
	files, _ := filepath.Glob("../../docs/*.md")
	files = append(files, "../../README.md")
	known := map[string]bool{"run": true, "plan": true, "inspect": true, "status": true, "attach": true, "jobs": true,
		"cancel": true, "kill": true, "chaos": true, "agent": true, "ringapp": true, "version": true, "help": true}
	checked := 0
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		fenced := false
		for line := 1; sc.Scan(); line++ {
			text := sc.Text()
			if strings.HasPrefix(strings.TrimSpace(text), "```") {
				fenced = !fenced
				continue
			}
			if !fenced && !strings.HasPrefix(text, "    ") && !strings.HasPrefix(text, "\t") {
				continue
			}
			start := line
			for strings.HasSuffix(text, "\\") && sc.Scan() { // a continued line
				text = strings.TrimSuffix(text, "\\") + " " + strings.TrimSpace(sc.Text())
				line++
			}
			m := docCommand.FindStringSubmatch(text)
			if m == nil {
				continue
			}
			where := filepath.Base(file) + ":" + strconv.Itoa(start)
			if !known[m[1]] {
				t.Errorf("%s: unknown command %q in %q", where, m[1], strings.TrimSpace(text))
				continue
			}
			args, ok := shellWords(m[2])
			if !ok || synopsis(args) {
				continue
			}
			var perr error
			switch m[1] {
			case "run":
				_, perr = parseRunFlags(args, func(string) string { return "" })
			case "plan":
				_, perr = parsePlanFlags(args)
			case "inspect":
				_, perr = parseInspectFlags(args)
			case "chaos":
				_, perr = parseChaosFlags(args)
			default:
				continue
			}
			checked++
			if perr != nil {
				t.Errorf("%s: %q does not parse: %v", where, strings.TrimSpace(text), perr)
			}
		}
		f.Close()
	}
	t.Logf("%d documented command lines parsed", checked)
	if checked < 20 {
		t.Errorf("only %d documented command lines checked: the pattern no longer finds them", checked)
	}
}

// placeholder matches a word of a synopsis that stands for a value (N,
// FILE, HOST_LIST).
var placeholder = regexp.MustCompile(`^[A-Z][A-Z_-]*$`)

// synopsis reports whether a documented command line is a synopsis or
// an elided example rather than a command to run.
func synopsis(args []string) bool {
	for _, a := range args {
		if strings.ContainsAny(a, "[]<>|") || strings.Contains(a, "...") || strings.Contains(a, "…") {
			return true
		}
		if placeholder.MatchString(a) {
			return true // a PLACEHOLDER
		}
	}
	return false
}

// shellWords splits a command line as a POSIX shell would for the simple
// lines of the documentation: quotes, a trailing '&', and a comment that
// starts a word. ok is false for what it cannot split (a pipe, a
// substitution, an unterminated quote).
func shellWords(s string) (words []string, ok bool) {
	var cur strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ' || c == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		case c == '#' && !in:
			return words, true
		case c == '$' && i+1 < len(s) && s[i+1] == '(' || c == '`' || c == '|' || c == ';' || c == '<' || c == '>':
			return nil, false
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if quote != 0 {
		return nil, false
	}
	if in {
		words = append(words, cur.String())
	}
	if n := len(words); n > 0 && words[n-1] == "&" {
		words = words[:n-1]
	}
	return words, true
}
