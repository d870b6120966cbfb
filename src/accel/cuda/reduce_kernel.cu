// Reduction kernels for MPI_Reduce_local on CUDA memory: one kernel per element kind,
// the op an argument (uniform across the grid), inout[i] = in[i] op inout[i]. Operand
// order and the complex product's formula are MPICH's, and the fatbin is built with
// -fmad=false: one rounding per operation, so results match the host bit for bit.
// Op numbers are ReduceOp's (accel/reduce_op.h). Loaded as pack_kernel.cu is (reduce.cc).

#define MPIACC_REDUCE_THREADS 256

enum { MAX, MIN, SUM, PROD, LAND, LOR, LXOR, BAND, BOR, BXOR, MINLOC, MAXLOC };

struct c32 {
    float re, im;
};
struct c64 {
    double re, im;
};
template <typename V>
struct pair {
    V v;
    int l;
};

static __device__ __forceinline__ unsigned long long first_index() {
    return static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
}
static __device__ __forceinline__ unsigned long long stride() {
    return static_cast<unsigned long long>(gridDim.x) * blockDim.x;
}

// Integers: SUM and PROD wrap in unsigned arithmetic of at least int's width (no signed
// overflow, no promotion of short to a signed int that overflows).
template <typename T, typename U>
static __device__ void reduce_int(const T *in, T *io, unsigned long long n, int op) {
    for (unsigned long long i = first_index(); i < n; i += stride()) {
        const T a = in[i], b = io[i];
        T r = b;
        switch (op) {
        case MAX: r = b > a ? b : a; break;
        case MIN: r = b < a ? b : a; break;
        case SUM: r = static_cast<T>(static_cast<U>(b) + static_cast<U>(a)); break;
        case PROD: r = static_cast<T>(static_cast<U>(b) * static_cast<U>(a)); break;
        case LAND: r = static_cast<T>(b && a); break;
        case LOR: r = static_cast<T>(b || a); break;
        case LXOR: r = static_cast<T>(!b != !a); break;
        case BAND: r = b & a; break;
        case BOR: r = b | a; break;
        case BXOR: r = b ^ a; break;
        }
        io[i] = r;
    }
}

template <typename T>
static __device__ void reduce_float(const T *in, T *io, unsigned long long n, int op) {
    for (unsigned long long i = first_index(); i < n; i += stride()) {
        const T a = in[i], b = io[i];
        T r = b;
        switch (op) {
        case MAX: r = b > a ? b : a; break;
        case MIN: r = b < a ? b : a; break;
        case SUM: r = b + a; break;
        case PROD: r = b * a; break;
        }
        io[i] = r;
    }
}

template <typename C>
static __device__ void reduce_complex(const C *in, C *io, unsigned long long n, int op) {
    for (unsigned long long i = first_index(); i < n; i += stride()) {
        const C a = in[i], b = io[i];
        C r;
        if (op == SUM) {
            r.re = b.re + a.re;
            r.im = b.im + a.im;
        } else {
            r.re = b.re * a.re - b.im * a.im;
            r.im = b.re * a.im + b.im * a.re;
        }
        io[i] = r;
    }
}

// MPI's rule: the better value wins with its index; of equal values the smaller index.
// Fields are written one by one, so a pair's padding stays as it was.
template <typename P>
static __device__ void reduce_pair(const P *in, P *io, unsigned long long n, int op) {
    for (unsigned long long i = first_index(); i < n; i += stride()) {
        const P a = in[i], b = io[i];
        const bool better = op == MINLOC ? a.v < b.v : a.v > b.v;
        if (better) {
            io[i].v = a.v;
            io[i].l = a.l;
        } else if (a.v == b.v && a.l < b.l) {
            io[i].l = a.l;
        }
    }
}

#define MPIACC_REDUCE_KERNEL(word, type, call)                                                                      \
    extern "C" __global__ void __launch_bounds__(MPIACC_REDUCE_THREADS)                                             \
        mpiacc_reduce_##word(const void *in, void *io, unsigned long long n, int op) {                              \
        call(static_cast<const type *>(in), static_cast<type *>(io), n, op);                                       \
    }

MPIACC_REDUCE_KERNEL(i8, signed char, (reduce_int<signed char, unsigned>))
MPIACC_REDUCE_KERNEL(u8, unsigned char, (reduce_int<unsigned char, unsigned>))
MPIACC_REDUCE_KERNEL(i16, short, (reduce_int<short, unsigned>))
MPIACC_REDUCE_KERNEL(u16, unsigned short, (reduce_int<unsigned short, unsigned>))
MPIACC_REDUCE_KERNEL(i32, int, (reduce_int<int, unsigned>))
MPIACC_REDUCE_KERNEL(u32, unsigned, (reduce_int<unsigned, unsigned>))
MPIACC_REDUCE_KERNEL(i64, long long, (reduce_int<long long, unsigned long long>))
MPIACC_REDUCE_KERNEL(u64, unsigned long long, (reduce_int<unsigned long long, unsigned long long>))
MPIACC_REDUCE_KERNEL(f32, float, reduce_float<float>)
MPIACC_REDUCE_KERNEL(f64, double, reduce_float<double>)
MPIACC_REDUCE_KERNEL(c32, c32, reduce_complex<c32>)
MPIACC_REDUCE_KERNEL(c64, c64, reduce_complex<c64>)
MPIACC_REDUCE_KERNEL(f32_int, pair<float>, reduce_pair<pair<float>>)
MPIACC_REDUCE_KERNEL(f64_int, pair<double>, reduce_pair<pair<double>>)
MPIACC_REDUCE_KERNEL(long_int, pair<long>, reduce_pair<pair<long>>)
MPIACC_REDUCE_KERNEL(int_int, pair<int>, reduce_pair<pair<int>>)
MPIACC_REDUCE_KERNEL(short_int, pair<short>, reduce_pair<pair<short>>)
