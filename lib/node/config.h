/* A node's configuration, in one place for every process of the node.
 * Each setting has an environment variable (foreman sets them from .env)
 * and a flag that overrides it; `--help` on any process prints the table.
 * The table in config.c is the single source: README's configuration
 * section is printed from it (bin/sampler --help-markdown). */
#ifndef SAPO_CONFIG_H
#define SAPO_CONFIG_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    char node[64];        /* node id, unique in the swarm */
    char run[512];        /* run folder: checkpoints, metrics, ipc endpoints */
    char key[512];        /* the node's Ed25519 secret key file (its identity in the pool) */
    char broker[512];     /* broker endpoint base (tcp:PORT or a folder) */
    char redis[512];      /* redis://[user:pass@]host:port of the shared pool */
    char swarm[64];       /* key prefix in Redis: one swarm per prefix */
    char model[512];      /* "tiny" or a Hugging Face model folder */
    char base[512];       /* folder of the tiny base model (warm start cache) */
    char backend[32];     /* cpu or cuda:N */
    char task_mix[4096];  /* JSON task mix, empty = every family, weight 1 */
    int local_groups;     /* I: own question groups per training batch */
    int external_groups;  /* J: groups sampled from other nodes per batch */
    int completions;      /* L: completions per question */
    int questions;        /* questions sampled per round */
    char system_prompt[2048]; /* "default", "none", "@FILE" or the text */
    int max_new_tokens;
    float temperature;
    float top_p;
    int top_k;
    float lr;
    int lr_warmup;          /* rounds of linear warm-up */
    char lr_schedule[16];   /* constant, cosine */
    float weight_decay;
    float max_grad_norm;
    float eps_low, eps_high, beta;
    float delta;            /* upper clip of the ratio for negative advantages (0 = off) */
    char loss_type[16];     /* grpo, bnpo, dr_grpo, dapo */
    char scale_rewards[16]; /* group, batch, none */
    int micro_batch;        /* sequences per forward/backward pass */
    int generate_batch;     /* tasks a generator samples in one decode batch */
    int shared_prompt;      /* 1: a group's completions run over their prompt once (packed rows) */
    int staleness;          /* drop local rollouts this many versions older than the policy */
    int rounds;             /* stop after this many rounds (0 = run forever) */
    int checkpoint_every;   /* rounds between checkpoints */
    int pool_max;           /* pool entries kept per node */
    int pool_window;        /* SampleExternal's freshness in the publisher's rounds (0 = none) */
    double pool_window_seconds; /* and in seconds (0 = none) */
    char pool_strategy[16];  /* uniform or useful: how SampleExternal weighs other nodes */
    int max_record;         /* bytes of one record drawn from the pool */
    int max_text;           /* bytes of one text field of a record drawn from the pool */
    int stall_seconds;      /* silence after which the sampler counts what it sent as lost */
    int warmstart_steps;    /* supervised steps that make the tiny base model */
    int warmstart_optimizer; /* 1: RL starts from the warm start's AdamW state */
    char warmstart_shape[512]; /* "tiny" or a config.json: the shape learner warmstart trains */
    float reward_floor;     /* scores below it count 0 */
    int mask_truncated;     /* 1: truncated completions out of the loss */
    char local_filter[16];  /* own groups trained: "all" or "nonzero" */
    char share[16];         /* SelectSubset: "nonzero" (groups with an advantage) or "all" */
    char external_filter[16]; /* external groups kept after re-scoring: "nonzero" or "all" */
    char external_logprobs[16]; /* "use" or "ignore": an external completion's sampling log-probs */
    char external_kl[16];   /* "include" or "exclude": external completions in the KL term */
    uint64_t seed;
} config_t;

/* Fills cfg from defaults, then the environment, then argv flags. Returns
 * 0; on a bad or unknown flag or value prints one line naming it and
 * returns -1. --help prints the table and returns 1. Arguments that are not
 * settings (positional) are left in argv, count returned in *argc. */
int config_load(config_t *cfg, int *argc, char **argv);

/* The table as a markdown list (for the README). */
void config_print_markdown(void);

#endif
