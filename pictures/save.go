package pictures

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/dcdit/dcdit/images"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/npy"
)

// SamplesKey is the member of an .npz sample batch that holds the pictures,
// uint8 [N, H, W, 3]: the name DiT's sample_ddp.py writes and the ADM
// evaluator reads.
const SamplesKey = "arr_0"

// Save says where pictures go; empty fields are skipped.
type Save struct {
	// Dir receives one PNG per picture, named by index as DiT's
	// sample_ddp.py names them (000000.png, …); it is created if missing.
	Dir string
	// Grid receives one PNG tiling the first GridMax pictures (all when
	// GridMax is 0), Cols to a row (default 8), 2 pixels apart.
	Grid    string
	Cols    int
	GridMax int
	// NPZ receives the pictures as an ADM-readable sample batch (stored,
	// uint8 arr_0 [N, H, W, 3]).
	NPZ string
}

// Stream saves the n pictures of w×h pixels that produce hands to emit, in
// order, holding only the grid's pictures in memory. Every file is written
// atomically (a PNG at a time; the .npz and the grid whole, or not at all).
func (s Save) Stream(n, w, h int, produce func(emit func(i int, m *images.RGB) error) error) error {
	if n < 1 || w < 1 || h < 1 {
		return fmt.Errorf("pictures: nothing to save (%d pictures of %d×%d)", n, w, h)
	}
	if s.Dir != "" {
		if err := os.MkdirAll(s.Dir, 0o755); err != nil {
			return fmt.Errorf("pictures: %w", err)
		}
	}
	gridMax := n
	if s.GridMax > 0 {
		gridMax = min(n, s.GridMax)
	}
	var grid []*images.RGB
	next := 0
	emitTo := func(npz *npy.MemberWriter) func(int, *images.RGB) error {
		return func(i int, m *images.RGB) error {
			if i != next {
				return fmt.Errorf("pictures: picture %d arrived where %d was expected", i, next)
			}
			if m.W != w || m.H != h || len(m.Pix) != 3*w*h {
				return fmt.Errorf("pictures: picture %d is %d×%d, want %d×%d like the others", i, m.W, m.H, w, h)
			}
			next++
			if s.Dir != "" {
				if err := images.WritePNG(filepath.Join(s.Dir, fmt.Sprintf("%06d.png", i)), m); err != nil {
					return err
				}
			}
			if npz != nil {
				if _, err := npz.Write(m.Pix); err != nil {
					return fmt.Errorf("pictures: %s: %w", s.NPZ, err)
				}
			}
			if s.Grid != "" && i < gridMax {
				grid = append(grid, m)
			}
			return nil
		}
	}
	run := func(npz *npy.MemberWriter) error {
		if err := produce(emitTo(npz)); err != nil {
			return err
		}
		if next != n {
			return fmt.Errorf("pictures: %d of %d pictures produced", next, n)
		}
		return nil
	}
	var err error
	if s.NPZ != "" {
		err = npy.WriteNPZ(s.NPZ, false, func(zw *npy.Writer) error {
			mw, err := zw.Create(SamplesKey, npy.Header{DType: dtype.U8, Shape: []int{n, h, w, 3}})
			if err != nil {
				return err
			}
			return run(mw)
		})
	} else {
		err = run(nil)
	}
	if err != nil {
		return err
	}
	if s.Grid != "" {
		cols := s.Cols
		if cols < 1 {
			cols = 8
		}
		g, err := images.Grid(grid, cols, 2)
		if err != nil {
			return err
		}
		return images.WritePNG(s.Grid, g)
	}
	return nil
}
