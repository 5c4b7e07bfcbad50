package shapes

import "fmt"

// Classifier names each of n latents' class: the feature network's job in
// a prompt-following measure.
type Classifier interface {
	Classify(latents []float32, n, c, h, w int) ([]int, error)
}

// PromptFollowing is the share of n latents [n, Channels, size, size]
// that show what their captions (Vocabulary indices, as Caption and
// Tokens make them) ask for: cls names the caption's class and Colours
// reads the caption's foreground colour (the colour word before the class
// word) — the role DPG-Bench plays for a text-to-image model.
func PromptFollowing(cls Classifier, latents []float32, n, size int, captions [][]int) (float64, error) {
	if len(captions) != n || len(latents) != n*Channels*size*size {
		return 0, fmt.Errorf("shapes: prompt following: %d captions and %d latent values for %d samples of %d×%d×%d", len(captions), len(latents), n, Channels, size, size)
	}
	wantClass, wantColour := make([]int, n), make([]int, n)
	for i, c := range captions {
		wantClass[i], wantColour[i] = -1, -1
		for j, t := range c {
			if t < 0 || t >= len(Vocabulary) {
				return 0, fmt.Errorf("shapes: caption %d, word %d: index %d outside the vocabulary of %d words", i, j, t, len(Vocabulary))
			}
			if k := classIndex(Vocabulary[t]); k >= 0 && j > 0 {
				wantClass[i], wantColour[i] = k, paletteIndex(Vocabulary[c[j-1]])
				break
			}
		}
		if wantClass[i] < 0 || wantColour[i] < 0 {
			return 0, fmt.Errorf("shapes: caption %d names no colour before a class", i)
		}
	}
	got, err := cls.Classify(latents, n, Channels, size, size)
	if err != nil {
		return 0, err
	}
	per := Channels * size * size
	hits := 0
	for i := range n {
		fg, _ := Colours(latents[i*per:(i+1)*per], size)
		if got[i] == wantClass[i] && fg == wantColour[i] {
			hits++
		}
	}
	return float64(hits) / float64(n), nil
}

func classIndex(w string) int   { return indexOf(Classes, w) }
func paletteIndex(w string) int { return indexOf(Palette, w) }

func indexOf(list []string, w string) int {
	for i, v := range list {
		if v == w {
			return i
		}
	}
	return -1
}
