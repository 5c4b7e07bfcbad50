package cudakernels

import (
	"fmt"

	"github.com/dcdit/dcdit/gpu/cuda"
)

// Scaffold is the third set of kernels: the convolutions of the DC
// scaffold's conv blocks (conv.go), the row gathers and scatters that
// select and plug back kept tokens (gather.go), de-chunking (dechunk.go),
// the backward passes of GELU, SiLU and the row softmax, and the sigmoid
// and subtraction of the DC router (actgrad.go), and the column copies of
// SliceCols (cols.go).
//
// They are a module of their own, loaded by LoadScaffold beside the Set it
// extends, so that the Set's module (and its cache entry) stays as it was
// tested. The module is compiled from the Set's base source and the norm
// source too, for their shared helpers (block_reduce, clamp_exp2, the GELU
// constants, col_sum): the formulas are then literally the ones the
// forward kernels use. Their kernels are compiled a second time into this
// module, a few milliseconds of NVRTC once per cache.
type Scaffold struct {
	set *Set
	mod *cuda.Module

	im2col, flipW, biasFill, colSums         cuda.Function
	gatherK                                  cuda.Function
	dcFwd, dcBwdU, dcBwdK, dcBwdDp           cuda.Function
	geluBwd, geluBwdOut, siluBwd, siluBwdOut cuda.Function
	softmaxBwd, sigmoid, sigmoidBwd, sub     cuda.Function
	colsCopy                                 cuda.Function
}

// LoadScaffold compiles (or loads from the cache) the scaffold kernels for
// s's device.
func LoadScaffold(s *Set) (*Scaffold, error) {
	if s == nil {
		return nil, fmt.Errorf("cudakernels: LoadScaffold: nil kernel set")
	}
	mod, err := s.rt.Compile("dcdit_scaffold.cu", source+normSource+convSource+gatherSource+deChunkSource+actGradSource+colsSource, fmadOff)
	if err != nil {
		return nil, err
	}
	sc := &Scaffold{set: s, mod: mod}
	for _, f := range []struct {
		dst  *cuda.Function
		name string
	}{
		{&sc.im2col, "conv_im2col3x3"}, {&sc.flipW, "conv_flip_weights"},
		{&sc.biasFill, "rows_fill_bias"}, {&sc.colSums, "col_sums"},
		{&sc.gatherK, "rows_gather_sum"},
		{&sc.dcFwd, "dechunk_fwd"}, {&sc.dcBwdU, "dechunk_bwd_u"}, {&sc.dcBwdK, "dechunk_bwd_k"}, {&sc.dcBwdDp, "dechunk_bwd_dp"},
		{&sc.geluBwd, "act_gelu_bwd"}, {&sc.geluBwdOut, "act_gelu_bwd_out"},
		{&sc.siluBwd, "act_silu_bwd"}, {&sc.siluBwdOut, "act_silu_bwd_out"},
		{&sc.softmaxBwd, "softmax_rows_bwd"}, {&sc.sigmoid, "act_sigmoid"}, {&sc.sigmoidBwd, "act_sigmoid_bwd"},
		{&sc.sub, "ew_sub"}, {&sc.colsCopy, "cols_copy"},
	} {
		if *f.dst, err = mod.Function(f.name); err != nil {
			return nil, err
		}
	}
	return sc, nil
}

// Module is the scaffold kernels' loaded module.
func (sc *Scaffold) Module() *cuda.Module { return sc.mod }

// Set is the kernel set the scaffold kernels extend (its Packing serves
// DeChunkForward and DeChunkBackward).
func (sc *Scaffold) Set() *Set { return sc.set }
