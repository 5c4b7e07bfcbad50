package upcycle

import (
	"strings"
	"testing"

	"github.com/dcdit/dcdit/dc"
)

// A *dit.Model backbone cannot be joined with the scaffold yet: its own
// x_embedder.* and final_layer.* carry the scaffold's names. The error
// says so; when a DC checkpoint kind for DiT backbones settles the stored
// names (docs/zimage.md, "Backbone seam: step 1"), this test changes.
func TestJoinParamsDiTBackboneNames(t *testing.T) {
	tm := teacher(t, 1)
	tc := tm.Config
	s := DefaultScaffold()
	s.NormGroups = 8
	cfg, err := s.Config(tc.InChannels, tc.OutChannels(), tc.InputSize, tc.InputSize, tm.Width())
	if err != nil {
		t.Fatal(err)
	}
	m, err := dc.New(cfg, InitScaffold(cfg, 1), tm)
	if err != nil {
		t.Fatal(err)
	}
	_, err = JoinParams(m)
	if err == nil || !strings.Contains(err.Error(), "appears twice") {
		t.Fatalf("JoinParams on a DiT backbone: error %v, want a duplicate-name one", err)
	}
}
