package shapes

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/datasets"
)

// Captions say what the sample shows: its class and foreground colour
// always, its size, background and position as the variant asks, each
// word one of the vocabulary's, and different variants give different
// lengths.
func TestCaption(t *testing.T) {
	g, err := New(DefaultSize, 3)
	if err != nil {
		t.Fatal(err)
	}
	lengths := map[int]bool{}
	positions := map[string]bool{}
	for i := range 200 {
		s := g.Sample(i)
		for v := range CaptionVariants {
			words, err := Caption(s, v)
			if err != nil {
				t.Fatal(err)
			}
			lengths[len(words)] = true
			if _, err := Tokens(words); err != nil {
				t.Fatal(err)
			}
			text := " " + strings.Join(words, " ") + " "
			if !strings.Contains(text, " "+Palette[s.Foreground]+" "+Classes[s.Label]+" ") {
				t.Fatalf("sample %d variant %d: %q does not say %s %s", i, v, text, Palette[s.Foreground], Classes[s.Label])
			}
			if bg := strings.Contains(text, " on "+Palette[s.Background]+" "); bg != (v&captionBackground != 0) {
				t.Fatalf("sample %d variant %d: %q: background said %v", i, v, text, bg)
			}
			if v == CaptionVariants-1 {
				positions[words[len(words)-1]] = true
				size := words[1]
				if want := 100*s.Radius < 35*s.Side; (size == "small") != want {
					t.Fatalf("sample %d: radius %d of side %d called %s", i, s.Radius, s.Side, size)
				}
			}
		}
	}
	if len(lengths) != 5 {
		t.Fatalf("caption lengths %v, want 3 to 7 words", lengths)
	}
	for _, p := range []string{"left", "right", "top", "bottom", "centre"} {
		if !positions[p] {
			t.Errorf("no caption of 200 samples says %q (%v)", p, positions)
		}
	}
	if _, err := Caption(g.Sample(0), CaptionVariants); err == nil {
		t.Fatal("variant out of range accepted")
	}
}

// The embedding table is fixed by (dim, seed), has unit-variance rows
// that differ between words, and Embed lays a caption's rows out in
// order, refusing a word outside the vocabulary.
func TestEmbeddingTable(t *testing.T) {
	const dim = 16
	a, b := EmbeddingTable(dim, 7), EmbeddingTable(dim, 7)
	if !slices.Equal(a, b) || slices.Equal(a, EmbeddingTable(dim, 8)) {
		t.Fatal("the table is not a function of its seed")
	}
	var ss float64
	for _, v := range a {
		ss += float64(v) * float64(v)
		if !(math.Abs(float64(v)) < 1.7321) {
			t.Fatalf("value %g outside [−√3, √3)", v)
		}
	}
	if rms := math.Sqrt(ss / float64(len(a))); !(rms > 0.85 && rms < 1.15) {
		t.Fatalf("table RMS %g, want about 1", rms)
	}
	feats, err := Embed([]string{"a", "red", "disc"}, a, dim)
	if err != nil {
		t.Fatal(err)
	}
	toks, _ := Tokens([]string{"a", "red", "disc"})
	for i, tk := range toks {
		if !slices.Equal(feats[i*dim:(i+1)*dim], a[tk*dim:(tk+1)*dim]) {
			t.Fatalf("word %d is not its table row", i)
		}
	}
	if slices.Equal(a[toks[1]*dim:(toks[1]+1)*dim], a[toks[2]*dim:(toks[2]+1)*dim]) {
		t.Fatal("two words share a row")
	}
	if _, err := Embed([]string{"a", "purple", "disc"}, a, dim); err == nil || !strings.Contains(err.Error(), `"purple"`) {
		t.Fatalf("err = %v, want the unknown word named", err)
	}
}

// Colours reads back every data sample's foreground and background, and
// says −1 for a flat latent's foreground.
func TestColours(t *testing.T) {
	g, err := New(DefaultSize, 11)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		s := g.Sample(i)
		if fg, bg := Colours(s.Latent, g.Size); fg != s.Foreground || bg != s.Background {
			t.Fatalf("sample %d: read %s on %s, drawn %s on %s", i, name(fg), name(bg), Palette[s.Foreground], Palette[s.Background])
		}
	}
	flat := make([]float32, Channels*g.Size*g.Size)
	for c := range Channels {
		for l := range g.Size * g.Size {
			flat[c*g.Size*g.Size+l] = paletteLatent[3][c]
		}
	}
	if fg, bg := Colours(flat, g.Size); fg != -1 || bg != 3 {
		t.Fatalf("flat green latent: fg %d, bg %d; want −1, 3", fg, bg)
	}
}

func name(k int) string {
	if k < 0 {
		return "none"
	}
	return Palette[k]
}

