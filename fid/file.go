package fid

import (
	"fmt"

	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/npy"
)

// ReadStats reads the statistics file at path: an .npz holding mu, float64
// [D], and sigma, float64 [D, D], as pytorch-fid's --save-stats writes it
// and as the ADM reference batches hold them (their other arrays, mu_s,
// sigma_s and arr_0, are not read). N is 0: the files do not record it.
func ReadStats(path string) (Stats, error) {
	z, err := npy.OpenNPZ(path)
	if err != nil {
		return Stats{}, fmt.Errorf("fid: %w", err)
	}
	defer z.Close()
	mu, err := z.Member("mu")
	if err != nil {
		return Stats{}, fmt.Errorf("fid: %w", err)
	}
	h := mu.Header()
	if h.DType != dtype.F64 || len(h.Shape) != 1 || h.Shape[0] < 1 {
		return Stats{}, fmt.Errorf("fid: %s: \"mu\" is %s, want <f8 (D,)", path, h)
	}
	d := h.Shape[0]
	sigma, err := z.Member("sigma")
	if err != nil {
		return Stats{}, fmt.Errorf("fid: %w", err)
	}
	if h := sigma.Header(); h.DType != dtype.F64 || len(h.Shape) != 2 || h.Shape[0] != d || h.Shape[1] != d {
		return Stats{}, fmt.Errorf("fid: %s: \"sigma\" is %s, want <f8 (%d, %d) for a mu of %d values", path, h, d, d, d)
	}
	s := Stats{D: d}
	for _, m := range []struct {
		member *npy.Member
		dst    *[]float64
	}{{mu, &s.Mu}, {sigma, &s.Sigma}} {
		a, err := m.member.Read()
		if err == nil {
			*m.dst, err = a.Float64s()
		}
		if err != nil {
			return Stats{}, fmt.Errorf("fid: %w", err)
		}
	}
	if err := s.check(path); err != nil {
		return Stats{}, err
	}
	return s, nil
}

// WriteStats writes s to path atomically as pytorch-fid's --save-stats
// does (np.savez_compressed(path, mu=mu, sigma=sigma)).
func WriteStats(path string, s Stats) error {
	if err := s.check(path); err != nil {
		return err
	}
	return npy.WriteNPZ(path, true, func(w *npy.Writer) error {
		if err := w.Add("mu", npy.FromFloat64([]int{s.D}, s.Mu)); err != nil {
			return err
		}
		return w.Add("sigma", npy.FromFloat64([]int{s.D, s.D}, s.Sigma))
	})
}
