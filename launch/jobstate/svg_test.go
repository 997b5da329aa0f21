package jobstate

import (
	"bytes"
	"encoding/xml"
	"testing"
)

// The SVG's escaping is encoding/xml's, without that package in the binary.
func TestEscMatchesXML(t *testing.T) {
	for _, s := range []string{"", "a<b>&\"'\t\n\r", "\x00\x01\x1f ok", "\xff\xfe bad", "é\uFFFD\U0001F600", "\uFFFE\uD7FF\uE000"} {
		var b bytes.Buffer
		if err := xml.EscapeText(&b, []byte(s)); err != nil {
			t.Fatal(err)
		}
		if got := esc(s); got != b.String() {
			t.Errorf("%q: %q, want %q", s, got, b.String())
		}
	}
}
