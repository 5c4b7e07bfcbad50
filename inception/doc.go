// Package inception holds the FID Inception v3 network of pytorch-fid (the
// port of TensorFlow's inception-2015-12-05 graph that FID, sFID-style
// pooled features and the Inception Score are computed with), evaluated in
// float32 NHWC on the CPU.
//
// Load reads pytorch-fid's pt_inception-2015-12-05-6726825d.pth (or a
// safetensors file with the same tensor names) and folds every BatchNorm
// into its convolution. A Net maps images in [0, 1] (or uint8, as
// torchvision's ToTensor reads them) of any size to the 2048-d pool3
// features, and on request to the 64/192/768-d pooled features of the
// earlier blocks, intermediate activations and the 1008-class logits with
// and without the head's bias.
//
// The input is resized to 299×299 exactly as pytorch-fid does it
// (F.interpolate bilinear, align_corners=False, no antialiasing), bit for
// bit with PyTorch's CPU kernel, then mapped to [−1, 1] by 2x − 1.
package inception
