// Package zimagetest builds, for tests, a small random Z-Image and a DC
// model grafted onto a copy of it that starts as the Z-Image itself, and a
// toy Z-Image repository with a tiny text encoder and the real tokenizer.
package zimagetest

import (
	"testing"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/internal/testckpt"
	"github.com/dcdit/dcdit/upcycle"
	"github.com/dcdit/dcdit/zimage"
)

// Grafted returns a frozen testckpt.RandomZImage drawn from seed and a DC
// model grafted onto another copy of it on a side×side grid, set to start
// as the Z-Image (upcycle.Scaffold.StartAsTeacher): with a router that
// keeps every cell (KeepAll) it predicts what the Z-Image predicts.
func Grafted(t testing.TB, seed uint64, side int) (*zimage.Model, *dc.Model) {
	t.Helper()
	teacher := testckpt.RandomZImage(t, seed)
	teacher.Params.SetRequiresGrad(false)
	s := upcycle.DefaultScaffold()
	s.NormGroups, s.RouterGroups, s.WidthFactor = 8, 4, 2
	s = s.StartAsTeacher(teacher.Config.PatchSize)
	m, err := upcycle.GraftTeacher(zimage.Teacher{Model: testckpt.RandomZImage(t, seed)}, s, side, side, 3)
	if err != nil {
		t.Fatal(err)
	}
	return teacher, m
}

// KeepAll makes m's router mark every cell a confident boundary.
func KeepAll(m *dc.Model) {
	m.Params.Get("hnet.routing_module.residual_scorer.3.bias").Values()[0] = 30
}
