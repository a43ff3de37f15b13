/* propositional_logic: given premises over the variables P, Q, R, ...,
 * write a conclusion that follows from them. Scored as reasoning-gym does:
 * 1.0 for an entailed conclusion, 0.25 for an entailed tautology (a bare
 * variable counts as one), 0.05 for any other formula, 0.0 for text that
 * uses a capital letter that is not a variable or does not parse.
 *
 * reasoning-gym's entries carry answer None and one example conclusion in
 * metadata.example_answer; ours carry that example as the answer too, so a
 * supervised warm start has a target. Our generator makes sure the example
 * scores 1.0 (reasoning-gym falls back to the bare first variable, which
 * scores 0.25 at best, when 100 random candidates fail). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/formula.h"
#include "tasks/rng.h"
#include "tasks/task.h"

/* P..Z: reasoning-gym names variable i chr(ord("P") + i) */
#define MAX_VARS 11
#define MAX_STATEMENTS 100
/* a premise of depth d has up to 2^(d-1) variable occurrences */
#define MAX_COMPLEXITY 12
/* 2^26: more assignments than this and the scorer gives up (see score) */
#define MAX_ASSIGNMENTS 67108864.0

static cJSON *default_config(void)
{
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "min_vars", 2);
    cJSON_AddNumberToObject(c, "max_vars", 4);
    cJSON_AddNumberToObject(c, "min_statements", 2);
    cJSON_AddNumberToObject(c, "max_statements", 4);
    cJSON_AddNumberToObject(c, "min_complexity", 1);
    cJSON_AddNumberToObject(c, "max_complexity", 3);
    return c;
}

typedef struct {
    int64_t min_vars, max_vars, min_statements, max_statements, min_complexity, max_complexity;
} config_t;

static int read_config(const cJSON *c, config_t *k, char *err, size_t errlen)
{
    return task_config_int(c, "min_vars", &k->min_vars, err, errlen) ||
                   task_config_int(c, "max_vars", &k->max_vars, err, errlen) ||
                   task_config_int(c, "min_statements", &k->min_statements, err, errlen) ||
                   task_config_int(c, "max_statements", &k->max_statements, err, errlen) ||
                   task_config_int(c, "min_complexity", &k->min_complexity, err, errlen) ||
                   task_config_int(c, "max_complexity", &k->max_complexity, err, errlen)
               ? -1
               : 0;
}

static int validate_config(const cJSON *c, char *err, size_t errlen)
{
    config_t k;
    if (read_config(c, &k, err, errlen)) return -1;
    const char *bad = k.min_vars <= 0           ? "min_vars must be positive"
                      : k.max_vars < k.min_vars ? "max_vars must be >= min_vars"
                      : k.max_vars > MAX_VARS   ? "max_vars must be at most 11 (variables are the letters P to Z)"
                      : k.min_statements <= 0   ? "min_statements must be positive"
                      : k.max_statements < k.min_statements ? "max_statements must be >= min_statements"
                      : k.max_statements > MAX_STATEMENTS   ? "max_statements must be at most 100"
                      : k.min_complexity <= 0               ? "min_complexity must be positive"
                      : k.max_complexity < k.min_complexity ? "max_complexity must be >= min_complexity"
                      : k.max_complexity > MAX_COMPLEXITY   ? "max_complexity must be at most 12"
                                                            : NULL;
    if (bad) snprintf(err, errlen, "propositional_logic config: %s", bad);
    return bad ? -1 : 0;
}

/* reasoning-gym's random formula: a variable at depth 1, else a connective
 * drawn from all five with subformulas one level shallower */
static int random_formula(formula_set_t *fs, task_rng_t *r, const char (*vars)[2], int n_vars, int depth)
{
    static const formula_op_t ops[] = {FORMULA_AND, FORMULA_OR, FORMULA_NOT, FORMULA_IMPLIES, FORMULA_IFF};
    if (depth <= 1) return formula_set_var(fs, vars[task_rng_below(r, (uint64_t)n_vars)]);
    formula_op_t op = ops[task_rng_below(r, 5)];
    if (op == FORMULA_NOT) return formula_set_not(fs, random_formula(fs, r, vars, n_vars, depth - 1));
    int a = random_formula(fs, r, vars, n_vars, depth - 1);
    int b = random_formula(fs, r, vars, n_vars, depth - 1);
    return formula_set_binary(fs, op, a, b);
}

