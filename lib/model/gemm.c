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
    int nth = omp_get_max_threads();
    if ((double)M * N * K < 2e6 || nth == 1) {
        model_gemm1(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    bool by_rows = M >= 16 * nth;
#pragma omp parallel num_threads(nth)
    {
        int id = omp_get_thread_num(), n = omp_get_num_threads(), len = by_rows ? M : N;
        int unit = by_rows ? 1 : 16; /* column blocks stay SIMD-wide */
        int per = ((len + n - 1) / n + unit - 1) / unit * unit;
        int lo = id * per, hi = lo + per < len ? lo + per : len;
        if (lo < hi) {
            if (by_rows) {
                const float *a = ta ? A + lo : A + (size_t)lo * lda;
                model_gemm1(ta, tb, hi - lo, N, K, a, lda, B, ldb, beta, C + (size_t)lo * ldc, ldc);
            } else {
                const float *b = tb ? B + (size_t)lo * ldb : B + lo;
                model_gemm1(ta, tb, M, hi - lo, K, A, lda, b, ldb, beta, C + lo, ldc);
            }
        }
    }
}
