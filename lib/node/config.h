/* A node's configuration, in one place for every process of the node.
 * Each setting has an environment variable (foreman sets them from .env)
 * and a flag that overrides it; `--help` on any process prints the table.
 * The table in config.c is the single source: README's configuration
 * section is printed from it (bin/sampler --help-markdown). */
#ifndef SAPO_CONFIG_H
#define SAPO_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "pool/pool.h"  /* pool_strategy_t */
#include "train/grpo.h" /* grpo_loss_type_t, grpo_scale_t */

/* The settings that take one of a few names hold the name's enum; each
 * enum lists its values in the order of the names in config.c. */
typedef enum { LR_CONSTANT, LR_COSINE } lr_schedule_t;
/* which groups a filter keeps: those with some advantage (rewards not all
 * equal), or all */
typedef enum { FILTER_NONZERO, FILTER_ALL } group_filter_t;
typedef enum { EXTERNAL_LOGPROBS_USE, EXTERNAL_LOGPROBS_IGNORE } external_logprobs_t;
typedef enum { EXTERNAL_KL_INCLUDE, EXTERNAL_KL_EXCLUDE } external_kl_t;
/* the dtype of the policy versions the learner writes */
typedef enum { POLICY_FP32, POLICY_BF16 } policy_dtype_t;
/* what a round is: SAPO's (sample, share, train), or the three-stage game
 * of RL Swarm (answer, critique, resolve; sampler/game.c) */
typedef enum { GAME_OFF, GAME_THREE_STAGE } game_mode_t;
/* whether the learner recomputes activations in the backward pass */
typedef enum { RECOMPUTE_AUTO, RECOMPUTE_ON, RECOMPUTE_OFF } recompute_t;
/* what the learner keeps AdamW's moments in */
typedef enum { MOMENTS_FP32, MOMENTS_BF16 } moments_t;

