/* AdamW over one flat fp32 parameter array, as torch.optim.AdamW
 * (decoupled weight decay, bias-corrected moments, eps added after the
 * square root of the corrected second moment), and global-norm gradient
 * clipping as torch.nn.utils.clip_grad_norm_. Optimizer state saves to a
 * file of its own, written atomically. */
#ifndef SAPO_ADAMW_H
#define SAPO_ADAMW_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    float lr;
    float beta1, beta2;
    float eps;
    float weight_decay;
} adamw_params_t;

typedef struct adamw adamw_t;

/* torch's defaults: lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 1e-2 */
adamw_params_t adamw_params_default(void);

/* state for n parameters, moments 0, step 0; NULL after one error line
 * when memory runs out */
adamw_t *adamw_new(size_t n);
/* the same with the two moments kept in bf16 (4 bytes a parameter, not
 * 8): each step reads them, steps in fp32 and stores them rounded to
 * bf16 at random (up with the chance the value lies toward the next bf16
 * number; a hash of the parameter, the step and the moment draws it), so
 * that small changes, such as the second moment's decay by beta2, are
 * kept on average instead of rounded away. On the CPU only: such a state
 * has no fp32 moments for a device to hold (adamw_moment is NULL). Saved
 * and loaded as fp32 (adamw_save), the file the same either way. */
adamw_t *adamw_new_bf16(size_t n);
bool adamw_bf16(const adamw_t *self);
/* a state's fp32 moments rounded to bf16 (to nearest) in place, as
 * adamw_new_bf16 keeps them: for one loaded from a file. 0, or -1 after
 * an error line (out of memory; the state is as it was) */
int adamw_to_bf16(adamw_t *self);
void adamw_destroy(adamw_t **self_p);

size_t adamw_size(const adamw_t *self);
/* optimizer steps taken so far */
long adamw_steps(const adamw_t *self);

/* parameters [offset, offset + n) get no weight decay (biases and norm
 * weights, as Hugging Face's Trainer groups them); ranges may be added in
 * any order and may touch but must not overlap. 0, or -1 with an error line
 * for a range past the end or overlapping an earlier one. */
int adamw_no_decay(adamw_t *self, size_t offset, size_t n);

/* The state itself, for a step taken elsewhere (on a GPU) that keeps this
 * object as its record, the one adamw_save writes: moment 0 (m) or 1 (v),
 * n floats each (while a holder has them, as of its last pull; NULL for
 * moments kept in bf16); the step
 * count after such steps; the no-decay ranges as (offset, n) pairs, at
 * most max of them into pairs, their count returned. */
float *adamw_moment(adamw_t *self, int which);
void adamw_set_steps(adamw_t *self, long steps);
size_t adamw_no_decay_ranges(const adamw_t *self, size_t *pairs, size_t max);

/* A device that steps this optimizer (model_optimizer_step on a GPU)
 * keeps the moments in its own memory on the optimizer's behalf: it
 * registers as their holder, and from then on the optimizer tells it what
 * to do with that copy, so the device never relies on a pointer it kept.
 * The optimizer asks its holder
 *   ADAMW_PULL: copy its moments into adamw_moment's arrays and go on
 *     holding them (adamw_save does, before writing the file);
 *   ADAMW_DROP: forget its copy and this optimizer, and never touch it
 *     again (adamw_destroy; adamw_step on the host and another holder's
 *     adamw_hold, each after a PULL, since the host's moments then move on).
 * So a destroyed optimizer is never written into, one made at a freed
 * one's address never meets its moments, and the host and a device never
 * step from two copies. The function returns 0, or -1 after an error line
 * (a PULL that failed: the host's copy is not current). One holder at a
 * time; an optimizer and its holder are used from one thread. */
typedef enum { ADAMW_PULL, ADAMW_DROP } adamw_ask_t;
typedef int (*adamw_holder_fn)(void *holder, adamw_t *opt, adamw_ask_t ask);

/* holder takes the moments, after the previous holder (if another) was
 * pulled and dropped; 0, or -1 when that pull failed (nothing changes
 * hands but the drop) */
int adamw_hold(adamw_t *self, void *holder, adamw_holder_fn fn);
/* the holder leaves on its own (it is being destroyed, or has handed its
 * moments back): no call back; nothing when holder does not hold */
void adamw_unhold(adamw_t *self, const void *holder);
/* the present holder, NULL when the host's arrays are the only copy */
const void *adamw_holder(const adamw_t *self);

/* one step over params (n) with grads (n); lr may change between steps.
 * Moments a holder has are pulled first and the holder dropped. 0, or -1
 * (no step) when that pull failed */
int adamw_step(adamw_t *self, const adamw_params_t *p, float *params, const float *grads);

/* scales grads (n) in place so their global L2 norm is at most max_norm
 * (factor max_norm / (norm + 1e-6), applied only when below 1); returns
 * the norm before clipping. max_norm <= 0 only measures. */
float grad_clip_norm(float *grads, size_t n, float max_norm);

/* binary file: magic "SAPOADAM", version, count, step, no-decay ranges,
 * m, v (a holder's pulled first); written to path.tmp then renamed over
 * path. 0, or -1 with an error line naming the file. */
int adamw_save(const adamw_t *self, const char *path);
/* NULL with an error line naming the file and what is wrong (missing,
 * not an optimizer state, another version, truncated, count != expect_n) */
adamw_t *adamw_load(const char *path, size_t expect_n);

#endif
