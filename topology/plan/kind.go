package plan

import (
	"fmt"
	"strconv"
	"strings"
)

// Shape names a family of launch trees.
type Shape uint8

// The tree shapes. Auto is greedy built from a calibration when one is
// given, else from DefaultSeq and DefaultRem.
const (
	Auto Shape = iota
	Greedy
	KAry
	TwoLevel
	Binomial
	Flat
)

// MaxK bounds the branching factor of a k-ary plan.
const MaxK = 1 << 20

// Kind is a parsed tree kind: a shape and, for KAry only, its branching
// factor K. The zero Kind is Auto. Kinds are plain values, safe to copy.
type Kind struct {
	Shape Shape
	K     int // branching factor, used by KAry only
}

// String returns the kind in the syntax ParseKind accepts, e.g. "kary:16".
func (k Kind) String() string {
	switch k.Shape {
	case Auto:
		return "auto"
	case Greedy:
		return "greedy"
	case KAry:
		return "kary:" + strconv.Itoa(k.K)
	case TwoLevel:
		return "2level"
	case Binomial:
		return "binomial"
	case Flat:
		return "flat"
	}
	return fmt.Sprintf("shape(%d)", k.Shape)
}

// KindNames lists the accepted kind syntaxes, for usage messages.
const KindNames = "greedy, kary:K, 2level, binomial, flat, auto"

// ParseKind parses a tree kind: "greedy", "kary:K" (K an integer in
// 1..MaxK), "2level", "binomial", "flat" or "auto". Names are
// case-sensitive and must not carry spaces.
func ParseKind(s string) (Kind, error) {
	switch s {
	case "auto":
		return Kind{Shape: Auto}, nil
	case "greedy":
		return Kind{Shape: Greedy}, nil
	case "2level":
		return Kind{Shape: TwoLevel}, nil
	case "binomial":
		return Kind{Shape: Binomial}, nil
	case "flat":
		return Kind{Shape: Flat}, nil
	}
	if rest, ok := strings.CutPrefix(s, "kary:"); ok {
		k, err := strconv.Atoi(rest)
		if err != nil {
			return Kind{}, fmt.Errorf("tree kind %q: branching factor %q is not an integer", s, rest)
		}
		if k < 1 || k > MaxK {
			return Kind{}, fmt.Errorf("tree kind %q: branching factor must be in 1..%d", s, MaxK)
		}
		return Kind{Shape: KAry, K: k}, nil
	}
	if s == "kary" {
		return Kind{}, fmt.Errorf("tree kind %q: missing branching factor, write kary:K (e.g. kary:16)", s)
	}
	return Kind{}, fmt.Errorf("unknown tree kind %q (want one of %s)", s, KindNames)
}

// validate reports whether k is a kind Build understands.
func (k Kind) validate() error {
	switch k.Shape {
	case Auto, Greedy, TwoLevel, Binomial, Flat:
		return nil
	case KAry:
		if k.K < 1 || k.K > MaxK {
			return fmt.Errorf("tree kind kary:%d: branching factor must be in 1..%d", k.K, MaxK)
		}
		return nil
	}
	return fmt.Errorf("unknown tree shape %d", k.Shape)
}
