package cli

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

// Sampling a BF16 Z-Image keeps its matrices bfloat16
// (zimage.LoadOptions.KeepBF16) and gives the latents of the same weights
// widened to an F32 file, byte for byte, guided and unguided.
func TestSampleZImageBF16(t *testing.T) {
	z := zimageTinyCase(t)
	caps, neg := zimageCaps(t, z)
	f, err := safetensors.Open(z.weights)
	if err != nil {
		t.Fatal(err)
	}
	var bf16, widened []safetensors.WriteTensor
	for _, info := range f.Tensors() {
		tn, _ := f.Tensor(info.Name)
		v, err := tn.Float32()
		if err != nil {
			t.Fatal(err)
		}
		h := make([]byte, 2*len(v))
		if err := dtype.EncodeFloat32(h, v, dtype.BF16); err != nil {
			t.Fatal(err)
		}
		w, err := dtype.ToFloat32(h, dtype.BF16)
		if err != nil {
			t.Fatal(err)
		}
		bf16 = append(bf16, safetensors.WriteTensor{Name: info.Name, DType: dtype.BF16, Shape: info.Shape, Data: h})
		widened = append(widened, safetensors.WriteTensor{Name: info.Name, DType: dtype.F32, Shape: info.Shape, Data: dtype.F32Bytes(w)})
	}
	f.Close()
	dir := t.TempDir()
	paths := map[string][]safetensors.WriteTensor{filepath.Join(dir, "bf16.safetensors"): bf16, filepath.Join(dir, "f32.safetensors"): widened}
	for path, ts := range paths {
		if err := safetensors.Write(path, ts, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, guidance := range [][]string{{"--cfg", "0"}, {"--negative", neg, "--cfg", "3"}} {
		var got [][]byte
		for _, name := range []string{"bf16.safetensors", "f32.safetensors"} {
			args := append([]string{filepath.Join(dir, name), "--config", z.config, "--captions", caps, "--size", z.size(4, 3), "--steps", "2", "--seed", "5"}, guidance...)
			out, code, _, stderr := sampleRun(t, args...)
			if code != 0 {
				t.Fatalf("%s %v: exit %d: %s", name, guidance, code, stderr)
			}
			_, raw, _ := readLatents(t, out)
			got = append(got, raw)
		}
		if !bytes.Equal(got[0], got[1]) {
			t.Errorf("%v: the BF16 checkpoint's latents differ from its widened F32 copy's", guidance)
		}
	}
}
