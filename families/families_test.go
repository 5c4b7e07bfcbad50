package families_test

import (
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/dcdit/dcdit/families"
	"github.com/dcdit/dcdit/family"
)

func TestKinds(t *testing.T) {
	if got := strings.Join(family.Kinds(), ","); got != "dit,hnet,zimage" {
		t.Errorf("registered kinds %s, want dit,hnet,zimage", got)
	}
}

// TestOpenTeacher opens the bundled checkpoints of every naming as
// teachers through the registry and checks what each family reports.
func TestOpenTeacher(t *testing.T) {
	dir := filepath.Join("..", "testdata")
	for _, tt := range []struct {
		path     string
		process  string
		captions bool
	}{
		{"checkpoints/dit-original.safetensors", family.ProcessDDPM, false},
		{"checkpoints/dit-original.pt", family.ProcessDDPM, false},
		{"teacher/model.safetensors", family.ProcessDDPM, false},
		{"checkpoints/zimage-diffusers", family.ProcessFlowMatching, true},
		{"zimage-teacher/model", family.ProcessFlowMatching, true},
	} {
		t.Run(tt.path, func(t *testing.T) {
			teacher, _, err := family.OpenTeacher(filepath.Join(dir, tt.path), family.OpenOptions{NumHeads: 16})
			if err != nil {
				t.Fatal(err)
			}
			on := teacher.Conditioning()
			if teacher.Process() != tt.process || (on.CaptionWidth > 0) != tt.captions || (on.Classes > 0) == tt.captions {
				t.Errorf("process %s, conditioning %+v; want %s, captions %v", teacher.Process(), on, tt.process, tt.captions)
			}
			if teacher.Parameters().RequiresGrad() {
				t.Error("an opened teacher is not frozen")
			}
		})
	}
	if _, _, err := family.OpenTeacher(filepath.Join(dir, "checkpoints", "no-such-file"), family.OpenOptions{}); err == nil {
		t.Error("a missing file opened")
	}
}