/* entailed by the premises and not trivial: scores 1.0 as an answer */
static int good_conclusion(const formula_set_t *fs, const int *premises, int n, int f)
{
    int entailed, tautology;
    if (formula_set_op(fs, f) == FORMULA_VAR) return 0;
    if (formula_set_entails(fs, premises, n, f, MAX_ASSIGNMENTS, &entailed, &tautology) < 0) return 0;
    return entailed && !tautology;
}

/* reasoning-gym's search: up to 100 random depth-2 formulas, an implication
 * rewritten as (¬a ∨ b); then, where it would give up, a premise itself or
 * the conjunction of two, which are entailed by construction. -1 when every
 * one of those is trivial (all premises tautologies or bare variables). */
static int find_conclusion(formula_set_t *fs, task_rng_t *r, const char (*vars)[2], int n_vars, const int *premises,
                           int n)
{
    for (int tries = 0; tries < 100; tries++) {
        int c = random_formula(fs, r, vars, n_vars, 2);
        if (formula_set_op(fs, c) == FORMULA_IMPLIES)
            c = formula_set_binary(fs, FORMULA_OR, formula_set_not(fs, formula_set_child(fs, c, 0)),
                                   formula_set_child(fs, c, 1));
        if (good_conclusion(fs, premises, n, c)) return c;
    }
    for (int i = 0; i < n; i++)
        if (good_conclusion(fs, premises, n, premises[i])) return premises[i];
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            int c = formula_set_binary(fs, FORMULA_AND, premises[i], premises[j]);
            if (good_conclusion(fs, premises, n, c)) return c;
        }
    return -1;
}

/* The question: the instructions, then the premises numbered from 1, each
 * also added to plist as its text */
static char *premises_question(const formula_set_t *fs, const int *premises, int n, cJSON *plist)
{
    size_t qcap = 1024, qlen = 0;
    char *q = malloc(qcap);
    qlen += (size_t)snprintf(
        q, qcap,
        "Below are the premises of a propositional logic problem. Write one conclusion that follows from "
        "them: a formula that is true under every assignment making all the premises true, and that is not "
        "a tautology.\n\n"
        "Notation: \xe2\x88\xa7 and, \xe2\x88\xa8 or, \xc2\xac not, \xe2\x86\x92 implies, \xe2\x86\x94 if and only if. "
        "Use only the variables of the premises, put every two-sided connective in parentheses, "
        "for example (\xc2\xacP \xe2\x88\xa8 Q).\n\nPremises:\n");
    for (int i = 0; i < n; i++) {
        char *s = formula_set_format(fs, premises[i]);
        cJSON_AddItemToArray(plist, cJSON_CreateString(s));
        size_t need = qlen + strlen(s) + 32;
        if (need > qcap) {
            while (need > qcap) qcap *= 2;
            q = realloc(q, qcap);
        }
        qlen += (size_t)snprintf(q + qlen, qcap - qlen, "%d. %s\n", i + 1, s);
        free(s);
    }
    const char *tail = "\nAnswer with the conclusion formula only.";
    if (qlen + strlen(tail) + 1 > qcap) q = realloc(q, qlen + strlen(tail) + 1);
    strcpy(q + qlen, tail);
    return q;
}

