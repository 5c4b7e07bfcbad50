package pytorch

import (
	"path/filepath"
	"testing"

	"github.com/dcdit/dcdit/loaders/dtype"
)

// dataclass writes config.<class>(**attrs) as protocol-2 pickle stores a
// dataclass: NEWOBJ of the class, then BUILD with its attribute dict, whose
// values may be other dataclasses (dataclass values in nested).
func (p *pickler) dataclass(t *testing.T, class string, attrs map[string]any, nested map[string]func()) {
	t.Helper()
	p.global("config", class)
	p.op(opEmptyTuple)
	p.op(opNewObj)
	if err := p.value(attrs, 0); err != nil {
		t.Fatal(err)
	}
	// The nested dataclasses join the attribute dict (SETITEMS onto it).
	for name, write := range nested {
		p.op(opMark)
		p.str(name)
		write()
		p.op(opSetItems)
	}
	p.op(opBuild)
}

// The official DC-DiT's train.py pickles its config.Config dataclass next
// to the weights: Open reads such a training checkpoint, takes its EMA and
// exposes the config, nested dataclasses as maps.
func TestOpenOfficialTrainingCheckpoint(t *testing.T) {
	tensors := []SaveTensor{{Name: "final_layer.linear.bias", DType: dtype.F32, Shape: []int64{2}, Data: f32Bytes(1, 2)}}
	p := newPickler()
	var storages [][]byte
	p.proto()
	p.op(opEmptyDict)
	p.op(opMark)
	p.str("model")
	storages = p.stateDict(tensors, storages)
	p.str("ema")
	storages = p.stateDict(tensors, storages)
	p.str("config")
	p.dataclass(t, "Config", map[string]any{"ckpt": nil}, map[string]func(){
		"model": func() {
			p.dataclass(t, "ModelConfig", map[string]any{"name": "DC-DiT", "mlp_ratio": 4.0}, map[string]func(){
				"hnet": func() {
					p.dataclass(t, "HNetConfig", map[string]any{"d_model": []any{int64(64), int64(64)}, "enc_dec_dim_factor": []any{int64(2), nil}}, nil)
				},
			})
		},
		"data": func() {
			p.dataclass(t, "DataConfig", map[string]any{"image_size": int64(128), "num_classes": int64(10)}, nil)
		},
	})
	p.op(opSetItems)
	p.op(opStop)
	path := filepath.Join(t.TempDir(), "0001000.pt")
	if err := writeArchive(path, "archive", p.buf.Bytes(), storages); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Selected != "ema" || len(f.Tensors) != 1 {
		t.Errorf("selected %q with %d tensors, want the EMA's 1", f.Selected, len(f.Tensors))
	}
	model, _ := f.Config["model"].(map[string]any)
	hnet, _ := model["hnet"].(map[string]any)
	data, _ := f.Config["data"].(map[string]any)
	dm, _ := hnet["d_model"].([]any)
	if len(dm) != 2 || dm[0] != int64(64) || data["image_size"] != int64(128) || model["name"] != "DC-DiT" || f.Config["ckpt"] != nil {
		t.Errorf("config = %#v", f.Config)
	}
}
