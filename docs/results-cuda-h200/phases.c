/* CUDA step phases on the Qwen2.5-0.5B shape (random weights): forward,
 * backward, optimizer, each timed to a device sync; args: L (layers, 0 =
 * the shape's) then BxT pairs; with "once" one untimed step only (for ncu) */
#include "model/model_impl.h"
#include "model/cuda/cuda_model.h"
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void){ struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
static int cmpd(const void *a, const void *b){ double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv){
  char err[256];
  model_config_t c = model_config_qwen25_05b(); c.n_eos = 0;
  int L = argc > 1 ? atoi(argv[1]) : 0; if (L > 0) c.L = L;
  int once = argc > 2 && strcmp(argv[2], "once") == 0;
  model_t *m = model_new_random(&c, 1, err, sizeof err);
  if (!m || model_set_backend(m, "cuda:0", err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
  if (getenv("CHUNK")) m->chunk = atoi(getenv("CHUNK"));
  adamw_params_t ap = adamw_params_default(); adamw_t *opt = adamw_new(model_num_params(m));
  for (int a = once ? 3 : 2; a < argc || (once && a == 3); a++) {
    int B = 8, T = 512; if (a < argc) sscanf(argv[a], "%dx%d", &B, &T);
    int N = B * T; int *tok = malloc(N * 4), *tgt = malloc(N * 4); float *lp = malloc(N * 4), *dl = malloc(N * 4);
    uint64_t s = 1;
    for (int i = 0; i < N; i++) { s = s * 6364136223846793005ull + 1442695040888963407ull; tok[i] = (int)((s >> 33) % c.V); }
    for (int i = 0; i < N; i++) { tgt[i] = (i + 1) % T ? tok[i + 1] : -1; dl[i] = tgt[i] >= 0 ? -1.0f / N : 0; }
    int reps = once ? 1 : 5; double tf[8], tb[8], to[8]; float norm;
    for (int r = 0; r <= reps; r++) {
      double t0 = now(); model_zero_grad(m);
      if (model_forward(m, tok, tgt, B, T, 1.0f, lp, NULL)) return 1;
      cudaDeviceSynchronize(); double t1 = now();
      model_backward(m, dl); cudaDeviceSynchronize(); double t2 = now();
      if (model_optimizer_step(m, opt, &ap, 1.0f, &norm)) return 1;
      cudaDeviceSynchronize(); double t3 = now();
      if (r) { tf[r-1] = t1 - t0; tb[r-1] = t2 - t1; to[r-1] = t3 - t2; }
      if (once) break;
    }
    if (once) break;
    qsort(tf, reps, 8, cmpd); qsort(tb, reps, 8, cmpd); qsort(to, reps, 8, cmpd);
    double f = tf[reps/2], b = tb[reps/2], o = to[reps/2];
    printf("phases chunk %d L %d B %d x T %d: forward %.1f ms, backward %.1f ms, optimizer %.1f ms; %.0f tok/s\n", m->chunk, c.L, B, T, f*1e3, b*1e3, o*1e3, N / (f + b + o));
    free(tok); free(tgt); free(lp); free(dl);
  }
  adamw_destroy(&opt); model_destroy(&m); return 0;
}
