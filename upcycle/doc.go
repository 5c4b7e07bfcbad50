// Package upcycle grafts the DC scaffold onto a pretrained backbone as a TOML
// recipe describes, and writes the resulting DC checkpoint.
//
// A DiT is grafted into DC-DiT's own main network by Graft (or
// NewGrafted, which also joins the parameters); any family's teacher that
// is a family.Graftable — a Z-Image (captions kept whole), a DiT as a
// backbone of its own kind, a user's — by GraftTeacher, around a copy of
// its network under dc.BackbonePrefix. StreamGraftZImage writes the grafted,
// untrained Z-Image checkpoint without loading the model: each backbone
// tensor goes from the input shards to the output's as it is read, so a
// full-size Z-Image (24.6 GB in F32) grafts in 0.64 GB of memory (its
// scaffold's size). Any other transformer becomes a DC model as
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
// (WideHead; WideHeadPrior), a relative residual and the latent skip
// (RelativeResidual, LatentSkip; LatentSkipPrior fits the skip's scale to
// the noise schedule). With every cell kept such a model predicts exactly
// what the teacher predicts; what training has to teach is the dropped
// cells. recipes/toy-dit.toml does this.
package upcycle
