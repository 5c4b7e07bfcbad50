package images

import (
	"fmt"
	"strconv"
)

// decodePNM reads binary greymap (P5) and pixmap (P6) files with maxval 255,
// the kind PIL reads byte for byte. The other variants are refused by name
// rather than rescaled, since PIL's rescaling of maxval ≠ 255 and its
// 16-bit modes are not what a data set means.
func decodePNM(data []byte) (*RGB, error) {
	kind := string(data[:2])
	channels := 0
	switch kind {
	case "P5":
		channels = 1
	case "P6":
		channels = 3
	default:
		return nil, fmt.Errorf("PNM variant %s is not supported (binary P5 and P6 with maxval 255 are)", kind)
	}
	pos := 2
	var field [3]int
	for i := range field {
		// Whitespace and comments (# to the end of the line) separate
		// the header fields.
		for pos < len(data) {
			if c := data[pos]; c == '#' {
				for pos < len(data) && data[pos] != '\n' && data[pos] != '\r' {
					pos++
				}
			} else if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' {
				pos++
			} else {
				break
			}
		}
		start := pos
		for pos < len(data) && data[pos] >= '0' && data[pos] <= '9' {
			pos++
		}
		v, err := strconv.Atoi(string(data[start:pos]))
		if err != nil || pos-start > 9 {
			return nil, fmt.Errorf("%s header: field %d is %q, want a number", kind, i+1, string(data[start:pos]))
		}
		field[i] = v
	}
	w, h, maxval := field[0], field[1], field[2]
	if maxval != 255 {
		return nil, fmt.Errorf("%s with maxval %d is not supported (255 is)", kind, maxval)
	}
	if err := checkSize(w, h); err != nil {
		return nil, fmt.Errorf("%s: %w", kind, err)
	}
	// One whitespace byte ends the header.
	if pos >= len(data) {
		return nil, fmt.Errorf("%s: truncated after the header", kind)
	}
	pos++
	n := w * h * channels
	if len(data)-pos < n {
		return nil, fmt.Errorf("%s: truncated: %d bytes of pixels, want %d", kind, len(data)-pos, n)
	}
	out := NewRGB(w, h)
	pix := data[pos : pos+n]
	if channels == 3 {
		copy(out.Pix, pix)
		return out, nil
	}
	for i, v := range pix {
		out.Pix[3*i], out.Pix[3*i+1], out.Pix[3*i+2] = v, v, v
	}
	return out, nil
}
