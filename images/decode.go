package images

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"
)

// maxPixels is PIL's decompression-bomb limit: Image.open raises
// DecompressionBombError above twice Image.MAX_IMAGE_PIXELS (89478485)
// pixels, and so does Decode, before allocating them.
const maxPixels = 2 * 89478485

// Decode reads the image file at path into the pixels that PIL's
// Image.open(path).convert("RGB") gives (torchvision's ImageFolder loader).
// The format is told by content, as PIL tells it, not by extension. See
// DecodeBytes for the formats and how they convert.
func Decode(path string) (*RGB, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	m, err := decode(data, filepath.Ext(path))
	if err != nil {
		return nil, fmt.Errorf("images: %s: %w", path, err)
	}
	return m, nil
}

// DecodeReader is Decode on the bytes r yields until EOF.
func DecodeReader(r io.Reader) (*RGB, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	return DecodeBytes(data)
}

// DecodeBytes decodes an image file held in memory to RGB as PIL's
// convert("RGB") does:
//
//   - PNG: greyscale (any depth ≤ 8) repeated into R, G and B; alpha (and
//     tRNS transparency) dropped without compositing; palette indices
//     looked up, an index past the end of a short PLTE giving grey (i,i,i)
//     as PIL's default palette does; 16-bit colour and grey+alpha reduced
//     to their high byte. 16-bit greyscale is refused: PIL opens it as
//     32-bit mode I and convert("RGB") clips every value above 255 to
//     white, which no data set means.
//   - JPEG: baseline and progressive; greyscale; YCbCr with libjpeg-turbo's
//     default ("fancy") chroma upsampling and its integer YCbCr→RGB; Adobe
//     RGB; CMYK and YCCK (which PIL reads as inverted Adobe CMYK) through
//     PIL's CMYK→RGB. The inverse DCT is Go's, not libjpeg's islow: on the
//     test pictures and Go's own test JPEGs, 1–5% of samples differ from
//     PIL's, by at most 3 (image/jpeg with image/draw's conversion: 20–60%,
//     by up to 48). Adobe RGB and CMYK JPEGs with subsampled components,
//     and YCbCr ones whose chroma is not sampled 1×1, are upsampled by
//     repetition, where libjpeg interpolates. Arithmetic-coded and 12-bit
//     JPEGs are refused.
//   - WebP: lossless exactly; lossy with libwebp's fancy upsampling and
//     fixed-point conversion, exactly; alpha dropped.
//   - BMP and TIFF (8 bits per sample), alpha dropped; binary PGM and PPM
//     (P5, P6) with maxval 255. Other PNM variants are refused by name.
//
// Errors name what was found: a truncated or corrupt file, an unsupported
// format (by its sniffed content), an image of zero or too many pixels.
func DecodeBytes(data []byte) (*RGB, error) {
	m, err := decode(data, "")
	if err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	return m, nil
}

// decode sniffs the format and hands data to its decoder; ext, the file's
// extension when there is a file, goes into the message for a format not
// supported.
func decode(data []byte, ext string) (*RGB, error) {
	named := ""
	if ext != "" {
		named = fmt.Sprintf(", named %s", ext)
	}
	var (
		m   *RGB
		err error
	)
	switch f := sniff(data); f {
	case "PNG":
		m, err = decodePNG(data)
	case "JPEG":
		m, err = decodeJPEG(data)
	case "BMP":
		m, err = decodeGo(data, f, bmp.DecodeConfig, bmp.Decode)
	case "TIFF":
		// PIL's modes for 16-bit TIFFs vary with the layout; none is a
		// plain high byte to rely on.
		m, err = decodeGo(data, f, tiff.DecodeConfig, func(r io.Reader) (image.Image, error) {
			im, err := tiff.Decode(r)
			switch im.(type) {
			case *image.Gray16, *image.RGBA64, *image.NRGBA64:
				return nil, fmt.Errorf("16 bits per sample are not supported")
			}
			return im, err
		})
	case "WebP":
		m, err = decodeWebP(data)
	case "PNM":
		m, err = decodePNM(data)
	case "":
		n := min(len(data), 8)
		if n == 0 {
			return nil, fmt.Errorf("empty file, not an image")
		}
		return nil, fmt.Errorf("unknown image format (content starts % x%s)", data[:n], named)
	default:
		return nil, fmt.Errorf("unsupported image format %s (told by content%s)", f, named)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("truncated file: %w", err)
	}
	return m, err
}

