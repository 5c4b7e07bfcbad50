// Package tinydit is a model family defined outside dcdit's core
// packages: a small DiT variant, TinyDiT, with RMSNorm pre-norm blocks
// modulated FiLM-style (shift and scale, no gates), a learned linear map
// of each token's grid coordinates instead of a sin-cos table, and DiT's
// timestep and label embedders. It is the worked example of docs/families.md.
//
// The package holds:
//
//   - Config and Backbone: the transformer over packed tokens, a
//     dc.Backbone (what the DC scaffold wraps);
//   - TeacherConfig and Teacher: the fixed-patch model (patch embedding,
//     Backbone, final layer) trained with DDPM and a learned σ (a
//     family.Trainee, which distill.Diffusion trains) and used as the
//     frozen teacher of distillation and evaluation (a family.Teacher);
//   - file.go: the teacher's file (Teacher.Save, LoadTeacher), safetensors
//     marked by the metadata FamilyKey, which the family opens for
//     family.OpenTeacher and so for `dcdit eval --teacher`;
//   - Graft: a DC model around a copy of a teacher's backbone, through
//     package upcycle's scaffold derivation and initialisation;
//   - register.go: the family (kind "tinydit") and its Spec, registered on
//     import, so that package checkpoint saves, loads, validates and costs
//     DC models of this kind, and dcdit's commands (inspect, sample, eval,
//     families) read them in a program that imports this package
//     (cmd/dcdit-tiny).
package tinydit
