/* A node's policy: the model, tokenizer and prompt format opened from a
 * folder or a GGUF file, saved as a Hugging Face folder, and sampled. */
#include "node/policy.h"
#include "util/fs.h"
#include "util/log.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const STOP_TEXT = "</answer>";

const char *const POLICY_SYSTEM_DEFAULT =
    "Solve the problem. You may reason briefly first. Then write your final answer, and nothing else, "
    "between <answer> and </answer>, for example <answer>42</answer>.";

/* p->system from the setting; 0, or -1 with err */
static int set_system(policy_t *p, const char *setting, char *err, size_t errlen)
{
    free(p->system);
    p->system = NULL;
    if (!setting || strcmp(setting, "none") == 0) return 0;
    if (strcmp(setting, "default") == 0) {
        if (p->fmt == PROMPT_CHATML) p->system = strdup(POLICY_SYSTEM_DEFAULT);
        return 0;
    }
    if (setting[0] != '@') {
        p->system = strdup(setting);
        return 0;
    }
    FILE *f = fopen(setting + 1, "r");
    if (!f) {
        snprintf(err, errlen, "system prompt (SAPO_SYSTEM_PROMPT) %s: %s", setting + 1, strerror(errno));
        return -1;
    }
    char *text = NULL;
    size_t cap = 0, n = getdelim(&text, &cap, '\0', f) > 0 ? strlen(text) : 0;
    fclose(f);
    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r')) text[--n] = '\0';
    if (n == 0) {
        free(text);
        snprintf(err, errlen, "system prompt (SAPO_SYSTEM_PROMPT) %s: empty file", setting + 1);
        return -1;
    }
    p->system = text;
    return 0;
}

static bool file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* the one GGUF file of a fetched model's folder, which scripts/model.sh
 * stamps with FILE.sha256 once its sha256 matched: a file changed after
 * that is newer than its stamp */
static int fetched_gguf(const char *folder, const char *name, char *out, size_t outlen, char *err, size_t errlen)
{
    DIR *d = opendir(folder);
    int found = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (n > 5 && strcmp(e->d_name + n - 5, ".gguf") == 0 && e->d_name[0] != '.') {
            snprintf(out, outlen, "%s/%s", folder, e->d_name);
            found++;
        }
    }
    if (d) closedir(d);
    if (found != 1) {
        snprintf(err, errlen, "model (SAPO_MODEL) %s: %s in %s; fetch it with: scripts/model.sh get %s", name,
                 found ? "more than one GGUF file" : "no such file or folder, nor a fetched model of that name", folder,
                 name);
        return -1;
    }
    char stamp[PATH_MAX + 16];
    struct stat fs, ss;
    snprintf(stamp, sizeof stamp, "%s.sha256", out);
    if (stat(out, &fs) != 0 || stat(stamp, &ss) != 0 || ss.st_mtim.tv_sec < fs.st_mtim.tv_sec ||
        (ss.st_mtim.tv_sec == fs.st_mtim.tv_sec && ss.st_mtim.tv_nsec < fs.st_mtim.tv_nsec)) {
        snprintf(err, errlen,
                 "model (SAPO_MODEL) %s: %s changed since its sha256 was checked; fetch it again with: "
                 "scripts/model.sh get %s",
                 name, out, name);
        return -1;
    }
    return 0;
}

int policy_model_path(const char *model, const char *cache, char *out, size_t outlen, char *err, size_t errlen)
{
    if (file_exists(model) || strchr(model, '/')) {
        snprintf(out, outlen, "%s", model);
        return 0;
    }
    char folder[PATH_MAX];
    const char *home = getenv("HOME");
    if (cache[0]) snprintf(folder, sizeof folder, "%s/%s", cache, model);
    else snprintf(folder, sizeof folder, "%s/.cache/sapo/models/%s", home ? home : ".", model);
    return fetched_gguf(folder, model, out, outlen, err, errlen);
}

int policy_start(const config_t *cfg, char *out, size_t outlen, char *err, size_t errlen)
{
    if (strcmp(cfg->model, "tiny") == 0 || cfg->format_steps > 0) {
        snprintf(out, outlen, "%s", cfg->base);
        return 0;
    }
    return policy_model_path(cfg->model, cfg->model_cache, out, outlen, err, errlen);
}

