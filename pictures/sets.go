package pictures

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dcdit/dcdit/fid"
	"github.com/dcdit/dcdit/images"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/npy"
)

// Set is a stream of 8-bit RGB pictures that FID is computed on, read one
// batch at a time so that 50 000 of them never sit in memory at once.
type Set interface {
	// Len is the number of pictures.
	Len() int
	// Each calls fn with consecutive batches of at most max pictures, all
	// of one size in a batch: pix is uint8 NHWC [n, h, w, 3], valid only
	// during the call.
	Each(max int, fn func(pix []uint8, n, h, w int) error) error
	// String names the set in messages.
	String() string
}

// folderSet is the pictures directly inside a folder, in name order, as
// pytorch-fid reads a folder (not its sub-folders), each converted to RGB as
// PIL's convert("RGB") does.
type folderSet struct {
	dir   string
	files []string
}

// OpenFolder lists the pictures directly inside dir.
func OpenFolder(dir string) (Set, error) {
	f, err := images.Walk(dir, images.WalkOptions{Layout: images.Flat})
	if err != nil {
		return nil, err
	}
	s := &folderSet{dir: dir}
	for _, e := range f.Entries {
		s.files = append(s.files, e.Path)
	}
	return s, nil
}

func (s *folderSet) Len() int       { return len(s.files) }
func (s *folderSet) String() string { return s.dir }

func (s *folderSet) Each(max int, fn func(pix []uint8, n, h, w int) error) error {
	var buf []uint8
	n, h, w := 0, 0, 0
	flush := func() error {
		if n == 0 {
			return nil
		}
		err := fn(buf, n, h, w)
		buf, n = buf[:0], 0
		return err
	}
	for _, f := range s.files {
		m, err := images.Decode(f)
		if err != nil {
			return err
		}
		if n > 0 && (m.W != w || m.H != h || n == max) {
			if err := flush(); err != nil {
				return err
			}
		}
		w, h = m.W, m.H
		buf = append(buf, m.Pix...)
		n++
	}
	return flush()
}

// npzSet is an .npz sample batch's arr_0, uint8 [N, H, W, 3], streamed.
type npzSet struct {
	path    string
	n, h, w int
}

// openSamples checks that a's arr_0 is a sample batch.
func openSamples(path string, a *npy.Archive) (*npzSet, error) {
	m, err := a.Member(SamplesKey)
	if err != nil {
		return nil, fmt.Errorf("pictures: %w", err)
	}
	hd := m.Header()
	if hd.DType != dtype.U8 || len(hd.Shape) != 4 || hd.Shape[3] != 3 || hd.Shape[0] < 1 || hd.Shape[1] < 1 || hd.Shape[2] < 1 {
		return nil, fmt.Errorf("pictures: %s: %s is %s, want uint8 [N, H, W, 3] pictures (a sample batch as DiT's sample_ddp.py writes)", path, SamplesKey, hd)
	}
	return &npzSet{path: path, n: hd.Shape[0], h: hd.Shape[1], w: hd.Shape[2]}, nil
}

func (s *npzSet) Len() int       { return s.n }
func (s *npzSet) String() string { return s.path }

func (s *npzSet) Each(max int, fn func(pix []uint8, n, h, w int) error) error {
	a, err := npy.OpenNPZ(s.path)
	if err != nil {
		return err
	}
	defer a.Close()
	m, err := a.Member(SamplesKey)
	if err != nil {
		return err
	}
	r, err := m.Rows()
	if err != nil {
		return err
	}
	defer r.Close()
	buf := make([]uint8, max*r.RowBytes())
	for {
		k, err := r.Next(buf)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(buf[:k*r.RowBytes()], k, s.h, s.w); err != nil {
			return err
		}
	}
}

// latentSet is a latents file decoded through a VAE on the fly.
type latentSet struct {
	path  string
	lat   *Latents
	codec *Codec
}

func (s *latentSet) Len() int       { return s.lat.N }
func (s *latentSet) String() string { return s.path + " (decoded by the VAE)" }

func (s *latentSet) Each(max int, fn func(pix []uint8, n, h, w int) error) error {
	l := s.lat
	w, h := s.codec.VAE.ImageSize(l.W), s.codec.VAE.ImageSize(l.H)
	per := l.C * l.H * l.W
	buf := make([]uint8, 0, max*w*h*3)
	for lo := 0; lo < l.N; lo += max {
		hi := min(lo+max, l.N)
		buf = buf[:0]
		err := s.codec.Decode(l.Data[lo*per:hi*per], hi-lo, l.C, l.H, l.W, func(_ int, m *images.RGB) error {
			buf = append(buf, m.Pix...)
			return nil
		})
		if err != nil {
			return err
		}
		if err := fn(buf, hi-lo, h, w); err != nil {
			return err
		}
	}
	return nil
}

// Side is one side of an FID: precomputed statistics, or pictures to
// compute them from.
type Side struct {
	// Stats is set for a statistics file (.npz with mu and sigma).
	Stats *fid.Stats
	// Set is set for pictures.
	Set Set
}

// OpenSide reads what path holds: a folder of pictures; an .npz holding
// mu and sigma (pytorch-fid's --save-stats, an ADM reference batch: its
// statistics are used) or a sample batch arr_0; or a latents file
// (.safetensors), which codec decodes (an error without one).
func OpenSide(path string, codec *Codec) (*Side, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("pictures: %w", err)
	}
	if st.IsDir() {
		s, err := OpenFolder(path)
		if err != nil {
			return nil, err
		}
		return &Side{Set: s}, nil
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".npz":
		a, err := npy.OpenNPZ(path)
		if err != nil {
			return nil, err
		}
		defer a.Close()
		names := a.Names()
		if slices.Contains(names, "mu") && slices.Contains(names, "sigma") {
			s, err := fid.ReadStats(path)
			if err != nil {
				return nil, err
			}
			return &Side{Stats: &s}, nil
		}
		if slices.Contains(names, SamplesKey) {
			s, err := openSamples(path, a)
			if err != nil {
				return nil, err
			}
			return &Side{Set: s}, nil
		}
		return nil, fmt.Errorf("pictures: %s holds neither statistics (mu, sigma) nor a sample batch (arr_0): it holds %s", path, strings.Join(names, ", "))
	case ".safetensors":
		if codec == nil {
			return nil, fmt.Errorf("pictures: %s is a latents file: give a VAE (--vae) to decode it into pictures", path)
		}
		l, err := ReadLatents(path)
		if err != nil {
			return nil, err
		}
		if err := codec.CheckLatents(l.C); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return &Side{Set: &latentSet{path: path, lat: l, codec: codec}}, nil
	}
	return nil, fmt.Errorf("pictures: %s: want a folder of pictures, an .npz (statistics or a sample batch) or a .safetensors latents file", path)
}
