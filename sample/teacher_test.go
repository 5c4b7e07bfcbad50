package sample

import (
	"reflect"
	"testing"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/family"
)

// recorder is a family.Teacher whose Predict records its arguments (the
// other methods are not called).
type recorder struct {
	family.Teacher
	in         cond.Input
	rows, cols int
}

func (r *recorder) Predict(xt []float32, in cond.Input, rows, cols int) ([]float32, error) {
	r.in, r.rows, r.cols = in, rows, cols
	return xt, nil
}

// The teacher's model hands Predict the conditions as Input lays them out
// and the grid it was made for, and its output back.
func TestTeacher(t *testing.T) {
	c := Conditions{Labels: []int{2, 5}, Null: 8}
	for _, guided := range []bool{false, true} {
		r := &recorder{}
		tm := []float32{3, 4}
		x := []float32{1, 2}
		if guided {
			tm, x = []float32{3, 4, 3, 4}, []float32{1, 2, 1, 2}
		}
		out, err := Teacher(r, c, 6, 7)(x, tm, guided)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := c.Input(tm, guided)
		if !reflect.DeepEqual(r.in, want) || r.rows != 6 || r.cols != 7 || !reflect.DeepEqual(out, x) {
			t.Errorf("guided %v: Predict got %+v on %d×%d, want %+v on 6×7", guided, r.in, r.rows, r.cols, want)
		}
	}
	if _, err := Teacher(&recorder{}, c, 6, 7)([]float32{1}, []float32{3}, false); err == nil {
		t.Error("one model time for two samples: no error")
	}
}
