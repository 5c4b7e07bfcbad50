// Package cuda is the CUDA device runtime, loaded at run time without cgo.
//
// It binds the CUDA driver API (libcuda), NVRTC (libnvrtc) and cuBLAS
// (libcublas, with libcublasLt beside it) with github.com/ebitengine/purego,
// so a CGO_ENABLED=0 binary built on a machine without CUDA runs on one that
// has the driver and the libraries, and runs its CPU paths unchanged where
// they are absent. (purego makes the binary load the C library at start-up;
// any Linux machine with a CUDA driver has one.)
//
// Everything lives in the value Open returns: a Runtime holds the loaded
// libraries, the device's primary context and a stream. There is no
// package-level mutable state. libcuda is loaded by Open; NVRTC and cuBLAS
// are loaded at their first use (Runtime.Compile, Runtime.BLAS), once per
// Runtime, safely from several goroutines.
//
// A CUDA context is current per OS thread while a goroutine may move between
// threads, so every call that needs the context locks its goroutine to the
// thread and makes the Runtime's context current first (Runtime.do).
//
// Libraries are searched, in order, under the names their packages install
// (libcuda.so.1, libnvrtc.so.13, …) through the dynamic loader's own search
// (LD_LIBRARY_PATH, /etc/ld.so.cache), then in $CUDA_PATH/lib64,
// $CUDA_HOME/lib64, /usr/local/cuda/lib64, /usr/local/nvidia/lib64,
// /usr/lib/x86_64-linux-gnu, /usr/lib64 and the nvidia/*/lib folders of
// Python wheels (NVIDIA's pip packages, e.g. PyTorch's). Options.LibDirs, or
// the environment variable DCDIT_CUDA_LIB_PATH (a list separated by ':'),
// replaces that whole search with the given folders alone. When a library is
// missing, the error (a *LoadError) names the library, the file names it
// tried and every place it looked.
//
// Kernels written in CUDA C are compiled by NVRTC for the device's
// architecture at their first use and the compiled image is cached on disk
// under os.UserCacheDir()/dcdit/cuda (Options.CacheDir overrides it), keyed
// by the SHA-256 of the source, the options, the architecture and the NVRTC
// version; see Runtime.Compile.
//
// Matrices are row-major everywhere, as in package kernels/gemm: BLAS.Gemm
// computes C = alpha·op(A)·op(B) + beta·C with the same arguments and
// semantics as gemm.Gemm, on device buffers.
package cuda
