package cmdutil

import (
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
	meta := ck.Metadata
	ck.Close()
	ct, table, found, err = shapes.CaptionTableFrom(meta, capDim)
	if err != nil {
		return ct, nil, found, fmt.Errorf("%s: %w", path, err)
	}
	return ct, table, found, nil
}
