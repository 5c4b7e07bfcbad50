package sample

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/dcdit/dcdit/loaders/atomicfile"
)

// Poly is a polynomial by its coefficients, the highest degree first
// (NumPy's polyval order, in which TeaCache publishes its rescalings).
type Poly []float64

// Eval is p(x) (Horner's rule).
func (p Poly) Eval(x float64) float64 {
	var y float64
	for _, c := range p {
		y = y*x + c
	}
	return y
}

// check rejects an empty polynomial or a non-finite coefficient.
func (p Poly) check() error {
	if len(p) == 0 {
		return errors.New("teacache: no rescaling coefficients")
	}
	for i, c := range p {
		if math.IsNaN(c) || math.IsInf(c, 0) {
			return fmt.Errorf("teacache: rescaling coefficient %d is %v", i, c)
		}
	}
	return nil
}

// FitPoly fits the polynomial of the given degree to the pairs (x[i],
// y[i]) by least squares (Householder QR of the Vandermonde matrix, in
// float64): TeaCache's coefficient estimator, which fits the output's
// relative change against the modulated input's.
func FitPoly(x, y []float64, degree int) (Poly, error) {
	n, k := len(x), degree+1
	switch {
	case len(y) != n:
		return nil, fmt.Errorf("teacache: fit: %d inputs and %d outputs", n, len(y))
	case degree < 0 || n < k:
		return nil, fmt.Errorf("teacache: fit: %d pairs cannot fix a polynomial of degree %d (want at least %d)", n, degree, k)
	}
	for i := range x {
		if math.IsNaN(x[i]) || math.IsInf(x[i], 0) || math.IsNaN(y[i]) || math.IsInf(y[i], 0) {
			return nil, fmt.Errorf("teacache: fit: pair %d is (%v, %v), not finite", i, x[i], y[i])
		}
	}
	// A[i][j] = x_i^(degree−j): the columns in Poly's order.
	a := make([][]float64, n)
	b := append([]float64(nil), y...)
	for i := range a {
		a[i] = make([]float64, k)
		v := 1.0
		for j := k - 1; j >= 0; j-- {
			a[i][j] = v
			v *= x[i]
		}
	}
	for j := range k {
		var norm float64
		for i := j; i < n; i++ {
			norm += a[i][j] * a[i][j]
		}
		norm = math.Sqrt(norm)
		if norm == 0 {
			return nil, fmt.Errorf("teacache: fit: the inputs take fewer than %d distinct values", k)
		}
		if a[j][j] > 0 {
			norm = -norm
		}
		// v = a[j:, j] − norm·e_1; H = I − 2vvᵀ/vᵀv.
		v := make([]float64, n-j)
		for i := j; i < n; i++ {
			v[i-j] = a[i][j]
		}
		v[0] -= norm
		var vv float64
		for _, e := range v {
			vv += e * e
		}
		reflect := func(col func(i int) *float64) {
			var dot float64
			for i := range v {
				dot += v[i] * *col(j + i)
			}
			f := 2 * dot / vv
			for i := range v {
				*col(j + i) -= f * v[i]
			}
		}
		for c := j; c < k; c++ {
			reflect(func(i int) *float64 { return &a[i][c] })
		}
		reflect(func(i int) *float64 { return &b[i] })
	}
	p := make(Poly, k)
	for j := k - 1; j >= 0; j-- {
		s := b[j]
		for c := j + 1; c < k; c++ {
			s -= a[j][c] * p[c]
		}
		if a[j][j] == 0 {
			return nil, fmt.Errorf("teacache: fit: the inputs take fewer than %d distinct values", k)
		}
		p[j] = s / a[j][j]
	}
	if err := p.check(); err != nil {
		return nil, fmt.Errorf("teacache: fit: %w", err)
	}
	return p, nil
}

// TeaCacheFit is a model's TeaCache calibration as its sidecar file
// holds it: the rescaling and how it was fitted.
type TeaCacheFit struct {
	// Coefficients are the rescaling polynomial's, highest degree first.
	Coefficients Poly `json:"coefficients"`
	// Pairs is the number of (input, output) changes fitted.
	Pairs int `json:"pairs"`
	// Samples, Steps, CFG and Rho are the trajectories': how many, their
	// sampling steps, guidance scale and (a DC model) tail-drop fraction.
	Samples int     `json:"samples"`
	Steps   int     `json:"steps"`
	CFG     float64 `json:"cfg"`
	Rho     float64 `json:"rho,omitempty"`
	// Residual is the fit's RMS error on its pairs.
	Residual float64 `json:"residual"`
}

// TeaCacheSidecar is the file a model's calibration is kept in, beside
// the model file: model.safetensors → model.safetensors.teacache.json.
func TeaCacheSidecar(model string) string { return model + ".teacache.json" }

// WriteTeaCacheFit writes fit to the sidecar of the model file, atomically.
func WriteTeaCacheFit(model string, fit *TeaCacheFit) error {
	if err := fit.Coefficients.check(); err != nil {
		return err
	}
	data, err := json.MarshalIndent(fit, "", "  ")
	if err != nil {
		return fmt.Errorf("teacache: %w", err)
	}
	return atomicfile.Write(TeaCacheSidecar(model), func(w io.Writer) error {
		_, err := w.Write(append(data, '\n'))
		return err
	})
}

// ReadTeaCacheFit reads the sidecar of the model file strictly; without
// one it says to run the fit.
func ReadTeaCacheFit(model string) (*TeaCacheFit, error) {
	path := TeaCacheSidecar(model)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("teacache: %s has no calibration (%s is missing) and its family publishes none: run 'dcdit teacache fit %s' first", model, path, model)
	}
	if err != nil {
		return nil, fmt.Errorf("teacache: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	fit := &TeaCacheFit{}
	if err := dec.Decode(fit); err != nil {
		return nil, fmt.Errorf("teacache: %s: %w (a truncated or damaged calibration: run 'dcdit teacache fit %s' again)", path, err, model)
	}
	if dec.More() {
		return nil, fmt.Errorf("teacache: %s: data after the calibration object", path)
	}
	if err := fit.Coefficients.check(); err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return fit, nil
}
