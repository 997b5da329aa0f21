package plan_test

import (
	"strings"
	"testing"

	"github.com/ftlaunch/ftlaunch/topology/plan"
)

func TestParseKindRoundTrip(t *testing.T) {
	for _, s := range []string{"auto", "greedy", "kary:1", "kary:2", "kary:16", "2level", "binomial", "flat"} {
		k, err := plan.ParseKind(s)
		if err != nil {
			t.Fatalf("ParseKind(%q): %v", s, err)
		}
		if got := k.String(); got != s {
			t.Errorf("ParseKind(%q).String() = %q", s, got)
		}
	}
	k, _ := plan.ParseKind("kary:16")
	if k.Shape != plan.KAry || k.K != 16 {
		t.Errorf("kary:16 parsed as %+v", k)
	}
	if (plan.Kind{}).String() != "auto" {
		t.Errorf("zero Kind is %q, want auto", plan.Kind{})
	}
}

func TestParseKindErrors(t *testing.T) {
	cases := map[string]string{
		"kary:0":                     "must be in 1..",
		"kary:-3":                    "must be in 1..",
		"kary:x":                     "not an integer",
		"kary:":                      "not an integer",
		"kary:16 ":                   "not an integer",
		"kary:999999999999999999999": "not an integer",
		"kary":                       "missing branching factor",
		"foo":                        "unknown tree kind",
		"":                           "unknown tree kind",
		"Greedy":                     "unknown tree kind",
		"2-level":                    "unknown tree kind",
	}
	for in, want := range cases {
		_, err := plan.ParseKind(in)
		if err == nil {
			t.Errorf("ParseKind(%q) succeeded, want error", in)
			continue
		}
		if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), in) {
			t.Errorf("ParseKind(%q) error %q: want it to name the input and say %q", in, err, want)
		}
	}
}
