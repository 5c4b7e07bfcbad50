package cmdutil

import (
	"encoding/json"
	"fmt"

	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/loaders"
)

// ReadCaptionTable reads the caption table a checkpoint records
// (shapes.CaptionTableKey: a Z-Image trained by dcdit on the shapes
// captions) and rebuilds it, checking its width against the model's
// capDim; found is false when the checkpoint records none. Errors start
// with the path.
func ReadCaptionTable(path string, capDim int) (ct shapes.CaptionTable, table []float32, found bool, err error) {
	ck, err := loaders.Open(path)
	if err != nil {
		return ct, nil, false, err
	}
	raw, ok := ck.Metadata[shapes.CaptionTableKey]
	ck.Close()
	if !ok {
		return ct, nil, false, nil
	}
	if err := json.Unmarshal([]byte(raw), &ct); err != nil {
		return ct, nil, true, fmt.Errorf("%s: metadata %q: %v", path, shapes.CaptionTableKey, err)
	}
	if ct.Dim != capDim {
		return ct, nil, true, fmt.Errorf("%s: its caption table is %d wide, the model reads %d features", path, ct.Dim, capDim)
	}
	if table, err = ct.Table(); err != nil {
		return ct, nil, true, fmt.Errorf("%s: %w", path, err)
	}
	return ct, table, true, nil
}