typedef struct {
    char preset[512];           /* a named set of settings, config/presets/NAME.env, or "" */
    char node[64];              /* node id, unique in the swarm */
    char run[512];              /* run folder: checkpoints, metrics, ipc endpoints */
    char key[512];              /* the node's Ed25519 secret key file (its identity in the pool) */
    char broker[512];           /* broker endpoint base (tcp:PORT or a folder) */
    char redis[512];            /* redis://[user:pass@]host:port of the shared pool */
    char tls_ca[512];           /* the CA file the pool's servers are checked against ("": the system's) */
    char tls_cert[512];         /* this node's TLS certificate for the pool ("": none) */
    char tls_key[512];          /* and its key */
    char tls_name[256];         /* the name the pool's servers' certificates carry ("": each host's) */
    char swarm[64];             /* key prefix in Redis: one swarm per prefix */
    char model[512];            /* "tiny", a Hugging Face model folder, a GGUF file or a fetched model's name */
    char model_cache[512];      /* where scripts/model.sh keeps fetched models; "" = ~/.cache/sapo/models */
    char base[512];             /* folder of the tiny base model (warm start cache) */
    char backend[32];           /* cpu or cuda:N */
    int inference_only;         /* 1: on a GPU, models that only infer hold no training state */
    int fused_logp;             /* 1: on a GPU, the lm_head's log-softmax in fused kernels */
    int direct_bf16;            /* 1: on a GPU, norms and SwiGLU write their products' bf16 inputs */
    int direct_heads;           /* 1: on a GPU, attention's products read and write heads in place */
    int decode_graphs;          /* 1: on a GPU, decode steps replayed from a CUDA graph */
    int grouped_decode;         /* 1: on a GPU, decode attention by key/value head */
    int fused_adamw;            /* 1: on a GPU, the optimizer step in one pass over the parameters */
    int logits_chunk;           /* positions of logits at once, 0: about 64M logits */
    char task_mix[4096];        /* JSON task mix, empty = every family, weight 1 */
    char eval_completions[512]; /* file the evaluator appends each held-out completion to, empty = none */
    int local_groups;           /* I: own question groups per training batch */
    int external_groups;        /* J: groups sampled from other nodes per batch */
    int completions;            /* L: completions per question */
    int questions;              /* questions sampled per round */
    char system_prompt[2048];   /* "default", "none", "@FILE" or the text */
    int max_new_tokens;
    float temperature;
    float top_p;
    int top_k;
    float lr;
    int lr_warmup; /* rounds of linear warm-up */
    lr_schedule_t lr_schedule;
    float weight_decay;
    float max_grad_norm;
    float eps_low, eps_high, beta;
    float delta; /* upper clip of the ratio for negative advantages (0 = off) */
    grpo_loss_type_t loss_type;
    grpo_scale_t scale_rewards;
    int micro_batch;                       /* sequences per forward/backward pass */
    recompute_t recompute;                 /* activations recomputed in backward: auto (the budget's), on, off */
    moments_t moments;                     /* AdamW's moments in fp32 or bf16 */
    char memory[32];                       /* the node's memory budget ("8G"; "" = none): config_memory_bytes */
    int generators;                        /* generator processes of the node */
    int nice;                              /* the model threads' nice above the rest of the node */
    int generate_batch;                    /* tasks a generator samples in one decode batch */
    int lockstep;                          /* 1: a round's questions sampled by the policy of the round before */
    int shared_prompt;                     /* 1: a group's completions run over their prompt once (packed rows) */
    int staleness;                         /* drop local groups this many versions older than the policy */
    int rounds;                            /* stop after this many rounds (0 = run forever) */
    int checkpoint_every;                  /* rounds between checkpoints */
    int keep_checkpoints;                  /* the newest this many checkpoints stay on disk */
    int keep_versions;                     /* the newest this many policy versions stay on disk */
    policy_dtype_t policy_dtype;           /* what each policy version is written in */
    int pool_max;                          /* pool entries kept per node */
    int pool_window;                       /* SampleExternal's freshness in the publisher's rounds (0 = none) */
    float pool_window_seconds;             /* and in seconds (0 = none) */
    float pool_deadline;                   /* the most a pool call waits on Redis, s (0 = no bound) */
    game_mode_t game;                      /* off (SAPO) or three-stage */
    float game_wait;                       /* seconds a game stage waits for its peers' outputs */
    pool_strategy_t pool_strategy;         /* how SampleExternal weighs other nodes */
    int max_record;                        /* bytes of one record drawn from the pool */
    int max_text;                          /* bytes of one text field of a record drawn from the pool */
    int stall_seconds;                     /* silence after which the sampler counts what it sent as lost */
    int heartbeat_ms;                      /* broker: a consumer silent this long is lost */
    int hwm;                               /* broker: records queued per stream before its "in" is paused */
    int stats_ms;                          /* broker: a stats line this often when something moved; 0: never */
    int warmstart_steps;                   /* supervised steps that make the tiny base model */
    int format_steps;                      /* a chat model's format warm start steps (0 = none) */
    int warmstart_optimizer;               /* 1: RL starts from the warm start's AdamW state */
    char warmstart_shape[512];             /* "tiny" or a config.json: the shape learner warmstart trains */
    int progress_seconds;                  /* a long step's longest silence: a progress line at least this often */
    int tensorboard;                       /* 1: the learner and the evaluator also write TensorBoard event files */
    float reward_floor;                    /* scores below it count 0 */
    float format_reward;                   /* added for an answer in the answer tags */
    int mask_truncated;                    /* 1: truncated completions out of the loss */
    group_filter_t local_filter;           /* own groups trained */
    group_filter_t share;                  /* SelectSubset: groups published */
    group_filter_t external_filter;        /* external groups kept after re-scoring */
    int external_train;                    /* 0: external groups counted, not trained (a control) */
    external_logprobs_t external_logprobs; /* an external completion's sampling log-probs */
    external_kl_t external_kl;             /* external completions in the KL term */
    uint64_t seed;
} config_t;

/* Fills cfg from defaults, then the environment, then argv flags. Returns
 * 0; on a bad or unknown flag or value prints one line naming it and
 * returns -1. --help prints the table and returns 1. Arguments that are not
 * settings (positional) are left in argv, count returned in *argc. */
int config_load(config_t *cfg, int *argc, char **argv);

/* The memory setting in bytes: 0 where none is set, UINT64_MAX where it
 * is not a size (config_load refuses that) */
uint64_t config_memory_bytes(const config_t *c);

/* The table as a markdown list (for the README). */
void config_print_markdown(void);

/* Every setting's value as the node runs it (defaults, preset,
 * environment and flags applied; a task mix file's text in place of its
 * name), as a JSON object keyed by flag name: what a manifest records.
 * malloc'ed; NULL when out of memory. */
char *config_json(const config_t *cfg);

#endif
