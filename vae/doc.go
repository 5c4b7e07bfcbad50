// Package vae is diffusers' AutoencoderKL — the VAE of Stable Diffusion
// 1.x/2.x, DiT and FLUX.1 / Z-Image — in float32 on dcdit's kernels: its
// configuration (Config, read from a diffusers config.json or inferred from
// tensor shapes), loading from a diffusers folder or a single file in the
// diffusers or original LDM naming (Open), the maps between those namings
// (DiffusersToLDM, LDMToDiffusers, ConvertNames), and the encoder and
// decoder (Model.Encode, Model.Decode) with the latent scaling conventions
// (Config.Scale, Config.Unscale).
//
// Tensors are NHWC like the rest of the project: value (b, i, j, c) of a
// batch×H×W×C tensor is at ((b·H+i)·W+j)·C+c. Batches run one sample at a
// time through a few reused activation buffers, and the mid block's
// attention goes through the packed attention kernel, which never holds the
// (h·w)² score matrix, so a 128×128 FLUX latent decodes in a few GiB.
package vae
