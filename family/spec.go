package family

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/arch"
	"github.com/dcdit/dcdit/params"
)

// Bounds on the sizes a stored config may state, checked before any of
// them sizes an allocation: a file is untrusted input, and a depth of
// 100000 must be an error, not an out-of-memory crash.
const (
	MaxGridSide = 1024
	MaxWidth    = 1 << 16 // widths
	MaxMLP      = 1 << 18 // MLP hidden widths
	MaxChannels = 4096    // latent channels
	MaxBlocks   = 1024    // depths and block counts
	MaxClasses  = 1 << 24 // class counts
	// MaxActivations bounds one sample's activations at one layer (4 GiB
	// in float32), and tables of that size.
	MaxActivations = 1 << 30
)

// Bound is one stated size and its upper bound, for CheckBounds.
type Bound struct {
	Name   string
	V, Max int
}

// CheckBounds returns an error naming the first size above its bound.
func CheckBounds(bounds ...Bound) error {
	for _, b := range bounds {
		if b.V > b.Max {
			return fmt.Errorf("%s = %d, want at most %d", b.Name, b.V, b.Max)
		}
	}
	return nil
}

// CheckPositive returns an error naming the first size below 1.
func CheckPositive(bounds ...Bound) error {
	for _, b := range bounds {
		if b.V < 1 {
			return fmt.Errorf("%s = %d, want ≥ 1", b.Name, b.V)
		}
	}
	return nil
}

// Real is one stated real value, for CheckFinite.
type Real struct {
	Name string
	V    float64
}

// CheckFinite returns an error naming the first value that is not finite
// or exceeds limit in magnitude.
func CheckFinite(limit float64, values ...Real) error {
	for _, r := range values {
		if math.IsNaN(r.V) || math.IsInf(r.V, 0) || math.Abs(r.V) > limit {
			return fmt.Errorf("%s = %v, want a finite value of at most %g", r.Name, r.V, limit)
		}
	}
	return nil
}

// DecodeStrict decodes one JSON value into v, rejecting unknown fields
// and trailing data.
func DecodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// PrefixedShapes lists an architecture's expected tensors under prefix
// (arch.DCBackbonePrefix for a backbone that keeps its own names inside a
// DC model), leaving out the names in skip (tables recomputed on load).
func PrefixedShapes(exp arch.Expected, prefix string, skip ...string) map[string][]int {
	s := make(map[string][]int, len(exp))
outer:
	for i, name := range exp.Names() {
		for _, k := range skip {
			if name == k {
				continue outer
			}
		}
		shape := make([]int, len(exp.Shape(i)))
		for j, d := range exp.Shape(i) {
			shape[j] = int(d)
		}
		s[prefix+name] = shape
	}
	return s
}

// CopyTensors is what Spec.Build takes to rebuild, as a copy, a backbone
// whose live parameters params holds: for every stored name shapes lists
// (Spec.Shapes, under arch.DCBackbonePrefix), a copy of the values of the
// parameter named prefix + the name without arch.DCBackbonePrefix.
func CopyTensors(shapes map[string][]int, params *params.Set, prefix string) (map[string]loaders.Dense, error) {
	ts := make(map[string]loaders.Dense, len(shapes))
	for name, shape := range shapes {
		own := prefix + strings.TrimPrefix(name, arch.DCBackbonePrefix)
		p, ok := params.Lookup(own)
		if !ok {
			return nil, fmt.Errorf("the model has no tensor %q", own)
		}
		ts[name] = loaders.Dense{Shape: shape, Data: slices.Clone(p.Values())}
	}
	return ts, nil
}

// DecodeInto decodes a backbone description strictly into a new S and
// refuses one whose config is missing (hasConfig false): the body of a
// family's DecodeSpec.
func DecodeInto[S Spec](data []byte, hasConfig func(S) bool) (Spec, error) {
	var s S
	if err := DecodeStrict(data, &s); err != nil {
		return nil, err
	}
	if !hasConfig(s) {
		return nil, fmt.Errorf("kind %s has no config", s.Kind())
	}
	return s, nil
}
