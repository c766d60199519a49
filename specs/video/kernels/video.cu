// Kernels of dagrun's multi-camera inference demo (specs/video).
//
// Every kernel is deterministic: no atomics, each output is computed by one
// thread (or, in video_fc, by a fixed tree over a fixed number of lanes) with
// the same float32 operations in the same order as the Go implementations in
// specs/video/kernels.go, each rounded on its own (__fmul_rn, __fadd_rn,
// __fsub_rn, __fdiv_rn, and -fmad=false; the softmax uses video_exp below,
// not expf). So the GPU output equals the Go output bit for bit, on every
// word, and the results do not depend on the launch shape: every loop is
// grid-stride.
//
// Layouts: frames are RGBA8 row-major; activations CHW float32; conv weights
// w[cout][cin][3][3] then b[cout]; FC weights w[nout][nin] then b[nout].
// Build: see README.md in this directory.

#define VIDEO_FC_LANES 256 // partial sums per FC output (fixed: it is part of the summation order)

__device__ __forceinline__ unsigned video_tid() { return blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ unsigned video_nthreads() { return gridDim.x * blockDim.x; }

// video_preprocess resizes a w×h RGBA8 frame to size×size with bilinear
// interpolation (half-pixel centres, as OpenCV's INTER_LINEAR and PyTorch's
// align_corners=False: sx = (x+0.5)·w/size − 0.5, clamped to [0, w−1]; edge
// pixels repeat), then normalizes each RGB channel: (v/255 − mean_c)/std_c
// with the ImageNet mean (0.485, 0.456, 0.406) and std (0.229, 0.224, 0.225).
// out is 3×size×size float32.
extern "C" __global__ void video_preprocess(const unsigned char* frame, float* out, unsigned w, unsigned h, unsigned size)
{
    const float mean[3] = {0.485f, 0.456f, 0.406f};
    const float stdv[3] = {0.229f, 0.224f, 0.225f};
    const unsigned n = size * size;
    const float scx = __fdiv_rn((float)w, (float)size);
    const float scy = __fdiv_rn((float)h, (float)size);
    for (unsigned i = video_tid(); i < n; i += video_nthreads()) {
        const unsigned ox = i % size, oy = i / size;
        float sx = __fsub_rn(__fmul_rn(__fadd_rn((float)ox, 0.5f), scx), 0.5f);
        float sy = __fsub_rn(__fmul_rn(__fadd_rn((float)oy, 0.5f), scy), 0.5f);
        if (sx < 0.0f) sx = 0.0f;
        if (sy < 0.0f) sy = 0.0f;
        unsigned x0 = (unsigned)sx, y0 = (unsigned)sy; // floor: sx, sy ≥ 0
        if (x0 > w - 1) x0 = w - 1;
        if (y0 > h - 1) y0 = h - 1;
        const unsigned x1 = x0 + 1 < w ? x0 + 1 : w - 1;
        const unsigned y1 = y0 + 1 < h ? y0 + 1 : h - 1;
        const float fx = __fsub_rn(sx, (float)x0), fy = __fsub_rn(sy, (float)y0);
        const float gx = __fsub_rn(1.0f, fx), gy = __fsub_rn(1.0f, fy);
        const unsigned char* r0 = frame + (size_t)y0 * w * 4;
        const unsigned char* r1 = frame + (size_t)y1 * w * 4;
        for (int c = 0; c < 3; c++) {
            const float p00 = (float)r0[x0 * 4 + c], p01 = (float)r0[x1 * 4 + c];
            const float p10 = (float)r1[x0 * 4 + c], p11 = (float)r1[x1 * 4 + c];
            const float top = __fadd_rn(__fmul_rn(gx, p00), __fmul_rn(fx, p01));
            const float bot = __fadd_rn(__fmul_rn(gx, p10), __fmul_rn(fx, p11));
            float v = __fadd_rn(__fmul_rn(gy, top), __fmul_rn(fy, bot));
            v = __fdiv_rn(v, 255.0f);
            v = __fdiv_rn(__fsub_rn(v, mean[c]), stdv[c]);
            out[c * n + i] = v;
        }
    }
}

// video_conv_relu_pool is a 3×3 convolution (stride 1, zero padding 1) of a
// cin×size×size input with cout filters, plus bias, ReLU, and 2×2 max pooling
// (stride 2): out is cout×(size/2)×(size/2). Each pre-activation is
// bias + Σ_{ci, ky, kx} w·x in that loop order, skipping the padding.
extern "C" __global__ void video_conv_relu_pool(const float* in, const float* wb, float* out, unsigned cin, unsigned cout, unsigned size)
{
    const unsigned half = size / 2, plane = half * half, n = cout * plane;
    const float* bias = wb + cout * cin * 9;
    for (unsigned i = video_tid(); i < n; i += video_nthreads()) {
        const unsigned co = i / plane, px = i % plane % half, py = i % plane / half;
        const float* wc = wb + co * cin * 9;
        float best = 0.0f; // ReLU: the max of 0 and the four pre-activations
        for (int dy = 0; dy < 2; dy++) {
            for (int dx = 0; dx < 2; dx++) {
                const int y = 2 * py + dy, x = 2 * px + dx;
                float acc = bias[co];
                for (unsigned ci = 0; ci < cin; ci++) {
                    const float* xin = in + ci * size * size;
                    for (int ky = 0; ky < 3; ky++) {
                        const int iy = y + ky - 1;
                        if (iy < 0 || iy >= (int)size) continue;
                        for (int kx = 0; kx < 3; kx++) {
                            const int ix = x + kx - 1;
                            if (ix < 0 || ix >= (int)size) continue;
                            acc = __fadd_rn(acc, __fmul_rn(wc[(ci * 3 + ky) * 3 + kx], xin[iy * size + ix]));
                        }
                    }
                }
                if (acc > best) best = acc;
            }
        }
        out[i] = best;
    }
}

// video_fc is a fully connected layer: out[o] = Σ_i w[o][i]·in[i] + b[o].
// One block per output (grid-stride over outputs). The sum is taken over
// VIDEO_FC_LANES lanes: lane t sums i = t, t+LANES, ... in order from 0;
// then the lanes are added pairwise, lane t += lane t+s for s = LANES/2, ...,
// 1; then the bias is added. Any block size works.
extern "C" __global__ void video_fc(const float* in, const float* wb, float* out, unsigned nin, unsigned nout)
{
    __shared__ float part[VIDEO_FC_LANES];
    const float* bias = wb + nout * nin;
    for (unsigned o = blockIdx.x; o < nout; o += gridDim.x) {
        const float* wo = wb + o * nin;
        for (unsigned t = threadIdx.x; t < VIDEO_FC_LANES; t += blockDim.x) {
            float acc = 0.0f;
            for (unsigned i = t; i < nin; i += VIDEO_FC_LANES) {
                acc = __fadd_rn(acc, __fmul_rn(wo[i], in[i]));
            }
            part[t] = acc;
        }
        __syncthreads();
        for (unsigned s = VIDEO_FC_LANES / 2; s > 0; s >>= 1) {
            for (unsigned t = threadIdx.x; t < s; t += blockDim.x) {
                part[t] = __fadd_rn(part[t], part[t + s]);
            }
            __syncthreads();
        }
        if (threadIdx.x == 0) {
            out[o] = __fadd_rn(part[0], bias[o]);
        }
        __syncthreads(); // part is reused by the next output
    }
}

// video_exp is e^d for d ≤ 0 from rounded float32 adds and multiplies only,
// so that Go computes the same bits (exp32 in kernels.go): k = floor(d·log2e
// + 0.5), r = (d − k·ln2_hi) − k·ln2_lo (Cody and Waite's reduction, ln2_hi
// with 17 significant bits so k·ln2_hi is exact), e^r by its Taylor series to
// r⁷/7! in Horner form, times 2^k built from the exponent bits. Max relative
// error 1.02e-7 over [−87, 0] against float64 exp. d < −87 gives 0
// (e^−87 ≈ 1.6e-38, near the smallest normal float).
__device__ float video_exp(float d)
{
    if (d < -87.0f) return 0.0f;
    const float kf = floorf(__fadd_rn(__fmul_rn(d, 0x1.715476p+0f), 0.5f));
    const float r = __fsub_rn(__fsub_rn(d, __fmul_rn(kf, 0x1.62e4p-1f)), __fmul_rn(kf, 0x1.7f7d1cp-20f));
    float p = 0x1.a01a02p-13f;                       // 1/7!
    p = __fadd_rn(0x1.6c16c2p-10f, __fmul_rn(r, p)); // 1/6!
    p = __fadd_rn(0x1.111112p-7f, __fmul_rn(r, p));  // 1/5!
    p = __fadd_rn(0x1.555556p-5f, __fmul_rn(r, p));  // 1/4!
    p = __fadd_rn(0x1.555556p-3f, __fmul_rn(r, p));  // 1/3!
    p = __fadd_rn(0.5f, __fmul_rn(r, p));
    p = __fadd_rn(1.0f, __fmul_rn(r, p));
    p = __fadd_rn(1.0f, __fmul_rn(r, p));
    return __fmul_rn(p, __int_as_float(((int)kf + 127) << 23));
}

// video_softmax_argmax writes the softmax of in[0:n] to out[0:n] and the
// index of the first largest logit, as a uint32, to word n of out. One
// thread does it all (n is small): m = max, e_i = video_exp(in_i − m), sum
// in index order, out_i = e_i / sum.
extern "C" __global__ void video_softmax_argmax(const float* in, float* out, unsigned n)
{
    if (blockIdx.x != 0 || threadIdx.x != 0 || n == 0) return;
    float m = in[0];
    unsigned arg = 0;
    for (unsigned i = 1; i < n; i++) {
        if (in[i] > m) {
            m = in[i];
            arg = i;
        }
    }
    float sum = 0.0f;
    for (unsigned i = 0; i < n; i++) {
        const float e = video_exp(__fsub_rn(in[i], m));
        out[i] = e;
        sum = __fadd_rn(sum, e);
    }
    for (unsigned i = 0; i < n; i++) {
        out[i] = __fdiv_rn(out[i], sum);
    }
    ((unsigned*)out)[n] = arg;
}
