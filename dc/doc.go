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
// Five options, none in the official DC-DiT, let a grafted DiT/p start as
// its teacher (package upcycle; Config documents each): cells of p×p
// latents (PatchSize: the scaffold runs on the teacher's patch grid), no
// RMSNorm after the encoder (NoEncoderNorm), a residual relative to the
// cell whose token a cell takes (RelativeResidual: kept cells pass their
// token on unchanged), a head at width D on the decoder's input
// (WideHead: the teacher's final layer) and a conditioned linear path from
// a cell's input, relative to its token's cell, to its prediction
// (LatentSkip: the dropped cells' noise).
//
// Backbone is the only thing the scaffold knows about the transformer; see
// its documentation for exactly what one must provide. Package dc/hnet
// holds DC-DiT's own main network (DiT's blocks and embedders, computed
// by package dit, + RMSNorm); *dit.Model is a Backbone too (without the
// RMSNorm), and so is *zimage.Backbone (caption-conditioned).
// Parameters live in a params.Set arena under the reference state_dict
// names, so reference checkpoints load as they are (hnet.Load).
//
// # Status (developer note)
//
// Done and exact on the golden fixtures (error = max|got−ref| / max|ref|,
// forward tolerance 5e-5, gradients 5e-4, masks and indices exact):
//
//   - dcdit-convblock (TestFixtureConvBlock): out 4.8e-7, temb 1.7e-7,
//     conv1_out 7.3e-7, S 2.3e-7; gradients x 5.8e-7, cond 6.7e-7, all
//     listed parameters ≤ 9.6e-7.
//   - dcdit-tiny (dc/hnet TestFixtureRouting, TestFixtureRuns,
//     TestFixtureLiteCFG): c 2.2e-6, enc_out_b0_head 6.1e-7, router_logit
//     7.1e-7, p 1.5e-6, selected_probs 1.5e-6; boundary_mask_natural,
//     num_natural exact; ratio_loss, ratio_loss_none, ratio_loss_rbs2 0;
//     ratio_only gradients ≤ 4.2e-7. For each of drop0, drop1, drop2 and
//     lite: boundary_mask, num_kept, next_mask, chunk_sort_indices (valid
//     part), plug_back_idx exact; dechunk_packed ≤ 1.7e-6; out ≤ 1.7e-6;
//     drop1.main_out_b0 4.8e-7. drop0 and drop1 gradients of
//     S = Σ out·R + 0.03·ratio_loss: S within 2.2e-4 absolute (tolerance
//     0.31), grad.x ≤ 1.6e-6, every listed parameter ≤ 3.2e-6. litecfg:
//     num_kept exact, out 1.2e-6.
//   - New ops (package ops, finite-difference and float32-vs-float64
//     checked): DeChunk (kernels.DeChunkForward/Backward, GEMM per sample)
//     and STE.
//   - ForwardFLOPs per part with the actual kept counts (2 FLOPs per
//     multiply-add, packed attention H·Σ M_b²·(4·d_h + 3) from the backbone,
//     de-chunk Σ M_b²·D); the main network's count agrees with dit's.
//   - DC checkpoints (package dc/checkpoint: official state_dict names,
//     config JSON in __metadata__["dcdit.config"], per-tensor CRC-32C;
//     atomic Save, strict Load), `dcdit inspect` on them with FLOPs per ρ,
//     and `dcdit sample --rho/--rho-uncond` (Lite-CFG) with kept tokens per
//     step and FLOPs per image.
//   - Presets (Presets: the paper's DC-DiT-S/B/L/XL, whose parameter
//     counts match its tables) and `dcdit flops` for them, for DiT presets
//     and for checkpoints (DiT, DC, official state dicts), at an assumed
//     boundary ratio (AssumedBoundaries, KeptAfterDrop), with CFG and
//     Lite-CFG. DiT baselines at 256 px: 3.03 / 11.51 / 40.37 / 59.33
//     TFLOPs per image over 250 steps, the paper's printed figures with
//     the first step excluded as its counter does (59.10 for XL/2).
//   - `dcdit bench` cases dcdit_s_forward_rho{0,0.3,0.6} and
//     dcdit_s_train_step_rho{0,0.3,0.6} with gflop (kept counts of the
//     run). Measured round-robin against dit_s2_* on the shared 2-core
//     machine (best of 8 / 4 rounds, 2026-11-23): forward 1.25 / 0.91 /
//     0.58 of DiT-S/2's time, training step 1.24 / 0.92 / 0.62, for FLOP
//     ratios 1.28 / 0.96 / 0.65: time per FLOP within 8% across ρ and
//     below DiT-S/2's. The scaffold's 3×3 convolutions run by Winograd
//     F(2×2, 3×3) (forward, dx and dW; kernels/winograd.go) with weights
//     packed once (gemm.GemmPackedB), and GroupNorm+SiLU is one fused op:
//     the scaffold's forward costs about half of what it did.
//
// Left (issue 5): the forward goals at ρ = 0 and 0.3 (1.08 and 0.83 of
// DiT-S/2): the main network alone costs DiT-S/2's time at ρ = 0, so the
// scaffold (~25% of DiT-S/2's forward) would have to be 3× faster again;
// sharded DC checkpoints on save (Load already reads shards), and a DC
// checkpoint kind for a *dit.Model backbone (docs/zimage.md, "Backbone
// seam: step 1").
package dc
