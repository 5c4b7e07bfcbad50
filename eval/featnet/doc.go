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
// # What FD sees
//
// Measured with the bundled network, 1000 class-balanced real samples
// against 1000 others (FD 0.08 between two real sets): Gaussian noise of
// σ 0.1, 0.2, 0.4 on the latents gives 0.10, 0.44, 6.7; a 3×3 box blur
// 71; a tenth of the samples drawn from the wrong class 11; flat colour
// with no shape 576. Multiplying every latent by 0.8, 1.2 or 1.5 changes
// nothing measurable (0.07–0.09): GroupNorm divides out each sample's
// overall scale, so uniform over- or under-saturation is invisible.
// Teaching the network colour as well (background and foreground palette
// heads, with or without the first GroupNorm) cost 5–27 points of shape
// accuracy in the same training budget, so it was left out; judge colour
// fidelity by other means (the sample grid, latent statistics).
//
// The features cluster tightly by class, so compare generated samples
// with class-balanced real data of the same count (RealData).
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