/* the same name means the same tokenizer, prompt format and shape */
static void name_policy(policy_t *p)
{
    const model_config_t *c = model_config(p->model);
    const char *kind = p->fmt == PROMPT_PLAIN ? "bytes" : c->type == MODEL_LLAMA ? "llama" : "qwen";
    snprintf(p->name, sizeof p->name, "%s-%dL-%dC-v%d", kind, c->L, c->C, c->V);
}

/* a policy whose model and tokenizer are open, with its system prompt
 * set and its name given; NULL (p destroyed) when the prompt is refused */
static policy_t *finish_policy(policy_t *p, const char *system, char *err, size_t errlen)
{
    if (set_system(p, system, err, errlen) != 0) {
        policy_destroy(&p);
        return NULL;
    }
    name_policy(p);
    return p;
}

static bool is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The chat template must be one prompt_format writes: ChatML, with its
 * two tokens whole in the vocabulary. */
static int check_template(const gguf_t *g, const tokenizer_t *tok, char *err, size_t errlen)
{
    const char *tmpl = gguf_get_str(g, "tokenizer.chat_template");
    if (!tmpl) {
        snprintf(err, errlen, "%s: no chat template (tokenizer.chat_template); sapo prompts chat models only",
                 gguf_path(g));
        return -1;
    }
    if (!strstr(tmpl, "<|im_start|>") || !strstr(tmpl, "<|im_end|>") || tokenizer_token_id(tok, "<|im_start|>") < 0 ||
        tokenizer_token_id(tok, "<|im_end|>") < 0) {
        snprintf(err, errlen, "%s: the chat template is not ChatML (<|im_start|>, <|im_end|>), the one sapo applies",
                 gguf_path(g));
        return -1;
    }
    return 0;
}

/* the model, tokenizer and prompt format of a GGUF file */
static int open_gguf(policy_t *p, const char *path, char *err, size_t errlen)
{
    gguf_t *g = gguf_open(path, err, errlen);
    if (!g) return -1;
    int rc = -1;
    if (!(p->tok = tokenizer_from_gguf(g, err, errlen)) || check_template(g, p->tok, err, errlen) != 0 ||
        !(p->model = model_load_gguf_from(g, err, errlen)))
        goto done;
    if (!realpath(path, p->gguf)) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        goto done;
    }
    p->fmt = PROMPT_CHATML;
    rc = 0;
done:
    gguf_destroy(&g);
    return rc;
}

/* a Hugging Face folder's, or the tiny model's */
static int open_folder(policy_t *p, const char *dir, char *err, size_t errlen)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (!file_exists(path)) {
        snprintf(err, errlen, "%s: no config.json: not a model folder", dir);
        return -1;
    }
    /* the tokenizer files of a saved version are links to the original */
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    if (file_exists(path)) {
        char real[PATH_MAX];
        if (!realpath(path, real)) {
            snprintf(err, errlen, "%s: %s", path, strerror(errno));
            return -1;
        }
        p->tok = tokenizer_load(real, err, errlen);
        char *slash = strrchr(real, '/');
        *slash = '\0';
        snprintf(p->tokdir, sizeof p->tokdir, "%s", real);
        p->fmt = PROMPT_CHATML;
    } else {
        p->tok = tokenizer_byte_new();
        p->fmt = PROMPT_PLAIN;
    }
    if (!p->tok) return -1;
    return (p->model = model_load(dir, err, errlen)) ? 0 : -1;
}

policy_t *policy_open(const char *dir, const char *system, char *err, size_t errlen)
{
    policy_t *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if ((is_file(dir) ? open_gguf(p, dir, err, errlen) : open_folder(p, dir, err, errlen)) != 0) {
        policy_destroy(&p);
        return NULL;
    }
    if (model_config(p->model)->V < tokenizer_vocab_size(p->tok)) {
        snprintf(err, errlen, "%s: vocab_size %d is smaller than the tokenizer's %d", dir, model_config(p->model)->V,
                 tokenizer_vocab_size(p->tok));
        policy_destroy(&p);
        return NULL;
    }
    return finish_policy(p, system, err, errlen);
}

