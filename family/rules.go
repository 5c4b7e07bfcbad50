package family

// ModelRules is implemented by a Configurer whose recipes' [model] table
// has keys, defaults or constraints of its own beyond the sizes every
// family shares (kind, depth, hidden_size, num_heads, patch_size,
// in_channels, input_size). The recipe checks apply its answers to any
// kind alike. A Configurer without it is taken to read every key of the
// table, to train with DDPM on class labels, and to refuse nothing beyond
// the shared sizes.
type ModelRules interface {
	// ModelKeys are the [model] keys of its own the family reads (TOML
	// names without the table: "caption_dim"), each with the value a
	// recipe that leaves it out takes. A key of the table that no listed
	// key names is refused when written.
	ModelKeys() []ModelKey
	// ModelPreset is the sizes a model.preset of this name gives (Depth,
	// Width, Heads and Patch; keys written beside it override them);
	// false for a name the family does not know, or a family without
	// presets.
	ModelPreset(name string) (ModelSettings, bool)
	// ModelTraining is how the family's models train from scratch.
	ModelTraining() ModelTraining
	// CheckModel reports what the family refuses in a recipe that sizes
	// one of its models, each problem naming the recipe key it is about;
	// the shared sizes are checked already (positive, heads dividing the
	// width, the input a multiple of the patch).
	CheckModel(r ModelRecipe) []RecipeProblem
}

// ModelKey is one [model] key a family reads, with its default.
type ModelKey struct {
	// Key is its TOML name inside [model].
	Key string
	// Default is its value when the recipe leaves it out, of the key's
	// type: an int, a float64, a bool or a string.
	Default any
}

// ModelTraining is what a family's models trained from scratch train
// with, which a recipe's defaults follow and its checks hold it to.
type ModelTraining struct {
	// Process is the diffusion process (ProcessDDPM, ProcessFlowMatching):
	// diffusion.process defaults to it and must equal it.
	Process string
	// Captions is set for a family conditioned on captions rather than
	// class labels: data.captions defaults to true and must be true for
	// procedural data.
	Captions bool
}

// ModelRecipe is what ModelRules.CheckModel sees of a recipe that sizes
// one of the family's models, already defaulted.
type ModelRecipe struct {
	// Kind is model.kind; Preset model.preset ("" for none).
	Kind, Preset string
	// Settings are the [model] sizes; ClassStd is
	// model.class_embedding_std (InitOptions.ClassStd).
	Settings ModelSettings
	ClassStd float64
	// Scaffold is set when the recipe wraps the model in a DC scaffold.
	Scaffold bool
	// StageKinds are the stages' kinds in order ("train", "finetune",
	// "distill").
	StageKinds []string
	// SaveDType is save.dtype ("f32", "bf16", "f16").
	SaveDType string
	// Written says whether the recipe file writes a key, by its display
	// name ("model.mlp_ratio", "stage[0].loss"), rather than taking its
	// default.
	Written func(key string) bool
}

// RecipeProblem is one thing a family refuses in a recipe, at a display
// key ("model.num_heads", "stage[1].kind", "scaffold"). With Expected set
// it reads "found <Found>, expected <Expected>", Found written as the
// recipe writes values; otherwise Msg is the whole message.
type RecipeProblem struct {
	Key      string
	Found    any
	Expected string
	Msg      string
}
