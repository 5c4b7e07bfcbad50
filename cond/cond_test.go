package cond

import (
	"strings"
	"testing"
)

// The checks accept a batch of the kind asked for and name what is wrong
// with any other.
func TestChecks(t *testing.T) {
	capt := func(rows, valid int) Caption { return Caption{Features: make([]float32, 4*rows), Len: valid} }
	tests := []struct {
		name    string
		in      Input
		labels  bool // CheckLabels(3), else CheckCaptions(4)
		wantErr string
	}{
		{"labels", Input{T: []float32{1, 2}, Labels: []int{0, 3}}, true, ""},
		{"no samples", Input{}, true, "0 timesteps and 0 labels"},
		{"labels short", Input{T: []float32{1, 2}, Labels: []int{0}}, true, "2 timesteps and 1 labels"},
		{"label past the null class", Input{T: []float32{1}, Labels: []int{4}}, true, "label 4 of sample 0 outside [0, 3]"},
		{"captions to a label backbone", Input{T: []float32{1}, Labels: []int{0}, Captions: []Caption{capt(1, 1)}}, true, "1 captions given"},
		{"captions", Input{T: []float32{1, 2}, Captions: []Caption{capt(1, 1), capt(5, 3)}}, false, ""},
		{"labels to a caption backbone", Input{T: []float32{1}, Labels: []int{0}, Captions: []Caption{capt(1, 1)}}, false, "1 labels given"},
		{"captions short", Input{T: []float32{1, 2}, Captions: []Caption{capt(1, 1)}}, false, "2 timesteps and 1 captions"},
		{"empty caption", Input{T: []float32{1}, Captions: []Caption{capt(2, 0)}}, false, "sample 0 has 0 valid rows"},
		{"ragged rows", Input{T: []float32{1}, Captions: []Caption{{Features: make([]float32, 6), Len: 1}}}, false, "6 feature values, not whole rows of width 4"},
		{"valid past the rows", Input{T: []float32{1}, Captions: []Caption{capt(2, 3)}}, false, "2 rows of width 4, fewer than its 3 valid ones"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.labels {
				err = tt.in.CheckLabels(3)
			} else {
				err = tt.in.CheckCaptions(4)
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v, want one mentioning %q", err, tt.wantErr)
			}
		})
	}
}
