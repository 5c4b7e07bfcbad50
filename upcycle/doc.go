// Package upcycle grafts the DC scaffold onto a pretrained backbone as a TOML
// recipe describes, and writes the resulting DC checkpoint.
//
// Graft (or NewGrafted, which also joins the parameters) is the recipes'
// graft: it asks the family registry whether a family adopts the teacher
// (family.Adopter: DC-DiT's main network takes a DiT's blocks) and
// otherwise grafts around a copy of the teacher's own network, as
// GraftTeacher does for any family.Graftable teacher — a Z-Image
// (captions kept whole), a DiT as a backbone of its own kind, a user's —
// under dc.BackbonePrefix. StreamGraft writes the grafted, untrained
// checkpoint of a family that streams its grafts (family.Streamable:
// Z-Image) without loading the model: each backbone tensor goes from the
// input shards to the output's as it is read, so a full-size Z-Image
// (24.6 GB in F32) grafts in 0.64 GB of memory (its scaffold's size). Any other transformer becomes a DC model as
// examples/tinydit shows with a family of its own:
//
//  1. Implement dc.Backbone (family.Backbone) and register a family
//     (package family) whose Spec describes it, so that DC checkpoints of
//     its kind save and load.
//  2. Derive the scaffold's config from the backbone's widths
//     (Scaffold.Config), initialise it (InitScaffold, optionally
//     PredictabilityPrior), build the model with dc.New, and join the two
//     arenas for one optimiser with JoinParams.
//  3. Distil it against the family's family.Teacher (distill.DCObjective)
//     and evaluate it (eval.TeacherOf).
//
// A DiT/p can be grafted so that the DC model starts as the teacher
// itself: scaffold cells of the teacher's patch (Scaffold.PatchSize = p),
// the patch encoder prior without the encoder's RMSNorm (EncoderInit
// "patch", NoEncoderNorm), the teacher's final layer as the wide head
// (WideHead), a relative residual and the latent skip
// (RelativeResidual, LatentSkip; LatentSkipPrior fits the skip's scale to
// the noise schedule). With every cell kept such a model predicts exactly
// what the teacher predicts; what training has to teach is the dropped
// cells. recipes/toy-dit.toml does this.
package upcycle
