// dagrun built-in kernels for the CUDA backend (cudart). Their semantics are
// the contract in dag/builtins.go; every result must be bit-identical to the
// simulator's (executor/sim). fill and copy run as driver memset/memcpy calls
// on device memory; the kernels below cover the rest (and fill on pinned host
// memory).
//
// Build (on the GPU machine, which has nvcc; the command is also in
// README.md beside this file):
//   nvcc -ptx -arch=compute_75 -fmad=false -ftz=false -O3 -o builtins.ptx builtins.cu
// compute_75 is the oldest architecture nvcc 13 targets, so the PTX JITs on
// Turing and newer (the H200 is sm_90).
//
// Words are 32-bit; all sizes and indices are in words unless they say bytes.
// Every kernel uses a grid-stride loop, so any grid (one block too) is right.

#include <stdint.h>

typedef unsigned int u32;
typedef unsigned long long u64;

#define GRID_STRIDE(i, n) \
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (u64)blockDim.x * gridDim.x)

__device__ __forceinline__ u32 mix32(u32 x) {  // MurmurHash3 fmix32, as dag.Mix32
  x ^= x >> 16;
  x *= 0x85ebca6bu;
  x ^= x >> 13;
  x *= 0xc2b2ae35u;
  x ^= x >> 16;
  return x;
}

__device__ __forceinline__ u64 globaltimer() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// spin_until keeps the calling thread busy until the global timer reaches
// start+ns (ns in nanoseconds).
__device__ __forceinline__ void spin_until(u64 start, u64 ns) {
  while (globaltimer() - start < ns) {
  }
}

