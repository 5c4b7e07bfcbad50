package eval

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"

	"github.com/dcdit/dcdit/loaders/atomicfile"
)

// Names of the files WriteFiles writes.
const (
	JSONFile       = "eval.json"
	BoundaryFile   = "boundaries.png"
	TrajectoryFile = "trajectory.png"
	GridFile       = "elastic_grid.png"
)

// JSON returns the report as indented JSON.
func (r *Report) JSON() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	return b.Bytes(), nil
}

// WriteFiles writes eval.json and the pictures into dir (which must
// exist), each atomically, and returns their paths: the boundary maps,
// the trajectory and the elastic grid, and pareto.png when the report has
// Fréchet distances.
func (r *Report) WriteFiles(dir string) ([]string, error) {
	js, err := r.JSON()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, JSONFile)
	if err := atomicfile.Write(path, func(w io.Writer) error { _, err := w.Write(js); return err }); err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	written := []string{path}
	for _, p := range []struct {
		name  string
		write func(string) error
	}{{BoundaryFile, r.WriteBoundaryPNG}, {TrajectoryFile, r.WriteTrajectoryPNG}, {GridFile, r.WriteElasticGridPNG}, {ParetoFile, r.WriteParetoPNG}} {
		if p.name == ParetoFile && r.Teacher.FD == nil {
			continue
		}
		path := filepath.Join(dir, p.name)
		if err := p.write(path); err != nil {
			return written, err
		}
		written = append(written, path)
	}
	return written, nil
}