policy_t *policy_new_bytes(const char *shape_json, uint64_t seed, const char *system, char *err, size_t errlen)
{
    model_config_t cfg = model_config_tiny();
    bool tiny = !shape_json || !shape_json[0] || strcmp(shape_json, "tiny") == 0;
    if (!tiny && model_config_load(&cfg, shape_json, err, errlen) != 0) return NULL;
    policy_t *p = calloc(1, sizeof *p);
    if (!p || !(p->tok = tokenizer_byte_new())) {
        free(p);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    p->fmt = PROMPT_PLAIN;
    int eos = tokenizer_eos_id(p->tok);
    if (cfg.V < tokenizer_vocab_size(p->tok) || cfg.n_eos != 1 || cfg.eos_ids[0] != eos) {
        snprintf(err, errlen, "%s: a byte-tokenizer model needs vocab_size at least %d and eos_token_id %d", shape_json,
                 tokenizer_vocab_size(p->tok), eos);
        policy_destroy(&p);
        return NULL;
    }
    if (!(p->model = model_new_random(&cfg, seed, err, errlen))) {
        policy_destroy(&p);
        return NULL;
    }
    return finish_policy(p, system, err, errlen);
}

void policy_destroy(policy_t **self_p)
{
    if (!self_p || !*self_p) return;
    policy_t *p = *self_p;
    model_destroy(&p->model);
    tokenizer_destroy(&p->tok);
    free(p->system);
    free(p);
    *self_p = NULL;
}

int policy_place(policy_t *self, const config_t *cfg, bool infer, char *err, size_t errlen)
{
    if (infer && cfg->inference_only) model_set_inference_only(self->model);
    model_set_fused_logp(self->model, cfg->fused_logp);
    model_set_direct_bf16(self->model, cfg->direct_bf16);
    model_set_direct_heads(self->model, cfg->direct_heads);
    model_set_decode_graphs(self->model, cfg->decode_graphs);
    model_set_grouped_decode(self->model, cfg->grouped_decode);
    model_set_fused_adamw(self->model, cfg->fused_adamw);
    model_set_logits_chunk(self->model, cfg->logits_chunk);
    return model_set_backend(self->model, cfg->backend, err, errlen);
}

void policy_log_memory(policy_t *self)
{
    size_t held, peak;
    model_device_memory(self->model, &held, &peak);
    if (peak <= self->logged_peak) return;
    self->logged_peak = peak;
    log_info("cuda:%d memory of the model%s: %.3f GiB held, %.3f GiB at most", model_device(self->model),
             model_inference_only(self->model) ? " (inference only)" : "", held / 1073741824.0, peak / 1073741824.0);
}

int policy_reload(policy_t *self, const char *dir, char *err, size_t errlen)
{
    if (model_reload(self->model, dir, err, errlen) != 0) return -1;
    if (model_sync_device(self->model) != 0) {
        snprintf(err, errlen, "%s: cannot copy the weights to cuda:%d", dir, model_device(self->model));
        return -1;
    }
    return 0;
}

/* The tokenizer files of a GGUF policy, written once beside the version
 * folders (a tokenizer.json is megabytes; each version links to it), in
 * tokenizer-<the GGUF's name>, whose path goes into tokdir (PATH_MAX
 * bytes). 0, or -1 with err. */
static int gguf_tokenizer_dir(const policy_t *self, const char *dir, char *tokdir, char *err, size_t errlen)
{
    /* named for the GGUF file: two models' versions may share a parent */
    const char *file = strrchr(self->gguf, '/') ? strrchr(self->gguf, '/') + 1 : self->gguf;
    int stem = (int)strlen(file) - (int)strlen(".gguf");
    snprintf(tokdir, PATH_MAX, "%s", dir);
    char *slash = strrchr(tokdir, '/');
    snprintf(slash ? slash + 1 : tokdir, PATH_MAX - (size_t)(slash ? slash + 1 - tokdir : 0), "tokenizer-%.*s",
             stem > 0 ? stem : (int)strlen(file), file);
    char probe[PATH_MAX + 32], real[PATH_MAX];
    snprintf(probe, sizeof probe, "%s/tokenizer.json", tokdir);
    if (!file_exists(probe)) {
        char tmp[PATH_MAX + 16];
        snprintf(tmp, sizeof tmp, "%s.%d", tokdir, (int)getpid());
        fs_rm_tree(tmp);
        gguf_t *g = fs_mkdirs(tmp) == 0 ? gguf_open(self->gguf, err, errlen) : NULL;
        int rc = g ? tokenizer_gguf_save(g, tmp, err, errlen) : -1;
        gguf_destroy(&g);
        /* another process may have written it first: either copy is the same */
        if (rc == 0 && rename(tmp, tokdir) != 0 && !file_exists(probe)) {
            snprintf(err, errlen, "rename %s -> %s: %s", tmp, tokdir, strerror(errno));
            rc = -1;
        }
        fs_rm_tree(tmp);
        if (rc != 0) return -1;
    }
    if (!realpath(tokdir, real)) {
        snprintf(err, errlen, "%s: %s", tokdir, strerror(errno));
        return -1;
    }
    snprintf(tokdir, PATH_MAX, "%s", real);
    return 0;
}

void policy_version_dir(const char *run, uint64_t version, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s/policy/v%llu", run, (unsigned long long)version);
}

static const char *const VERSION_FILE = "policy_version.json";

static int version_write(const char *dir, const policy_version_t *v, char *err, size_t errlen)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", dir, VERSION_FILE);
    FILE *f = fopen(path, "w");
    int ok = f && fprintf(f, "{\"round\": %llu, \"policy_version\": %llu}\n", (unsigned long long)v->round,
                          (unsigned long long)v->policy_version) > 0;
    if (f && fclose(f) != 0) ok = 0;
    if (!ok) snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return ok ? 0 : -1;
}

