package sshspawn

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		"":            "''",
		"plain":       "plain",
		"a/b.c-d_e":   "a/b.c-d_e",
		"user@host:1": "user@host:1",
		"two words":   "'two words'",
		"it's":        `'it'\''s'`,
		"$HOME":       "'$HOME'",
		"~":           "'~'",
		"a;b":         "'a;b'",
		"*":           "'*'",
		"x=1":         "'x=1'",
	} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
	if got := Command(nil); got != "" {
		t.Errorf("Command(nil) = %q", got)
	}
	if got := Command([]string{"ftlaunch", "agent", "--id", "3"}); got != "exec ftlaunch agent --id 3" {
		t.Errorf("Command = %q", got)
	}
}

// TestCommandThroughShells runs quoted argv through real shells and checks
// that every argument arrives unchanged.
func TestCommandThroughShells(t *testing.T) {
	args := []string{"", " ", "a b", "it's", `"dq"`, `back\slash`, "$HOME", "$(id)", "`id`", "*", "~root",
		"a\nb", "tab\there", "!bang", "semi;colon", "amp&", "pipe|", "<in>", "{a,b}", "#hash", "%pct", "ünï©ødé",
		"'", "''", `\'`, "-n", "-e"}
	for _, sh := range []string{"/bin/sh", "/bin/bash", "/bin/dash"} {
		if _, err := exec.LookPath(sh); err != nil {
			continue
		}
		argv := append([]string{"printf", `%s\0`}, args...)
		out, err := exec.Command(sh, "-c", Command(argv)).Output()
		if err != nil {
			t.Fatalf("%s: %v", sh, err)
		}
		got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
		if len(got) != len(args) {
			t.Fatalf("%s: got %d args, want %d: %q", sh, len(got), len(args), out)
		}
		for i := range args {
			if got[i] != args[i] {
				t.Errorf("%s: arg %d = %q, want %q", sh, i, got[i], args[i])
			}
		}
		if bytes.Contains(out, []byte("uid=")) {
			t.Errorf("%s: command substitution ran", sh)
		}
	}
}
