package sshspawn

import "strings"

// Command renders argv as one command line for a POSIX remote shell
// (sh, bash, dash, zsh, ksh). The remote login shell runs it with "-c", so
// every argument is quoted to reach the program unchanged: arguments made
// only of characters that no shell treats specially are left bare, all
// others are wrapped in single quotes, with embedded single quotes written
// as '\”. The line starts with "exec" so that the shell replaces itself
// with the program: signals sent to the session and the exit status then
// belong to the program itself, and no shell process lingers.
//
// Command returns "" for an empty argv. It is safe for concurrent use.
func Command(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("exec")
	for _, a := range argv {
		b.WriteByte(' ')
		b.WriteString(Quote(a))
	}
	return b.String()
}

// Quote quotes one word for a POSIX shell; see Command. It is safe for
// concurrent use.
func Quote(s string) string {
	if s == "" {
		return "''"
	}
	if isSafe(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('\'')
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			b.WriteString(`'\''`)
			continue
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('\'')
	return b.String()
}

// isSafe reports whether s needs no quoting: letters, digits and a few
// punctuation marks that no POSIX shell expands anywhere in a word. A
// leading '~' or '=' (zsh) is excluded by not listing them at all.
func isSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '_', c == '-', c == '.', c == '/', c == ',', c == ':', c == '@', c == '+', c == '%':
		default:
			return false
		}
	}
	return true
}
