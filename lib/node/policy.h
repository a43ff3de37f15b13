/* A node's policy: the model, its tokenizer and its prompt format, opened
 * from one folder or one GGUF file. A folder with a tokenizer.json is a
 * Hugging Face model (byte-level BPE, ChatML prompts, as Qwen instruct
 * models expect); one without is a model over the byte tokenizer with
 * plain prompts (the tiny default). A GGUF file holds a chat model's
 * weights, tokenizer and chat template (ChatML only). The learner saves
 * each policy version as a Hugging Face folder and the generators open
 * it. */
#ifndef SAPO_POLICY_H
#define SAPO_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include "model/model.h"
#include "node/config.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    model_t *model;
    tokenizer_t *tok;
    prompt_format_t fmt;
    char name[256];    /* recorded in groups: same name = same tokenizer and prompt */
    char tokdir[4096]; /* absolute folder of tokenizer.json, "" for the byte tokenizer or a GGUF */
    char gguf[4096];   /* absolute path of the GGUF file opened, or "" */
    char *system;      /* the instruction before every question, or NULL */
    /* when set and nonzero (a process told to stop), sampling ends at the
     * next token and fails with "interrupted": a large model's batch can
     * take minutes, longer than a supervisor waits before killing */
    const volatile int *cancel;
    size_t logged_peak; /* the device memory peak policy_log_memory last logged */
} policy_t;

/* The instruction a chat checkpoint gets when the system-prompt setting is
 * "default": a Qwen chat model asked a bare question does not write
 * <answer> tags, so every reward would be 0. */
extern const char *const POLICY_SYSTEM_DEFAULT;

/* The model setting as a path, into out: a folder or file as it is, else
 * the GGUF file that scripts/model.sh fetched under that name into cache
 * (the model-cache setting; "" is ~/.cache/sapo/models). 0, or -1 with
 * one line in err: no such model, or a fetched file changed since its
 * sha256 was checked. */
int policy_model_path(const char *model, const char *cache, char *out, size_t outlen, char *err, size_t errlen);

/* The folder or file RL starts from, into out: the base folder (the base
 * setting, made by learner warmstart) for the tiny model and for a chat
 * model with a format warm start (format-steps > 0), else the model
 * setting's path. 0, or -1 with err. */
int policy_start(const config_t *cfg, char *out, size_t outlen, char *err, size_t errlen);

/* system: the system-prompt setting (config.h): "default" (the
 * instruction above for a chat checkpoint, none for the plain-prompted
 * byte model), "none", "@PATH" (a file's text) or the text itself. Every
 * process of a node opens its policy with the same setting, so the
 * generator, the learner, the evaluator and the warm start prompt alike. */
policy_t *policy_open(const char *dir, const char *system, char *err, size_t errlen);

/* A freshly initialised model over the byte tokenizer: of the shape in
 * shape_json (a config.json; its vocab_size must hold the byte tokenizer's
 * 264 ids), or the tiny default's when shape_json is NULL or "tiny". */
policy_t *policy_new_bytes(const char *shape_json, uint64_t seed, const char *system, char *err, size_t errlen);
void policy_destroy(policy_t **self_p);

/* Puts the policy's model where the node's settings run it (cfg->backend),
 * as a model that only infers when infer is set and cfg->inference_only
 * allows (a generator's, an evaluator's, the reference model). 0, or -1
 * with err. */
int policy_place(policy_t *self, const config_t *cfg, bool infer, char *err, size_t errlen);

/* One line when the model's device memory peak (its own allocations,
 * model_device_memory) grew since the last such line: what a GPU node
 * measures of each process's model (docs/cuda.md). Nothing on the CPU. */
void policy_log_memory(policy_t *self);

/* Replaces the weights with those in dir (same architecture). 0 or -1 with err. */
int policy_reload(policy_t *self, const char *dir, char *err, size_t errlen);

/* A policy version as its folder records it (policy_version.json): its
 * number and the learner's round that made it, so whatever scores the
 * folder later names what it scored. */
typedef struct {
    uint64_t round, policy_version;
} policy_version_t;

/* Saves the weights into dir (created), in fp32 or rounded to bf16,
 * linking the tokenizer files, and the version's record when version is
 * not NULL (a base or a checkpoint has none), written into dir.tmp first
 * and renamed so a reader never sees half a folder.
 * A GGUF policy's tokenizer files are written once, into the folder
 * "tokenizer-<the GGUF file's name>" beside dir. 0 or -1 with err. */
int policy_save(const policy_t *self, const char *dir, bool bf16, const policy_version_t *version, char *err,
                size_t errlen);

/* The record policy_save wrote into dir: 1 with *out, 0 where dir holds
 * none (a base, a model folder or file), -1 with one line in err where
 * it is unreadable or malformed. */
int policy_version_read(const char *dir, policy_version_t *out, char *err, size_t errlen);

/* The folder of a node's policy version v, where its learner saves it
 * and announces it: <run>/policy/v<v> */
void policy_version_dir(const char *run, uint64_t version, char *out, size_t outlen);

/* The prompt text for a question (malloc'ed). */
char *policy_prompt(const policy_t *self, const char *question);

/* One sampled completion. */
typedef struct {
    char *text;      /* decoded, without a final EOS token */
    int *token_ids;  /* n sampled ids, EOS included when it ended the completion */
    float *logprobs; /* n log-probs of the sampled ids */
    int n;
    bool finished; /* ended by EOS or "</answer>" rather than the length limit */
} completion_t;

/* Samples L completions of a question; out holds L entries the caller frees
 * with completion_free. Generation stops a completion after "</answer>". */
int policy_sample(policy_t *self, const char *question, int L, const model_gen_params_t *gp, completion_t *out,
                  char *err, size_t errlen);

/* Whether a question can be sampled with max_new new tokens: 0, or -1
 * with err (not UTF-8, or a prompt too long for the model). */
int policy_check(const policy_t *self, const char *question, int max_new, char *err, size_t errlen);

/* policy_sample for Q questions in one decode batch (model_generate_batch):
 * question q's L completions are out[q * L .. q * L + L - 1], drawn from
 * seeds[q] (gp->seed is not used), as policy_sample with that seed gives
 * them up to float rounding. A question that fails policy_check fails the
 * whole batch, with its line in err. */
int policy_sample_batch(policy_t *self, const char *const *questions, const uint64_t *seeds, int Q, int L,
                        const model_gen_params_t *gp, completion_t *out, char *err, size_t errlen);
void completion_free(completion_t *c);

#endif