// A captioned set writes and reads back with its captions, each the
// caption of its sample, of several lengths.
func TestCaptionedSetRoundTrip(t *testing.T) {
	g, err := New(DefaultSize, 5)
	if err != nil {
		t.Fatal(err)
	}
	set, err := g.CaptionedSet(40)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "captioned.safetensors")
	if err := datasets.Write(path, set); err != nil {
		t.Fatal(err)
	}
	back, err := datasets.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.Vocabulary, Vocabulary) || len(back.Captions) != 40 {
		t.Fatalf("read %d captions over %d words", len(back.Captions), len(back.Vocabulary))
	}
	lengths := map[int]bool{}
	for i, c := range back.Captions {
		if !slices.Equal(c, set.Captions[i]) {
			t.Fatalf("caption %d: read %v, wrote %v", i, c, set.Captions[i])
		}
		words := make([]string, len(c))
		for j, tk := range c {
			words[j] = Vocabulary[tk]
		}
		s := g.Sample(i)
		if !strings.Contains(strings.Join(words, " "), Palette[s.Foreground]+" "+Classes[s.Label]) {
			t.Fatalf("caption %d %q does not describe its sample", i, words)
		}
		lengths[len(c)] = true
	}
	if len(lengths) < 3 {
		t.Fatalf("caption lengths %v: want several", lengths)
	}
	if plain, _ := g.Set(4); plain.Captions != nil {
		t.Fatal("a plain set has captions")
	}
}

// labelClassifier classifies by looking the latent up among known ones:
// a perfect classifier of the data, so that the test measures the
// captions and colours alone.
type labelClassifier map[string]int

func (l labelClassifier) Classify(latents []float32, n, c, h, w int) ([]int, error) {
	out := make([]int, n)
	for i := range n {
		out[i] = l[fmt.Sprint(latents[i*c*h*w:(i+1)*c*h*w])]
	}
	return out, nil
}

// Data follows its own captions; shifted by one, the captions are
// followed about as often as chance allows.
func TestPromptFollowing(t *testing.T) {
	g, err := New(DefaultSize, 9)
	if err != nil {
		t.Fatal(err)
	}
	set, err := g.CaptionedSet(200)
	if err != nil {
		t.Fatal(err)
	}
	per := Channels * g.Size * g.Size
	cls := labelClassifier{}
	for i := range set.N {
		cls[fmt.Sprint(set.Latents[i*per:(i+1)*per])] = set.Labels[i]
	}
	own, err := PromptFollowing(cls, set.Latents, set.N, g.Size, set.Captions)
	if err != nil {
		t.Fatal(err)
	}
	shifted, err := PromptFollowing(cls, set.Latents, set.N, g.Size, append(set.Captions[1:], set.Captions[0]))
	if err != nil {
		t.Fatal(err)
	}
	if own != 1 || !(shifted < 0.1) {
		t.Fatalf("prompt following %.3f on the data's own captions (want 1), %.3f shifted (want chance)", own, shifted)
	}
	if _, err := PromptFollowing(cls, set.Latents, set.N, g.Size, set.Captions[1:]); err == nil {
		t.Fatal("a caption short accepted")
	}
}

// A recorded caption table rebuilds the table; a record of another
// vocabulary is refused; a prompt is its words' rows, the empty prompt
// one zero row.
func TestCaptionTable(t *testing.T) {
	ct := NewCaptionTable(4, 9)
	table, err := ct.Table()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(table, EmbeddingTable(4, 9)) {
		t.Error("the rebuilt table differs from EmbeddingTable(4, 9)")
	}
	other := ct
	other.Vocabulary = append(slices.Clone(ct.Vocabulary), "purple")
	if _, err := other.Table(); err == nil || !strings.Contains(err.Error(), "vocabulary") {
		t.Errorf("another vocabulary: %v, want a refusal", err)
	}
	f, err := Prompt("  red   disc ", table, 4)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Embed([]string{"red", "disc"}, table, 4)
	if !slices.Equal(f, want) {
		t.Errorf("Prompt = %v, want %v", f, want)
	}
	if empty, _ := Prompt("", table, 4); !slices.Equal(empty, make([]float32, 4)) {
		t.Errorf("the empty prompt = %v, want one zero row", empty)
	}
	if _, err := Prompt("a purple disc", table, 4); err == nil || !strings.Contains(err.Error(), `"purple"`) {
		t.Errorf("an unknown word: %v", err)
	}
}

func TestCaptionFeatures(t *testing.T) {
	table := []float32{1, 2, 3, 4, 5, 6} // 3 words × 2
	got, err := CaptionFeatures([][]int{{2, 0}, {}, {1}}, table, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]float32{{5, 6, 1, 2}, {0, 0}, {3, 4}}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("caption %d: %v, want %v", i, got[i], want[i])
		}
	}
	ins, err := CaptionInputs([][]int{{2, 0}, {}, {1}}, table, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i, wantLen := range []int{2, 1, 1} {
		if ins[i].Len != wantLen || !slices.Equal(ins[i].Features, want[i]) {
			t.Errorf("caption input %d: %+v, want %v valid rows of %v", i, ins[i], wantLen, want[i])
		}
	}
	for _, c := range []struct {
		caps  [][]int
		table []float32
		err   string
	}{
		{[][]int{{3}}, table, "word 3, outside the table's 3"},
		{[][]int{{0}}, table[:5], "table of 5 values is not rows of 2"},
	} {
		if _, err := CaptionFeatures(c.caps, c.table, 2); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("CaptionFeatures(%v) = %v, want an error containing %q", c.caps, err, c.err)
		}
	}
}
