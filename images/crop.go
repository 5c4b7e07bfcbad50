package images

import (
	"errors"
	"fmt"
	"math"
)

// ErrTooSmall is what CenterCrop and LoadCrop wrap when CropOptions.NoUpscale
// is set and an image's shorter side is below the crop.
var ErrTooSmall = errors.New("image smaller than the crop")

// CropOptions adjusts CenterCrop; the zero value follows ADM.
type CropOptions struct {
	// NoUpscale refuses (ErrTooSmall) an image whose shorter side is
	// below the crop size, which ADM would upscale with BICUBIC.
	NoUpscale bool
}

// CenterCrop is ADM's center_crop_arr (which DiT uses to prepare ImageNet):
// while the shorter side is at least twice size, halve both sides (floor)
// with BOX; then scale with BICUBIC so that the shorter side becomes size,
// each side rounded as Python's round does (half to even); then cut the
// size×size square at offset ((w−size)/2, (h−size)/2), floored.
func CenterCrop(m *RGB, size int, opts CropOptions) (*RGB, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	out, err := centerCrop(m, size, opts)
	if err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	return out, nil
}

// LoadCrop decodes the image at path and centre-crops it as CenterCrop
// does; errors name the file.
func LoadCrop(path string, size int, opts CropOptions) (*RGB, error) {
	m, err := Decode(path)
	if err != nil {
		return nil, err
	}
	out, err := centerCrop(m, size, opts)
	if err != nil {
		return nil, fmt.Errorf("images: %s: %w", path, err)
	}
	return out, nil
}

// centerCrop is CenterCrop on a well-formed m, its errors unprefixed.
func centerCrop(m *RGB, size int, opts CropOptions) (*RGB, error) {
	if size < 1 {
		return nil, fmt.Errorf("centre crop to %d pixels: want ≥ 1", size)
	}
	if opts.NoUpscale && min(m.W, m.H) < size {
		return nil, fmt.Errorf("%d×%d image, crop %d: %w", m.W, m.H, size, ErrTooSmall)
	}
	for min(m.W, m.H) >= 2*size {
		m = resize(m, m.W/2, m.H/2, Box)
	}
	scale := float64(size) / float64(min(m.W, m.H))
	w := int(math.RoundToEven(float64(m.W) * scale))
	h := int(math.RoundToEven(float64(m.H) * scale))
	if w < size || h < size || int64(w)*int64(h) > maxPixels {
		// The first cannot happen for sides below 2⁵³, where the shorter
		// side rounds to size; numpy would return a smaller array.
		return nil, fmt.Errorf("%d×%d image scaled to %d×%d for a crop of %d: want both sides from %d to a total of %d pixels", m.W, m.H, w, h, size, size, maxPixels)
	}
	m = resize(m, w, h, Bicubic)
	x0, y0 := (w-size)/2, (h-size)/2
	out := NewRGB(size, size)
	for y := range size {
		copy(out.Pix[3*y*size:3*(y+1)*size], m.Pix[3*((y0+y)*w+x0):])
	}
	return out, nil
}
