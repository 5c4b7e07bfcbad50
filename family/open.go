package family

import (
	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/arch"
)

// MetadataKey is the metadata key under which a file names the family
// that wrote it ("dcdit.family": the kind). A file that carries it is
// opened by that family alone, whatever its tensor names look like.
const MetadataKey = "dcdit.family"

// TeacherOpener is implemented by a family whose pretrained fixed-patch
// checkpoints dcdit opens as teachers (OpenTeacher).
type TeacherOpener interface {
	// Opens reports whether the family opens a checkpoint: detection's
	// report on it (loaders/arch: the built-in architectures) and its
	// metadata (where a family of one's own marks its files).
	Opens(c Candidate) bool
	// OpenTeacher loads the checkpoint at path, frozen, and returns it
	// with the warnings loading it raised.
	OpenTeacher(path string, opts OpenOptions) (Teacher, []string, error)
}

// Candidate is what OpenTeacher knows of a checkpoint before a family
// opens it.
type Candidate struct {
	Path     string
	Report   *arch.Report
	Metadata map[string]string
}

// OpenOptions are what opening a teacher may need beyond the file.
type OpenOptions struct {
	// NumHeads is the attention head count, for a file that does not
	// store it (0: the file's or its config's).
	NumHeads int
	// KeepBF16 keeps matrices the file stores in BF16 in BF16, for a
	// teacher that only predicts (a family may ignore it).
	KeepBF16 bool
	// Config is a config.json object (the diffusers keys) supplying what
	// a file's shapes do not tell, in place of the model folder's own
	// (Z-Image: axes_dims, rope_theta, t_scale); nil: the folder's. A
	// family without such a config ignores it.
	Config map[string]any
	// Student is the description of the DC model the teacher is measured
	// against, or nil: a family reads what its teacher shares with it
	// (Z-Image: the caption length its FLOPs are counted for).
	Student Spec
	// CaptionLen is the caption length a caption-conditioned teacher's
	// FLOPs count, and a backbone grafted from it, when there is no
	// Student to read it from (0: the family's typical caption).
	CaptionLen int
}

// OpenTeacher opens a pretrained checkpoint (a file or a model folder,
// any layout loaders reads) as a frozen teacher of the family that opens
// its detected architecture.
func OpenTeacher(path string, opts OpenOptions) (Teacher, []string, error) {
	ck, err := loaders.Open(path)
	if err != nil {
		return nil, nil, err
	}
	c := CandidateOf(path, ck, opts)
	ck.Close()
	_, opener, err := Opener(c)
	if err != nil {
		return nil, nil, err
	}
	return opener.OpenTeacher(path, opts)
}