// sniff names the format data starts with, "" when none is known.
func sniff(data []byte) string {
	has := func(p string) bool { return bytes.HasPrefix(data, []byte(p)) }
	switch {
	case has("\x89PNG\r\n\x1a\n"):
		return "PNG"
	case has("\xff\xd8\xff"):
		return "JPEG"
	case has("BM"):
		return "BMP"
	case has("II*\x00"), has("MM\x00*"):
		return "TIFF"
	case has("RIFF") && len(data) >= 12 && string(data[8:12]) == "WEBP":
		return "WebP"
	case len(data) >= 2 && data[0] == 'P' && data[1] >= '1' && data[1] <= '7':
		return "PNM"
	case has("GIF87a"), has("GIF89a"):
		return "GIF"
	case has("\x00\x00\x01\x00"):
		return "ICO"
	case has("8BPS"):
		return "PSD"
	case len(data) >= 12 && string(data[4:8]) == "ftyp":
		return "HEIF/AVIF"
	case has("\xff\x4f\xff\x51"), has("\x00\x00\x00\x0cjP  "):
		return "JPEG 2000"
	}
	return ""
}

// checkSize refuses images PIL would not open: no pixels, or more than its
// decompression-bomb limit.
func checkSize(w, h int) error {
	if w < 1 || h < 1 {
		return fmt.Errorf("image of %d×%d pixels: want both sides ≥ 1", w, h)
	}
	if int64(w)*int64(h) > maxPixels {
		return fmt.Errorf("image of %d×%d pixels is over PIL's decompression-bomb limit of %d", w, h, maxPixels)
	}
	return nil
}

// decodeGo decodes a format left to a Go decoder, checking the size its
// header states before decoding the pixels.
func decodeGo(data []byte, format string, config func(io.Reader) (image.Config, error), dec func(io.Reader) (image.Image, error)) (*RGB, error) {
	c, err := config(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s header: %w", format, err)
	}
	if err := checkSize(c.Width, c.Height); err != nil {
		return nil, fmt.Errorf("%s: %w", format, err)
	}
	im, err := dec(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", format, err)
	}
	m, err := toRGB(im, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", format, err)
	}
	return m, nil
}

// pngHeader is what decodePNG reads of a PNG's chunks itself: the IHDR
// fields, and the entry count of PLTE, which image/png pads to cover
// every index found.
type pngHeader struct {
	w, h         int
	depth, ctype byte
	paletteLen   int
}

// readPNGHeader walks the chunks up to the first IDAT. A chunk list cut
// short stops the walk quietly: image/png then reports it.
func readPNGHeader(data []byte) (pngHeader, error) {
	var hd pngHeader
	p := data[8:]
	if len(p) < 8+13 || string(p[4:8]) != "IHDR" || binary.BigEndian.Uint32(p) != 13 {
		return hd, fmt.Errorf("PNG: no IHDR chunk of 13 bytes at the start")
	}
	w, h := binary.BigEndian.Uint32(p[8:]), binary.BigEndian.Uint32(p[12:])
	if w > 1<<31-1 || h > 1<<31-1 {
		return hd, fmt.Errorf("PNG: IHDR states %d×%d pixels", w, h)
	}
	hd.w, hd.h, hd.depth, hd.ctype = int(w), int(h), p[16], p[17]
	for len(p) >= 8 {
		n := int64(binary.BigEndian.Uint32(p))
		typ := string(p[4:8])
		if typ == "IDAT" || int64(len(p)) < 12+n {
			break
		}
		if typ == "PLTE" {
			hd.paletteLen = int(n / 3)
		}
		p = p[12+n:]
	}
	return hd, nil
}

// pngEnd is the IEND chunk that closes every PNG.
const pngEnd = "\x00\x00\x00\x00IEND\xae\x42\x60\x82"

