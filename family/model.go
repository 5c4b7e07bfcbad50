package family

// Initializer is implemented by a family whose fixed-patch models dcdit
// builds with fresh weights from a config: a teacher trained from scratch
// (recipes without a base) and the benchmarks' models.
type Initializer interface {
	// InitModel returns a model of config cfg (a pointer to the family's
	// config type, as Base.Config and Preset.Base.Config hold it) with the
	// family's initialisation drawn from opts.Seed. It validates cfg.
	InitModel(cfg any, opts InitOptions) (Model, error)
}

// InitOptions are what an initialisation draws from besides the config.
type InitOptions struct {
	// Seed seeds every random draw: the same seed gives the same weights.
	Seed uint64
	// ClassStd is the standard deviation of a class-label table's normal
	// initialisation (0: the family's own); a family without labels
	// ignores it.
	ClassStd float64
}

// Model is a family's fixed-patch model that trains: a Teacher (so that
// it samples and is evaluated like a pretrained one) and a Trainee (so
// that it trains on its family's diffusion objective), whose parameters
// a recipe freezes and scales by group.
type Model interface {
	Teacher
	Trainee
	// ParamGroups returns the groups (params.Group*) of one of its
	// parameters, by the name Parameters gives it.
	ParamGroups(name string) []string
}