static int generate(const cJSON *c, uint64_t seed, uint64_t index, task_question_t *out, char *err, size_t errlen)
{
    config_t k;
    if (read_config(c, &k, err, errlen)) return -1;
    task_rng_t r;
    task_rng_init(&r, seed, index);
    char vars[MAX_VARS][2];
    int premises[MAX_STATEMENTS], n_vars = 0, n = 0, conclusion = -1;
    formula_set_t *fs = NULL;
    for (int attempt = 0; attempt < 1000 && conclusion < 0; attempt++) {
        formula_set_destroy(&fs);
        fs = formula_set_new();
        n_vars = (int)task_rng_range(&r, k.min_vars, k.max_vars);
        for (int i = 0; i < n_vars; i++) vars[i][0] = (char)('P' + i), vars[i][1] = '\0';
        n = (int)task_rng_range(&r, k.min_statements, k.max_statements);
        for (int i = 0; i < n; i++)
            premises[i] = random_formula(fs, &r, (const char(*)[2])vars, n_vars,
                                         (int)task_rng_range(&r, k.min_complexity, k.max_complexity));
        conclusion = find_conclusion(fs, &r, (const char(*)[2])vars, n_vars, premises, n);
    }
    if (conclusion < 0) {
        formula_set_destroy(&fs);
        snprintf(err, errlen,
                 "propositional_logic: no premises with a non-trivial conclusion in 1000 draws (seed %llu, index %llu)",
                 (unsigned long long)seed, (unsigned long long)index);
        return -1;
    }

    cJSON *m = out->metadata = task_metadata_new("propositional_logic", index);
    out->question = premises_question(fs, premises, n, cJSON_AddArrayToObject(m, "premises"));

    cJSON *vlist = cJSON_AddArrayToObject(m, "variables");
    for (int i = 0; i < n_vars; i++) cJSON_AddItemToArray(vlist, cJSON_CreateString(vars[i]));
    cJSON_AddNumberToObject(m, "complexity", formula_set_size(fs, conclusion));
    out->answer = formula_set_format(fs, conclusion);
    cJSON_AddStringToObject(m, "example_answer", out->answer);
    cJSON *d = cJSON_AddObjectToObject(m, "difficulty");
    cJSON_AddItemToObject(d, "vars", task_json_pair((double)k.min_vars, (double)k.max_vars));
    cJSON_AddItemToObject(d, "statements", task_json_pair((double)k.min_statements, (double)k.max_statements));
    cJSON_AddItemToObject(d, "complexity", task_json_pair((double)k.min_complexity, (double)k.max_complexity));
    formula_set_destroy(&fs);
    return 0;
}

/* reasoning-gym's score_answer. Where it raises ValueError, KeyError or
 * AttributeError (an empty subformula, missing metadata, a premise that is
 * not a string) it returns 0.0, and so do we. Where it would die instead
 * (nesting past Python's recursion limit) or run for hours (an entailed
 * answer over more than 2^26 assignments) we return 0.0 too. */
static double score(const char *answer, const task_question_t *e)
{
    if (!answer) return 0.0;
    const cJSON *vars = cJSON_GetObjectItemCaseSensitive(e->metadata, "variables");
    const cJSON *prem = cJSON_GetObjectItemCaseSensitive(e->metadata, "premises");
    if (!cJSON_IsArray(vars)) return 0.0;
    for (const char *p = answer; *p; p++) {
        if (*p < 'A' || *p > 'Z') continue;
        int known = 0;
        const cJSON *v;
        cJSON_ArrayForEach(v, vars) known |= cJSON_IsString(v) && v->valuestring[0] == *p && !v->valuestring[1];
        if (!known) return 0.0;
    }
    if (!cJSON_IsArray(prem)) return 0.0;
    int n = cJSON_GetArraySize(prem);
    int *premises = malloc(((size_t)n + 1) * sizeof *premises);
    formula_set_t *fs = formula_set_new();
    double result = 0.0;
    int i = 0, ok = 1;
    const cJSON *p;
    cJSON_ArrayForEach(p, prem)
    {
        if (!cJSON_IsString(p) || (premises[i++] = formula_set_parse(fs, p->valuestring, strlen(p->valuestring))) < 0) {
            ok = 0;
            break;
        }
    }
    int conclusion = ok ? formula_set_parse(fs, answer, strlen(answer)) : -1;
    int entailed, tautology;
    if (conclusion >= 0 &&
        formula_set_entails(fs, premises, n, conclusion, MAX_ASSIGNMENTS, &entailed, &tautology) == 0) {
        if (!entailed) result = 0.05;
        else if (tautology || formula_set_op(fs, conclusion) == FORMULA_VAR) result = 0.25;
        else result = 1.0;
    }
    formula_set_destroy(&fs);
    free(premises);
    return result;
}

const task_family_t task_family_propositional_logic = {
    "propositional_logic", default_config, validate_config, generate, score,
};