extern "C" {

// dagrun_fill: dst[i] = v for i < n.
__global__ void dagrun_fill(u32 *dst, u64 n, u32 v) {
  GRID_STRIDE(i, n) { dst[i] = v; }
}

// NaNs: the simulator runs Go float32 arithmetic, which on amd64 (SSE)
// returns the first NaN operand, quieted, and for an invalid operation
// (0 × inf, inf − inf) the x86 default NaN 0xffc00000. NVIDIA GPUs return
// the canonical NaN 0x7fffffff instead, so fmul_go/fadd_go emulate the x86
// result to stay bit-identical on random input data (about 1 word in 256 is
// a NaN). Operands are in the simulator's source order (a × x, then ax + y).
// Denormals are kept on both sides (nvcc -ftz=false; Go never flushes).
__device__ __forceinline__ float quiet(float v) { return __uint_as_float(__float_as_uint(v) | 0x00400000u); }
__device__ __forceinline__ bool is_nan(float v) { return (__float_as_uint(v) & 0x7fffffffu) > 0x7f800000u; }

__device__ __forceinline__ float fmul_go(float a, float b) {
  if (is_nan(a)) return quiet(a);
  if (is_nan(b)) return quiet(b);
  float r = __fmul_rn(a, b);
  return is_nan(r) ? __uint_as_float(0xffc00000u) : r;
}

__device__ __forceinline__ float fadd_go(float a, float b) {
  if (is_nan(a)) return quiet(a);
  if (is_nan(b)) return quiet(b);
  float r = __fadd_rn(a, b);
  return is_nan(r) ? __uint_as_float(0xffc00000u) : r;
}

// dagrun_scale: y[i] = float32(a * x[i]), round to nearest, no contraction.
__global__ void dagrun_scale(float *y, const float *x, u64 n, float a) {
  GRID_STRIDE(i, n) { y[i] = fmul_go(a, x[i]); }
}

// dagrun_axpy: y[i] = float32(float32(a * x[i]) + y[i]); __fmul_rn/__fadd_rn
// keep the two roundings (no FMA).
__global__ void dagrun_axpy(float *y, const float *x, u64 n, float a) {
  GRID_STRIDE(i, n) { y[i] = fadd_go(fmul_go(a, x[i]), y[i]); }
}

// MixArgs is passed by value (one kernel parameter, 704 bytes). The host
// fills it in cudart/launch.go (mixLaunch); keep the two layouts identical.
#define MIX_MAX_WRITES 8
#define MIX_MAX_READS 32
struct MixArgs {
  u64 out[MIX_MAX_WRITES];   // word pointers of the write ranges
  u64 nout[MIX_MAX_WRITES];  // words written of each write (min(range, max_words))
  u32 seed[MIX_MAX_WRITES];  // dag.MixSeed(stage, w)
  u32 nw, nr;                // number of writes, reads
  u64 in[MIX_MAX_READS];     // word pointers of the read ranges
  u64 nin[MIX_MAX_READS];    // words of each read range (n_k)
  u64 maxn;                  // max over w of nout[w]
  u64 spin_ns;               // also stay busy this long (0: no spin)
  u64 stamp;                 // 0, or where block 0 stores its start and end %globaltimer (2 × u64, ns)
};

// dagrun_mix: for each write w and word i < nout[w]:
//   h = mix32(seed[w] ^ i); for each read k: h = mix32(h ^ in_k[i mod n_k]);
//   out_w[i] = h.
// All reads of index i happen before its writes in the same thread, so an
// in-place read (identical range) sees the old word. With spin_ns, thread 0
// of every block then stays busy until spin_ns after its block started.
// With stamp, block 0 stores the global timer at its start and, once all its
// threads are done, at its end (the backend's kernel timestamps).
__global__ void dagrun_mix(const MixArgs a) {
  u64 start = (a.spin_ns || a.stamp) ? globaltimer() : 0;
  GRID_STRIDE(i, a.maxn) {
    u32 h[MIX_MAX_WRITES];
    for (u32 w = 0; w < a.nw; w++) h[w] = mix32(a.seed[w] ^ (u32)i);
    for (u32 k = 0; k < a.nr; k++) {
      u32 v = ((const u32 *)a.in[k])[i % a.nin[k]];
      for (u32 w = 0; w < a.nw; w++) h[w] = mix32(h[w] ^ v);
    }
    for (u32 w = 0; w < a.nw; w++)
      if (i < a.nout[w]) ((u32 *)a.out[w])[i] = h[w];
  }
  if (a.spin_ns && threadIdx.x == 0) spin_until(start, a.spin_ns);
  if (a.stamp) {
    __syncthreads();
    if (blockIdx.x == 0 && threadIdx.x == 0) {
      u64 *t = (u64 *)a.stamp;
      t[0] = start;
      t[1] = globaltimer();
    }
  }
}

// dagrun_spin: one thread stays busy for ns nanoseconds of the global timer;
// other threads exit at once.
__global__ void dagrun_spin(u64 ns) {
  if (blockIdx.x == 0 && threadIdx.x == 0) spin_until(globaltimer(), ns);
}

// dagrun_checksum: out[0] += sum of in[i], out[1] ^= xor of
// mix32(in[i] ^ (i * 0x9E3779B9)) (both wrapping). The host zeroes out[0..1]
// on the same stream first. One atomic per warp after a shuffle reduction.
__global__ void dagrun_checksum(u32 *out, const u32 *in, u64 n) {
  u32 sum = 0, x = 0;
  GRID_STRIDE(i, n) {
    u32 v = in[i];
    sum += v;
    x ^= mix32(v ^ ((u32)i * 0x9E3779B9u));
  }
  for (int d = 16; d > 0; d >>= 1) {
    sum += __shfl_xor_sync(0xffffffffu, sum, d);
    x ^= __shfl_xor_sync(0xffffffffu, x, d);
  }
  if ((threadIdx.x & 31) == 0) {
    atomicAdd(&out[0], sum);
    atomicXor(&out[1], x);
  }
}

// dagrun_timer_probe: test helper. Thread 0 reads the global timer until it
// has seen n changes and stores each new value, to find its tick.
__global__ void dagrun_timer_probe(u64 *out, u32 n) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  u64 last = globaltimer();
  out[0] = last;
  for (u32 k = 1; k < n;) {
    u64 t = globaltimer();
    if (t != last) {
      out[k++] = t;
      last = t;
    }
  }
}

}  // extern "C"
