package hnet

import "testing"

// Latent cells map to the patch-grid position of their centre: the two
// cells of a DiT/2 patch straddle the patch's own position.
func TestGridPos(t *testing.T) {
	tests := []struct {
		patch int
		in    float64
		want  float64
	}{
		{0, 5, 5},
		{1, 5, 5},
		{2, 0, -0.25},
		{2, 1, 0.25},
		{2, 30, 14.75},
		{4, 1.5, 0},
	}
	for _, tt := range tests {
		c := &Config{PatchSize: tt.patch}
		if got := c.gridPos(tt.in); got != tt.want {
			t.Errorf("patch %d: gridPos(%g) = %g, want %g", tt.patch, tt.in, got, tt.want)
		}
	}
}
