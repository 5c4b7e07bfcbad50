package pytorch

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteForTorch writes files for testdata/pytorch/check_go_save.py,
// which loads them with real PyTorch. It runs only when
// DCDIT_PYTORCH_CHECK_DIR names the folder to write to:
//
//	DCDIT_PYTORCH_CHECK_DIR=/tmp/ptcheck go test ./loaders/pytorch -run TestWriteForTorch
//	python3 testdata/pytorch/check_go_save.py /tmp/ptcheck
func TestWriteForTorch(t *testing.T) {
	dir := os.Getenv("DCDIT_PYTORCH_CHECK_DIR")
	if dir == "" {
		t.Skip("DCDIT_PYTORCH_CHECK_DIR not set")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tensors := saveTestTensors()
	args := map[string]any{"model": "DiT-XL/2", "image_size": int64(256), "num_classes": 1000, "lr": 1e-4,
		"compile": false, "resume": nil, "betas": []any{0.9, 0.999}, "extra": map[string]any{"a": "b"}}
	type entry struct {
		Name  string  `json:"name"`
		DType string  `json:"dtype"`
		Shape []int64 `json:"shape"`
		Hex   string  `json:"hex"`
	}
	files := []struct {
		name string
		opts SaveOptions
	}{
		{"bare.pt", SaveOptions{}},
		{"named_archive.pt", SaveOptions{Archive: "DiT-XL-2-256x256"}},
		{"training.pt", SaveOptions{Training: true, EMA: true}},
		{"training_args.pt", SaveOptions{Training: true, EMA: true, Args: args}},
	}
	expected := map[string]any{}
	for _, f := range files {
		if err := Save(filepath.Join(dir, f.name), tensors, f.opts); err != nil {
			t.Fatal(err)
		}
		var es []entry
		for _, st := range tensors {
			es = append(es, entry{st.Name, st.DType.String(), append([]int64{}, st.Shape...), hex.EncodeToString(st.Data)})
		}
		expected[f.name] = map[string]any{"tensors": es, "training": f.opts.Training, "args": f.opts.Args}
	}
	b, err := json.MarshalIndent(expected, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "expected.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
