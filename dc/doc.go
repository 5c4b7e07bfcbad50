// Package dc is the DC-DiT scaffold, generic over a backbone: the latent
// embedder, conv encoder, spatial-predictability router, elastic chunking
// (tail dropping, packing), Gaussian de-chunking with nearest-2-D plug-back,
// conv decoder, final layer, the ratio loss and FLOPs accounting, matching
// the official DC-DiT (AMD-AGI/DynamicChunkingDiT) number for number.
//
// # Data flow (Model.Forward)
//
// Latents are token-major [B·L, C] in raster order (ToTokens). With c the
// backbone's conditioning (Backbone.Condition on timesteps and labels or
// captions; the scaffold reads its vector [B, CondDim]):
//
//	x_embedder conv 3×3 → encoder conv blocks (E … → D) → RMSNorm   = enc [B·L, D]
//	residual = residual_proj(enc)
//	router(enc) → p (first/last forced to 1), natural mask p > 0.5, confidence c
//	TailDrop(p, natural, ρ) → kept;  chunk → packed rows, offsets, positions, plug-back
//	Backbone.Forward(enc[kept], c, offsets, positions)               = main [ΣM_b, D]
//	ops.DeChunk(main, clamp(p[kept]), σ)                             = o [ΣM_b, D]
//	o[plug-back] · STE(confidence) + residual → decoder blocks (D → E …) → RMSNorm
//	final layer: LayerNorm, adaLN from c, Linear(E → out)            = out [B·L, out]
//
// Six options, none in the official DC-DiT, let a grafted DiT/p start as
// its teacher (package upcycle; Config documents each): cells of p×p
// latents (PatchSize: the scaffold runs on the teacher's patch grid), no
// RMSNorm after the encoder (NoEncoderNorm), a residual relative to the
// cell whose token a cell takes (RelativeResidual: kept cells pass their
// token on unchanged), a head at width D on the decoder's input
// (WideHead: the teacher's final layer), a conditioned linear path from
// a cell's input, relative to its token's cell, to its prediction
// (LatentSkip: the dropped cells' noise), and tokens for the backbone from
// a Linear of the kept cells' own latents instead of enc[kept]
// (TokenEmbedder: the teacher's patch embedding, so that the blocks read
// their teacher's tokens while the encoder trains).
//
// A Chooser (Model.PredictChoosing) replaces the kept cells after tail
// dropping by others of the same count per sample, the router's
// probabilities still weighing the de-chunk; RandomKeep is the random
// router that evaluations compare the learned one with.
//
// Backbone is the only thing the scaffold knows about the transformer; see
// its documentation for exactly what one must provide. Package dc/hnet
// holds DC-DiT's own main network (DiT's blocks and embedders, computed
// by package dit, + RMSNorm); *dit.Model is a Backbone too (without the
// RMSNorm), and so is *zimage.Backbone (caption-conditioned).
// Parameters live in a params.Set arena under the reference state_dict
// names, so reference checkpoints load as they are (hnet.Load).
//
// # Checked against
//
// The golden fixtures dcdit-convblock (one conv block) and dcdit-tiny (the
// whole model: routing, tail drop at three fractions, Lite-CFG, the ratio
// loss and the gradients of a scalar of the output) are the official
// model's tensors: forward within 5e-5 relative, gradients within 5e-4,
// masks and indices exact (TestFixtureConvBlock here; TestFixtureRouting,
// TestFixtureRuns and TestFixtureLiteCFG in dc/hnet).
//
// ForwardFLOPs counts per part with the kept counts the run had, in the
// reference counter's convention: 2 FLOPs per multiply-add, packed
// attention H·Σ M_b²·(4·d_h + 3) from the backbone, de-chunk Σ M_b²·D;
// ResultFLOPs counts what a pass ran, which leaves out conv blocks'
// residual branches that are exactly zero and train nothing.
// Presets holds the paper's DC-DiT-S/B/L/XL, whose parameter counts
// match its tables; AssumedBoundaries and KeptAfterDrop price a model
// from its config alone.
package dc
