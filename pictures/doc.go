// Package pictures turns what the models draw into pictures and pictures
// into numbers and data: it decodes dcdit latents files through a VAE
// (package vae) into 8-bit images, reads the image sets that FID is
// computed on (image folders, .npz sample batches, latents decoded on the
// fly) one batch at a time, streams them through the FID Inception network
// into Fréchet statistics, and encodes folders of real images into latent
// data sets (package datasets) that training reads.
//
// Latent conventions: a latents file holds the model's scaled latents
// [N, C, H, W]; Decode undoes the scaling with the VAE's own
// scaling_factor and shift_factor (z/scaling + shift: DiT's SD VAE
// 0.18215, no shift; Z-Image's FLUX.1 VAE 0.3611 and 0.1159) unless the
// caller overrides them, and Encode applies (z − shift)·scaling.
package pictures