func decodePNG(data []byte) (*RGB, error) {
	hd, err := readPNGHeader(data)
	if err != nil {
		return nil, err
	}
	if err := checkSize(hd.w, hd.h); err != nil {
		return nil, fmt.Errorf("PNG: %w", err)
	}
	if hd.ctype == 0 && hd.depth == 16 {
		return nil, fmt.Errorf("PNG: 16-bit greyscale is refused: PIL opens it as mode I, and convert(\"RGB\") clips every value above 255 to white; convert the file to 8 bits first")
	}
	im, err := png.Decode(bytes.NewReader(data))
	if err != nil && !bytes.HasSuffix(data, []byte(pngEnd)) {
		// PIL stops at the last pixel and does not miss an IEND chunk
		// that was cut off; image/png does, unless it is there.
		if m, err2 := png.Decode(io.MultiReader(bytes.NewReader(data), strings.NewReader(pngEnd))); err2 == nil {
			im, err = m, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("PNG: %w", err)
	}
	m, err := toRGB(im, hd.paletteLen)
	if err != nil {
		return nil, fmt.Errorf("PNG: %w", err)
	}
	return m, nil
}

// toRGB converts a decoded image to RGB as PIL converts the mode it would
// have opened the file in: alpha dropped (never composited), 16-bit
// samples cut to their high byte (PIL's ";16B" raw modes). paletteLen is
// how many palette entries the file defined; indices past them are grey,
// PIL's default palette. 0 means all of im's palette.
func toRGB(im image.Image, paletteLen int) (*RGB, error) {
	b := im.Bounds()
	w, h := b.Dx(), b.Dy()
	if err := checkSize(w, h); err != nil {
		return nil, err
	}
	out := NewRGB(w, h)
	px := out.Pix
	switch im := im.(type) {
	case *image.Gray:
		for y := range h {
			row := im.Pix[im.PixOffset(b.Min.X, b.Min.Y+y):]
			for x := range w {
				v := row[x]
				px[3*(y*w+x)], px[3*(y*w+x)+1], px[3*(y*w+x)+2] = v, v, v
			}
		}
	case *image.RGBA:
		// Premultiplied: only an opaque one holds the file's colours.
		if !im.Opaque() {
			return nil, fmt.Errorf("premultiplied alpha is not supported (PIL keeps the colours unassociated)")
		}
		copyRGB(px, w, h, im.Pix, im.PixOffset(b.Min.X, b.Min.Y), im.Stride, 4, 1)
	case *image.NRGBA:
		copyRGB(px, w, h, im.Pix, im.PixOffset(b.Min.X, b.Min.Y), im.Stride, 4, 1)
	case *image.RGBA64:
		if !im.Opaque() {
			return nil, fmt.Errorf("premultiplied alpha is not supported (PIL keeps the colours unassociated)")
		}
		copyRGB(px, w, h, im.Pix, im.PixOffset(b.Min.X, b.Min.Y), im.Stride, 8, 2)
	case *image.NRGBA64:
		copyRGB(px, w, h, im.Pix, im.PixOffset(b.Min.X, b.Min.Y), im.Stride, 8, 2)
	case *image.Paletted:
		var pal [256][3]uint8
		n := len(im.Palette)
		if paletteLen > 0 {
			n = min(n, paletteLen)
		}
		for i := range pal {
			pal[i] = [3]uint8{uint8(i), uint8(i), uint8(i)}
			if i < n {
				pal[i] = straight(im.Palette[i])
			}
		}
		for y := range h {
			row := im.Pix[im.PixOffset(b.Min.X, b.Min.Y+y):]
			for x := range w {
				copy(px[3*(y*w+x):], pal[row[x]][:])
			}
		}
	case *image.YCbCr:
		// Only image/jpeg returns planes here (WebP's are converted in
		// decodeWebP).
		ycbcrToRGB(out, im)
	case *image.CMYK:
		for y := range h {
			row := im.Pix[im.PixOffset(b.Min.X, b.Min.Y+y):]
			for x := range w {
				c := row[4*x : 4*x+4]
				r, g, bl := cmykToRGB(c[0], c[1], c[2], c[3])
				px[3*(y*w+x)], px[3*(y*w+x)+1], px[3*(y*w+x)+2] = r, g, bl
			}
		}
	default:
		return nil, fmt.Errorf("decoded to %T, which has no conversion to RGB here", im)
	}
	return out, nil
}

// copyRGB copies the first three samples of each pixel of a packed image
// with bpp bytes a pixel, taking the first (high) byte of each bps-byte
// sample.
func copyRGB(dst []uint8, w, h int, src []uint8, off, stride, bpp, bps int) {
	for y := range h {
		row := src[off+y*stride:]
		for x := range w {
			p := row[bpp*x:]
			d := dst[3*(y*w+x):]
			d[0], d[1], d[2] = p[0], p[bps], p[2*bps]
		}
	}
}

// straight returns a palette colour's RGB without alpha.
func straight(c color.Color) [3]uint8 {
	switch c := c.(type) {
	case color.RGBA:
		if c.A == 255 {
			return [3]uint8{c.R, c.G, c.B}
		}
	case color.NRGBA:
		return [3]uint8{c.R, c.G, c.B}
	}
	n := color.NRGBAModel.Convert(c).(color.NRGBA)
	return [3]uint8{n.R, n.G, n.B}
}

// cmykToRGB is PIL's CMYK→RGB (Convert.c cmyk2rgb): each channel is
// (255−k)·(255−c)/255 computed as nk − round(c·nk/255).
func cmykToRGB(c, m, y, k uint8) (uint8, uint8, uint8) {
	nk := 255 - int(k)
	ch := func(v uint8) uint8 {
		t := int(v)*nk + 128
		return uint8(nk - ((t>>8)+t)>>8)
	}
	return ch(c), ch(m), ch(y)
}
