package upcycle

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/dc"
)

// A *dit.Model backbone joins the scaffold once its names are under
// dc.BackbonePrefix (the stored names of a "dit" DC checkpoint); before,
// its own x_embedder.* and final_layer.* carry the scaffold's names and
// JoinParams says which and what to do.
func TestJoinParamsDiTBackboneNames(t *testing.T) {
	for _, renamed := range []bool{false, true} {
		t.Run(fmt.Sprintf("renamed=%v", renamed), func(t *testing.T) {
			tm := teacher(t, 1)
			tc := tm.Config
			s := DefaultScaffold()
			s.NormGroups = 8
			cfg, err := s.Config(tc.InChannels, tc.OutChannels(), tc.InputSize, tc.InputSize, tm.Width(), tm.CondWidth())
			if err != nil {
				t.Fatal(err)
			}
			if renamed {
				tm.PrefixNames(dc.BackbonePrefix)
			}
			m, err := dc.New(cfg, InitScaffold(cfg, 1), tm)
			if err != nil {
				t.Fatal(err)
			}
			joint, err := JoinParams(m)
			switch {
			case !renamed && (err == nil || !strings.Contains(err.Error(), `parameter "x_embedder.proj.weight" has the name of one of the scaffold's`)):
				t.Fatalf("JoinParams on a DiT backbone with its own names: error %v, want one naming x_embedder.proj.weight", err)
			case renamed && err != nil:
				t.Fatal(err)
			case renamed:
				if n := len(m.Params.List()) + len(tm.Params.List()); len(joint.List()) != n {
					t.Fatalf("joint set holds %d parameters, want %d", len(joint.List()), n)
				}
				if _, ok := joint.Lookup(dc.BackbonePrefix + "x_embedder.proj.weight"); !ok {
					t.Fatal("joint set lacks the DiT's renamed patch embedding")
				}
			}
		})
	}
}
