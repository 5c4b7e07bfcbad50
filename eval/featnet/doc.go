// Package featnet is the toy domain's stand-in for FID's Inception network:
// a small convolutional classifier over the ten classes of the procedural
// shapes data (package datasets/shapes), trained by the project itself,
// whose penultimate features give a Fréchet distance (FD) between
// generated samples and real data, and whose predictions give class
// accuracy (does a sample drawn for class k look like class k).
//
// One-step ε error hides what sampling amplifies; a distribution-level
// measure does not. FD needs features that separate what the data
// separates (shape), so the network is a classifier trained to ≥ 0.99
// held-out accuracy, with light Gaussian noise on its inputs so that
// slightly imperfect samples are still judged by their shape rather than
// rejected for their texture.
//
// # Architecture
//
// Inputs are latents [n, c, h, w] (c = shapes.Channels, any h, w ≥ 8). The
// network works on token-major grids as the rest of the project does
// (rows = positions, columns = channels) and is built from package ops:
//
//	conv0 3×3 (c → W0) → GroupNorm+SiLU               at h × w
//	2×2 average pool (floor, as PyTorch's AvgPool2d)
//	conv1 3×3 (W0 → W1) → GroupNorm+SiLU              at h/2 × w/2
//	conv2 3×3 (W1 → W2) → GroupNorm+SiLU
//	2×2 average pool
//	conv3 3×3 (W2 → W3) → GroupNorm+SiLU              at h/4 × w/4
//	global mean over positions → linear (W3 → F): the features
//	SiLU → linear (F → classes): the logits
//
// Only one conv runs at full resolution: at 16×16 it and its GroupNorm
// would otherwise be most of the cost, and shapes of radius ≥ 4.8 cells
// are still resolved at half resolution.
//
// The features are the linear layer's output before its activation (more
// nearly Gaussian than a rectified one, which is what the Fréchet formula
// assumes).
//
// # Determinism
//
// Training draws everything random (initial weights, sample order, noise)
// from seeded PCG streams through PCG's Uint64 alone, and the kernels and
// ops.Backward are deterministic, so a seed gives the same weights bit for
// bit whatever the machine's load or GOMAXPROCS.
//
// # Files
//
// Weights are safetensors (F32) with the architecture, the data generator
// version and the training provenance in the metadata; Load refuses a file
// trained on another generator version than shapes.Version.
package featnet
