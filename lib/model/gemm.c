/* Which fp32 matmul runs a product, decided here alone: model_gemm splits
 * a product among the OpenMP threads (or sends a decode step's few rows to
 * gemm_few.c), and model_gemm1 runs each thread's part by OpenBLAS's
 * sgemm, or by gemm_f32.c's AVX-512 kernel where the product is large and
 * OpenBLAS's own kernels do not use the CPU's AVX-512 (model_f32_own).
 * The fp32 reference (forward.c), generate.c and backend cpu-bf16's
 * smaller products all multiply through here. */
#include "model/model_impl.h"

#include <cblas.h>
#include <omp.h>
#include <pthread.h>
#include <string.h>

bool model_f32_choose(bool avx512, const char *openblas_core)
{
    static const char *const wide[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
    if (!avx512 || !openblas_core) return avx512;
    for (size_t i = 0; i < sizeof wide / sizeof *wide; i++)
        if (strcmp(openblas_core, wide[i]) == 0) return false;
    return true;
}

static int own = -1;
static pthread_once_t own_once = PTHREAD_ONCE_INIT;

static void own_choose(void) { own = model_f32_choose(model_avx512_available(), openblas_get_corename()); }

bool model_f32_own(void)
{
    pthread_once(&own_once, own_choose);
    return own == 1;
}

void model_gemm1(bool ta, bool tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb, float beta,
                 float *C, int ldc)
{
    if (M >= MODEL_F32_MIN_ROWS && (double)M * N * K >= MODEL_F32_MIN && model_f32_own()) {
        model_gemm_f32(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A, lda, B,
                ldb, beta, C, ldc);
}

/* C (M, N) = A B + beta C, row-major, split into one block of rows (or,
 * for few rows, of columns) per OpenMP thread, each a one-thread
 * model_gemm1: one thread pool does all the work, so idle OpenMP threads
 * never spin against OpenBLAS's own. A few rows against transposed
 * weights (a decode step) go to model_gemm_few, which does not repack
 * the weights. */
void model_gemm(bool ta, bool tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb, float beta,
                float *C, int ldc)
{
    /* below 2^18 multiply-adds OpenBLAS's own small-matrix kernel wins */
    if (!ta && tb && M <= MODEL_FEW_ROWS && (double)M * N * K > (1 << 18)) {
        model_gemm_few(M, N, K, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    if ((double)M * N * K < 2e6) {
        model_gemm1(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    /* The product in MODEL_GEMM_BLOCKS blocks of rows (or of columns, 16
     * wide, where there are few rows), shared among the threads: the
     * blocks follow from the shape alone, so every element is computed
     * by the same call on any number of threads (OpenBLAS's result for an
     * element can depend on the shape of the call that computes it, and
     * warm starts on 1 and 2 threads parted) */
    bool by_rows = M >= 16 * MODEL_GEMM_BLOCKS;
    int len = by_rows ? M : N, unit = by_rows ? 1 : 16; /* column blocks stay SIMD-wide */
    int per = ((len + MODEL_GEMM_BLOCKS - 1) / MODEL_GEMM_BLOCKS + unit - 1) / unit * unit;
#pragma omp parallel for schedule(static)
    for (int lo = 0; lo < len; lo += per) {
        int hi = lo + per < len ? lo + per : len;
        if (by_rows) {
            const float *a = ta ? A + lo : A + (size_t)lo * lda;
            model_gemm1(ta, tb, hi - lo, N, K, a, lda, B, ldb, beta, C + (size_t)lo * ldc, ldc);
        } else {
            const float *b = tb ? B + (size_t)lo * ldb : B + lo;
            model_gemm1(ta, tb, M, hi - lo, K, A, lda, b, ldb, beta, C + lo, ldc);
        }
    }
}
