package distill

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/dcdit/dcdit/diffusion"
)

// tableDigest names a caption table by a digest of its values.
func tableDigest(table []float32) string {
	h := sha256.New()
	buf := make([]byte, 0, 4*len(table))
	for _, v := range table {
		buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
	}
	h.Write(buf)
	return "sha256 " + short(h.Sum(nil))
}

// processName names a diffusion process and what shapes its noise levels
// (flow matching's training table, by a digest of its σ) in the
// fingerprint.
func processName(p diffusion.Process) string {
	switch p := p.(type) {
	case *diffusion.FlowMatch:
		if p.Table == nil {
			return "flow_matching"
		}
		h := sha256.New()
		for _, v := range p.Table.Sigmas {
			h.Write(binary.LittleEndian.AppendUint32(nil, math.Float32bits(v)))
		}
		return fmt.Sprintf("flow_matching over %d timesteps, σ sha256 %s", len(p.Table.Sigmas), short(h.Sum(nil)))
	case *diffusion.DDPM:
		return fmt.Sprintf("ddpm over %d timesteps", p.Schedule.Steps())
	}
	return fmt.Sprintf("%T", p)
}