/* a whole number up to 2^53, which a JSON double holds exactly */
static bool version_field(const cJSON *o, const char *name, uint64_t *out)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsNumber(n) || n->valuedouble < 0 || n->valuedouble > 9007199254740992.0 ||
        n->valuedouble != (double)(uint64_t)n->valuedouble)
        return false;
    *out = (uint64_t)n->valuedouble;
    return true;
}

int policy_version_read(const char *dir, policy_version_t *out, char *err, size_t errlen)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", dir, VERSION_FILE);
    struct stat st;
    if (stat(path, &st) != 0 && (errno == ENOENT || errno == ENOTDIR)) return 0;
    char *text = fs_read_text(path);
    if (!text) {
        snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        return -1;
    }
    cJSON *o = cJSON_Parse(text);
    policy_version_t v;
    bool ok = cJSON_IsObject(o) && version_field(o, "round", &v.round) &&
              version_field(o, "policy_version", &v.policy_version);
    cJSON_Delete(o);
    free(text);
    if (!ok) {
        snprintf(err, errlen, "%s: not a policy version's record (expected {\"round\": N, \"policy_version\": N})",
                 path);
        return -1;
    }
    *out = v;
    return 1;
}

int policy_save(const policy_t *self, const char *dir, bool bf16, const policy_version_t *version, char *err,
                size_t errlen)
{
    char tmp[PATH_MAX + 8], path[2 * PATH_MAX], target[2 * PATH_MAX], tokdir[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s.tmp", dir);
    fs_rm_tree(tmp);
    if (mkdir(tmp, 0755) != 0) {
        snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
        return -1;
    }
    if (model_sync_host(self->model) != 0) {
        snprintf(err, errlen, "%s: cannot copy the weights from cuda:%d", dir, model_device(self->model));
        return -1;
    }
    if (model_save(self->model, tmp, bf16, err, errlen) != 0) return -1;
    snprintf(tokdir, sizeof tokdir, "%s", self->tokdir);
    if (self->gguf[0] && gguf_tokenizer_dir(self, dir, tokdir, err, errlen) != 0) return -1;
    static const char *const tokfiles[] = {"tokenizer.json", "tokenizer_config.json"};
    for (int i = 0; tokdir[0] && i < 2; i++) {
        snprintf(target, sizeof target, "%s/%s", tokdir, tokfiles[i]);
        snprintf(path, sizeof path, "%s/%s", tmp, tokfiles[i]);
        if (file_exists(target) && symlink(target, path) != 0) {
            snprintf(err, errlen, "%s: %s", path, strerror(errno));
            return -1;
        }
    }
    if (version && version_write(tmp, version, err, errlen) != 0) return -1;
    fs_rm_tree(dir);
    if (rename(tmp, dir) != 0) {
        snprintf(err, errlen, "rename %s -> %s: %s", tmp, dir, strerror(errno));
        return -1;
    }
    return 0;
}

char *policy_prompt(const policy_t *self, const char *question)
{
    return prompt_format(self->fmt, self->system, question);
}

typedef struct {
    const tokenizer_t *tok;
    const volatile int *cancel;
} stop_ctx_t;

/* Decoding the whole completion each step is cheap next to a forward pass
 * and sees a stop text split across tokens. */
static bool stop_on_answer(void *ctx, int seq, const int *tokens, int n)
{
    (void)seq;
    const stop_ctx_t *s = ctx;
    if (s->cancel && *s->cancel) return true;
    int from = n > 24 ? n - 24 : 0;
    char *text = tokenizer_decode(s->tok, (const int32_t *)tokens + from, (size_t)(n - from));
    bool stop = text && strstr(text, STOP_TEXT) != NULL;
    free(text);
    return stop;
}

void completion_free(completion_t *c)
{
    free(c->text);
    free(c->token_ids);
    free(c->logprobs);
    memset(c, 0, sizeof *c);
}

/* the prompt's token ids of a question (malloc'ed) and their count, or
 * NULL with err */
static int32_t *prompt_ids(const policy_t *self, const char *question, int max_new, size_t *P, char *err, size_t errlen)
{
    char *prompt = policy_prompt(self, question);
    int32_t *pids = NULL;
    if (!prompt || tokenizer_encode(self->tok, prompt, strlen(prompt), &pids, P) != 0) {
        snprintf(err, errlen, "question is not valid UTF-8");
        free(prompt);
        return NULL;
    }
    free(prompt);
    const model_config_t *c = model_config(self->model);
    if ((int)*P + max_new > c->max_pos) {
        snprintf(err, errlen, "prompt of %zu tokens + %d new is past max_position_embeddings %d", *P, max_new,
                 c->max_pos);
        free(pids);
        return NULL;
    }
    return pids;
}

int policy_check(const policy_t *self, const char *question, int max_new, char *err, size_t errlen)
{
    size_t P = 0;
    int32_t *pids = prompt_ids(self, question, max_new, &P, err, errlen);
    free(pids);
    return pids ? 0 : -1;
}

int policy_sample(policy_t *self, const char *question, int L, const model_gen_params_t *gp, completion_t *out,
                  char *err, size_t errlen)
{
    return policy_sample_batch(self, &question, &gp->seed, 1, L, gp, out, err, errlen);
}

int policy_sample_batch(policy_t *self, const char *const *questions, const uint64_t *seeds, int Q, int L,
                        const model_gen_params_t *gp_in, completion_t *out, char *err, size_t errlen)
{
    const model_config_t *c = model_config(self->model);
    stop_ctx_t sc = {self->tok, self->cancel};
    model_gen_params_t gp = *gp_in;
    gp.stop = stop_on_answer;
    gp.stop_ctx = &sc;
    int M = gp.max_new, rc = -1;
    size_t R = (size_t)Q * L;
    int32_t **pids = calloc((size_t)Q, sizeof *pids);
    int *plen = malloc(sizeof(int) * Q);
    int *tokens = malloc(sizeof(int) * R * M);
    float *logp = malloc(sizeof(float) * R * M);
    int *lengths = malloc(sizeof(int) * R);
    if (!pids || !plen || !tokens || !logp || !lengths) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    for (int q = 0; q < Q; q++) {
        size_t P = 0;
        if (!(pids[q] = prompt_ids(self, questions[q], M, &P, err, errlen))) goto done;
        plen[q] = (int)P;
    }
    if (model_generate_batch(self->model, (const int *const *)pids, plen, seeds, Q, L, &gp, tokens, logp, lengths) !=
        0) {
        snprintf(err, errlen, "generation failed (see the line above)");
        goto done;
    }
    if (self->cancel && *self->cancel) {
        snprintf(err, errlen, "interrupted");
        goto done;
    }
    for (size_t r = 0; r < R; r++) {
        completion_t *o = &out[r];
        int n = lengths[r];
        o->n = n;
        o->token_ids = malloc(sizeof(int) * (n ? n : 1));
        o->logprobs = malloc(sizeof(float) * (n ? n : 1));
        memcpy(o->token_ids, tokens + r * M, sizeof(int) * n);
        memcpy(o->logprobs, logp + r * M, sizeof(float) * n);
        bool eos = false;
        for (int e = 0; n > 0 && e < c->n_eos; e++) eos |= o->token_ids[n - 1] == c->eos_ids[e];
        o->text = tokenizer_decode(self->tok, (const int32_t *)o->token_ids, (size_t)(eos ? n - 1 : n));
        o->finished = eos || (o->text && strstr(o->text, STOP_TEXT));
    }
    rc = 0;
done:
    for (int q = 0; pids && q < Q; q++) free(pids[q]);
    free(pids);
    free(plen);
    free(tokens);
    free(logp);
    free(lengths);
    return rc;
}
