/* Propositional formulas for the propositional_logic family, read and
 * written the way reasoning-gym reads and writes them, and the truth-table
 * entailment check its scorer makes.
 *
 * Text form: variables are names, ¬ is prefix, the binary connectives ∧ ∨ →
 * ↔ are infix with spaces, and every binary formula is parenthesised:
 * "(¬P ∨ (Q ↔ R))". The reader is reasoning-gym's, decision for decision, so
 * a model's answer means the same thing to both: the lowest-precedence
 * connective (↔, then →, ∨, ∧) outside parentheses that lies furthest right
 * splits the text, a leading ¬ negates the rest, a fully enclosed text loses
 * its parentheses, and any other text, whatever it holds, is one variable
 * named by that text with surrounding whitespace stripped. */
#ifndef SAPO_TASKS_FORMULA_H
#define SAPO_TASKS_FORMULA_H

#include <stddef.h>

typedef enum { FORMULA_VAR, FORMULA_NOT, FORMULA_AND, FORMULA_OR, FORMULA_IMPLIES, FORMULA_IFF } formula_op_t;

/* Formulas over one table of variable names; a formula is the id of its
 * root node, and nodes are shared and never freed before the set. */
typedef struct formula_set formula_set_t;

formula_set_t *formula_set_new(void);
void formula_set_destroy(formula_set_t **self_p);

/* Parse errors, as the negative return of formula_set_parse */
enum {
    FORMULA_EMPTY = -1, /* an empty (sub)formula: reasoning-gym's ValueError */
    FORMULA_DEEP = -2,  /* nested deeper than FORMULA_MAX_DEPTH */
};
/* Deeper than this, reasoning-gym's recursive reader dies of Python's
 * recursion limit instead of returning a score. */
#define FORMULA_MAX_DEPTH 1000

/* Parses len bytes of UTF-8 text; the formula id, or FORMULA_EMPTY /
 * FORMULA_DEEP. */
int formula_set_parse(formula_set_t *self, const char *text, size_t len);

/* Builders for the generator: a variable by name, ¬a, (a op b). */
int formula_set_var(formula_set_t *self, const char *name);
int formula_set_not(formula_set_t *self, int a);
int formula_set_binary(formula_set_t *self, formula_op_t op, int a, int b);

formula_op_t formula_set_op(const formula_set_t *self, int f);
/* the operand of ¬ (which 0) or either side of a binary connective (0, 1) */
int formula_set_child(const formula_set_t *self, int f, int which);

/* The text form as reasoning-gym prints it; a new string. */
char *formula_set_format(const formula_set_t *self, int f);

/* Nodes in f, counting each variable occurrence and connective once:
 * reasoning-gym's complexity measure. */
int formula_set_size(const formula_set_t *self, int f);

/* Truth tables over every variable of the premises and the conclusion.
 * *entailed: every assignment making all premises true makes the
 * conclusion true. *tautology (if not NULL, and only meaningful when
 * entailed): the conclusion holds under every assignment. Returns 0, or -1
 * when more than max_assignments assignments would be needed to decide
 * (the check stops early at the first counterexample, so an answer that is
 * not entailed is decided quickly even over many variables). */
int formula_set_entails(const formula_set_t *self, const int *premises, int n_premises, int conclusion,
                        double max_assignments, int *entailed, int *tautology);

#endif
