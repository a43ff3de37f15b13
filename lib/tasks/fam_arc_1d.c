/* arc_1d: one-dimensional ARC puzzles. A row of cells holding colours 0-9
 * (0 is empty) is mapped to an output row by one rule; the question shows
 * num_train examples and asks for the output of a test input. Every rule
 * of reasoning-gym's arc_1d is here under its name (arc_1d_tasks.py's
 * ARC_1D_TASKS, 70 of them): the same construction with our PRNG. Scored by
 * the default scorer; the answer is the output row, cells separated by
 * single spaces. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/rng.h"
#include "tasks/task.h"

/* paint_biggest_block needs a unique largest block among about n/6 blocks
 * of sizes 2-6: at 300 cells one try in 2,000 succeeds, at 400 one in
 * 50,000, so reasoning-gym all but hangs on long rows; its curriculum stops
 * at 100 */
#define MAX_SIZE 200
#define MAX_TRAIN 100
/* a rule whose construction fails this often at one size is a bug: every
 * rule succeeds with good probability at every size >= 8 */
#define MAX_TRIES 100000

typedef unsigned char cell_t;

/* scratch lists for the rules, each room for n + 16 ints */
typedef struct {
    int *a, *b, *c;
} scratch_t;

typedef struct {
    task_rng_t *r;
    int n;
    cell_t *in, *out;
    scratch_t *s;
} arc_t;

static int draw(arc_t *t, int lo, int hi) { return (int)task_rng_range(t->r, lo, hi); }
static double rnd(arc_t *t) { return task_rng_double(t->r); }
static int below(arc_t *t, int n) { return (int)task_rng_below(t->r, (uint64_t)n); }

static void fill(cell_t *f, int from, int count, int color)
{
    for (int i = 0; i < count; i++) f[from + i] = (cell_t)color;
}

static void shuffle(arc_t *t, int *v, int n)
{
    for (int i = n - 1; i > 0; i--) {
        int j = below(t, i + 1), x = v[i];
        v[i] = v[j];
        v[j] = x;
    }
}

/* a random row: each cell empty or, with probability 1/2, a colour in [lo, hi] */
static void random_row(arc_t *t, int lo, int hi)
{
    for (int i = 0; i < t->n; i++) t->in[i] = (cell_t)(rnd(t) < 0.5 ? draw(t, lo, hi) : 0);
}

/* a block of size colours: all one colour (solid) or each its own */
static void random_block(arc_t *t, int *block, int size, int solid)
{
    int color = solid ? draw(t, 1, 9) : 0;
    for (int i = 0; i < size; i++) block[i] = solid ? color : draw(t, 1, 9);
}

static int move_n_pix(arc_t *t, int move, int solid)
{
    int n = t->n;
    if (n <= move + 1) return -1;
    int size = draw(t, 1, n - move - 1), pos = draw(t, 0, n - size - move), *block = t->s->a;
    random_block(t, block, size, solid);
    for (int i = 0; i < size; i++) t->in[pos + i] = (cell_t)block[i], t->out[pos + move + i] = (cell_t)block[i];
    return 0;
}

static int move_n_pix_wrapped(arc_t *t, int move, int solid)
{
    int n = t->n, size = draw(t, 1, n), pos = draw(t, 0, n - 1), *block = t->s->a;
    random_block(t, block, size, solid);
    for (int i = 0; i < size; i++) {
        t->in[(pos + i) % n] = (cell_t)block[i];
        t->out[(pos + move + i) % n] = (cell_t)block[i];
    }
    return 0;
}

static int gravity(arc_t *t, int move, int solid)
{
    (void)move, (void)solid;
    random_row(t, 1, 9);
    for (int i = 0, k = 0; i < t->n; i++)
        if (t->in[i]) t->out[k++] = t->in[i];
    return 0;
}

static int gravity_counting(arc_t *t, int move, int solid)
{
    (void)move, (void)solid;
    random_row(t, 1, 9);
    for (int i = 0, k = 0; i < t->n; i++)
        if (t->in[i]) t->out[k++] = 1;
    return 0;
}

static int gravity_antigravity(arc_t *t, int move, int solid)
{
    (void)move, (void)solid;
    random_row(t, 1, 2);
    int ones = 0, twos = 0;
    for (int i = 0; i < t->n; i++) ones += t->in[i] == 1, twos += t->in[i] == 2;
    fill(t->out, 0, twos, 2);
    fill(t->out, t->n - ones, ones, 1);
    return 0;
}

/* the placement shared by the block-and-dot rules: a block of size cells
 * strictly left or right of a dot, sides drawn evenly where both fit.
 * *left tells the side; -1 when neither fits. */
static int block_beside_dot(arc_t *t, int size, int dot, int *left)
{
    int can_left = dot >= size, can_right = dot + size < t->n;
    if (!can_left && !can_right) return -1;
    *left = can_left && can_right ? below(t, 2) == 0 : can_left;
    return *left ? draw(t, 0, dot - size) : draw(t, dot + 1, t->n - size);
}

static int block_touch_dot(arc_t *t, int move, int solid)
{
    (void)move, (void)solid;
    int color = draw(t, 2, 9), size = draw(t, 1, t->n - 1), dot = draw(t, 0, t->n - 1), left;
    int pos = block_beside_dot(t, size, dot, &left);
    if (pos < 0) return -1;
    t->in[dot] = t->out[dot] = 1;
    fill(t->in, pos, size, color);
    fill(t->out, left ? dot - size : dot + 1, size, color);
    return 0;
}

static int block_touch_dot_n_pix(arc_t *t, int move, int solid)
{
    (void)solid;
    int color = draw(t, 3, 9), size = draw(t, 1, t->n - 1), dot = draw(t, 0, t->n - 1), left;
    int pos = block_beside_dot(t, size, dot, &left);
    if (pos < 0) return -1;
    int distance = left ? dot - size - pos : pos - (dot + 1);
    int step = distance < move ? distance : move;
    t->in[dot] = t->out[dot] = 2;
    fill(t->in, pos, size, color);
    fill(t->out, left ? pos + step : pos - step, size, color);
    return 0;
}

static int block_scale_to_dot(arc_t *t, int move, int solid)
{
    (void)move, (void)solid;
    int color = draw(t, 3, 9), size = draw(t, 1, t->n - 1), dot = draw(t, 0, t->n - 1), left;
    int pos = block_beside_dot(t, size, dot, &left);
    if (pos < 0) return -1;
    t->in[dot] = t->out[dot] = 2;
    fill(t->in, pos, size, color);
    /* the grown block covers the dot, as in reasoning-gym */
    if (left) fill(t->out, pos, dot - pos + 1, color);
    else fill(t->out, dot, pos + size - dot, color);
    return 0;
}

static int two_points_and_fill(arc_t *t, int move, int solid)
{
    (void)move, (void)solid;
    int color = draw(t, 1, 9), p1 = draw(t, 0, t->n - 1), p2 = draw(t, 0, t->n - 1);
    if (p1 == p2) return -1;
    if (p1 > p2) {
        int x = p1;
        p1 = p2;
        p2 = x;
    }
    t->in[p1] = t->in[p2] = (cell_t)color;
    fill(t->out, p1, p2 - p1 + 1, color);
    return 0;
}

static int reflect_block_with_border_pixel(arc_t *t, int move, int solid)
{
    (void)move, (void)solid;
    int n = t->n, size = draw(t, 2, n), c1 = draw(t, 1, 9);
    /* the border colour: one of 1-8 other than c1 */
    int others = c1 <= 8 ? 7 : 8, c2 = 1 + below(t, others);
    if (c1 <= 8 && c2 >= c1) c2++;
    int left = rnd(t) < 0.5, pos = draw(t, 0, n - size);
    fill(t->in, pos, size, c1);
    fill(t->out, pos, size, c1);
    t->in[left ? pos : pos + size - 1] = (cell_t)c2;
    t->out[left ? pos + size - 1 : pos] = (cell_t)c2;
    return 0;
}

static int reflect_block_random(arc_t *t, int move, int solid)
{
    (void)move, (void)solid;
    int n = t->n, size = draw(t, 2, n), left = rnd(t) < 0.5, pos = draw(t, 0, n - size);
    int border = draw(t, 1, 9), others = border <= 8 ? 7 : 8, *block = t->s->a;
    for (int i = 0; i < size; i++) {
        int c = 1 + below(t, others);
        if (border <= 8 && c >= border) c++;
        block[i] = c;
    }
    block[left ? 0 : size - 1] = border;
    for (int i = 0; i < size; i++) t->in[pos + i] = (cell_t)block[i], t->out[pos + i] = (cell_t)block[size - 1 - i];
    return 0;
}

static int reflect_block_around_dot(arc_t *t, int move, int solid)
{
    (void)move, (void)solid;
    int n = t->n, dot = draw(t, 0, n - 1), size = draw(t, 1, n - 1), pos = draw(t, 0, n - size);
    int end = pos + size - 1;
    if (!(end < dot || pos > dot)) return -1;
    int color = draw(t, 3, 9);
    if (2 * dot - end < 0 || 2 * dot - pos >= n) return -1;
    fill(t->in, pos, size, color);
    t->in[dot] = t->out[dot] = 2;
    for (int i = 0; i < size; i++) t->out[2 * dot - (pos + i)] = (cell_t)color;
    return 0;
}

static int block_and_noise_remove(arc_t *t, int move, int solid)
{
    (void)move, (void)solid;
    int n = t->n, size = draw(t, 2, n), pos = draw(t, 0, n - size), color = draw(t, 1, 9);
    int *forbidden = t->s->a, *allowed = t->s->b, *noise = t->s->c;
    for (int i = 0; i < n; i++) forbidden[i] = i >= pos - 1 && i <= pos + size;
    int count = draw(t, 1, 3), placed = 0;
    fill(t->in, pos, size, color);
    for (int k = 0; k < count; k++) {
        int m = 0;
        for (int i = 0; i < n; i++)
            if (!forbidden[i]) allowed[m++] = i;
        if (m == 0) break;
        int p = allowed[below(t, m)];
        noise[placed++] = p;
        t->in[p] = (cell_t)color;
        for (int i = p - 1; i <= p + 1; i++)
            if (i >= 0 && i < n) forbidden[i] = 1;
    }
    if (placed < count) return -1;
    memcpy(t->out, t->in, (size_t)n);
    for (int k = 0; k < placed; k++) t->out[noise[k]] = 0;
    return 0;
}

static int block_and_noise_remove_inside(arc_t *t, int move, int solid)
{
    (void)move, (void)solid;
    int n = t->n;
    if (n <= 6) return -1;
    int size = draw(t, 6, n), pos = draw(t, 0, n - size), color = draw(t, 1, 9);
    int max_noise = size / 2 - 1 > 1 ? size / 2 - 1 : 1, count = draw(t, 1, max_noise), *offsets = t->s->a;
    fill(t->in, pos, size, color);
    fill(t->out, pos, size, color);
    for (int i = 0; i < size; i++) offsets[i] = i;
    shuffle(t, offsets, size);
    for (int k = 0; k < count; k++) {
        int noise;
        do noise = draw(t, 1, 9);
        while (noise == color);
        t->in[pos + offsets[k]] = (cell_t)noise;
    }
    return 0;
}

/* a block of 3 or 5 at the left end and dots to its right, far enough
 * apart that blocks centred on them do not touch; colors: each dot draws
 * its own colour and so does its copy */
static int copy_block_to_dots_any(arc_t *t, int colors)
{
    int n = t->n, size = rnd(t) < 0.5 ? 3 : 5;
    if (size >= n) return -1;
    int color = draw(t, 1, 9), *dots = t->s->a, *dot_colors = t->s->b, count = 0;
    for (int pos = size + size / 2 + 1; pos <= n - size; pos++) {
        if (rnd(t) < 0.5) {
            dot_colors[count] = colors ? draw(t, 1, 9) : color;
            dots[count++] = pos;
            pos += size;
        }
    }
    if (count == 0) return -1;
    fill(t->in, 0, size, color);
    fill(t->out, 0, size, color);
    for (int k = 0; k < count; k++) {
        t->in[dots[k]] = (cell_t)dot_colors[k];
        fill(t->out, dots[k] - size / 2, size, dot_colors[k]);
    }
    return 0;
}

static int copy_block_to_dots(arc_t *t, int move, int solid)
{
    (void)move, (void)solid;
    return copy_block_to_dots_any(t, 0);
}

static int copy_block_to_dots_colors(arc_t *t, int move, int solid)
{
    (void)move, (void)solid;
    return copy_block_to_dots_any(t, 1);
}

static int paint_biggest_block(arc_t *t, int move, int solid)
{
    (void)move, (void)solid;
    int n = t->n, color = draw(t, 2, 9), *starts = t->s->a, *sizes = t->s->b, count = 0;
    for (int pos = 0; pos < n;) {
        if (rnd(t) < 0.4 && n - pos >= 2) {
            int size = draw(t, 2, n - pos < 6 ? n - pos : 6);
            starts[count] = pos;
            sizes[count++] = size;
            fill(t->in, pos, size, color);
            pos += size + 1;
        } else {
            pos++;
        }
    }
    if (count < 2) return -1;
    int best = 0, ties = 0;
    for (int k = 1; k < count; k++)
        if (sizes[k] > sizes[best]) best = k;
    for (int k = 0; k < count; k++) ties += sizes[k] == sizes[best];
    if (ties > 1) return -1;
    memcpy(t->out, t->in, (size_t)n);
    fill(t->out, starts[best], sizes[best], 1);
    return 0;
}

static int cmp_int(const void *a, const void *b)
{
    return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

static int sort_blocks_by_size(arc_t *t, int move, int solid)
{
    (void)move, (void)solid;
    int n = t->n, color = draw(t, 1, 9), *sizes = t->s->a, count = 0;
    for (int pos = 0; pos < n;) {
        if (rnd(t) < 0.4 && n - pos >= 2) {
            int size = draw(t, 1, n - pos < 6 ? n - pos : 6);
            fill(t->in, pos, size, color);
            sizes[count++] = size;
            pos += size + draw(t, 1, 4);
        } else {
            pos++;
        }
    }
    if (count < 2) return -1;
    qsort(sizes, (size_t)count, sizeof *sizes, cmp_int);
    int total = count - 1;
    for (int k = 0; k < count; k++) total += sizes[k];
    if (total > n) return -1;
    for (int k = 0, pos = 0; k < count; pos += sizes[k] + 1, k++) fill(t->out, pos, sizes[k], color);
    return 0;
}

static int sort_complete_sequence(arc_t *t, int move, int solid)
{
    (void)move, (void)solid;
    int n = t->n, largest = 1, total = 0, *sizes = t->s->a;
    while (total + largest + 1 <= n) total += largest + 1, largest++;
    largest--;
    if (largest < 2) return -1;
    int color = draw(t, 1, 9);
    for (int k = 0; k < largest; k++) sizes[k] = k + 1;
    shuffle(t, sizes, largest);
    for (int k = 0, pos = 0; k < largest; pos += sizes[k] + 1, k++) fill(t->in, pos, sizes[k], color);
    for (int k = 1, pos = 0; k <= largest; pos += k + 1, k++) fill(t->out, pos, k, color);
    return 0;
}

static int recolor_blocks_by_size(arc_t *t, int move, int solid)
{
    (void)move, (void)solid;
    int n = t->n, s1 = draw(t, 2, 8), s2;
    do s2 = draw(t, 2, 8);
    while (s2 == s1);
    if (s1 + s2 + 1 > n) return -1;
    int p1 = draw(t, 0, n - (s1 + s2 + 1)), p2 = draw(t, p1 + s1 + 1, n - s2);
    fill(t->in, p1, s1, 3);
    fill(t->in, p2, s2, 3);
    fill(t->out, p1, s1, s1 > s2 ? 1 : 2);
    fill(t->out, p2, s2, s1 > s2 ? 2 : 1);
    return 0;
}

static int gravity_one_step(arc_t *t, int move, int solid)
{
    (void)move, (void)solid;
    random_row(t, 1, 9);
    memcpy(t->out, t->in, (size_t)t->n);
    /* left to right over the row being changed: a pixel that moved leaves
     * a gap its right neighbour moves into, as in reasoning-gym */
    for (int i = 1; i < t->n; i++)
        if (t->out[i] && !t->out[i - 1]) t->out[i - 1] = t->out[i], t->out[i] = 0;
    return 0;
}

static int move_block_by_own_size(arc_t *t, int move, int solid)
{
    (void)move, (void)solid;
    int n = t->n, size = draw(t, 1, n / 2), pos = draw(t, 0, n - 2 * size), color = draw(t, 1, 9);
    fill(t->in, pos, size, color);
    fill(t->out, pos + size, size, color);
    return 0;
}

static int change_to_five(arc_t *t, int move, int solid)
{
    (void)move, (void)solid;
    random_row(t, 1, 9);
    for (int i = 0; i < t->n; i++) t->out[i] = t->in[i] ? 5 : 0;
    return 0;
}

static int recolor_blocks_from_palette(arc_t *t, int move, int solid)
{
    (void)move, (void)solid;
    int n = t->n, size = draw(t, 2, 4), *blocks = t->s->a, *colors = t->s->b, count = 0;
    for (int pos = 0; pos + size <= n;) {
        if (rnd(t) < 0.4) {
            blocks[count++] = pos;
            pos += size + 1;
        } else {
            pos++;
        }
    }
    /* the palette holds distinct colours 1-9; reasoning-gym draws a tenth
     * forever when more blocks fit (rows of about 40 cells and more) */
    if (count > 9) count = 9;
    while (count > 0 && blocks[count - 1] + size + count + 1 >= n) count--;
    if (count == 0) return -1;
    for (int k = 0; k < count; k++) {
        int c, fresh;
        do {
            c = draw(t, 1, 9);
            fresh = 1;
            for (int j = 0; j < k; j++) fresh &= colors[j] != c;
        } while (!fresh);
        colors[k] = c;
        t->in[k] = t->out[k] = (cell_t)c;
    }
    for (int k = 0; k < count; k++) {
        fill(t->in, blocks[k] + count + 1, size, 5);
        fill(t->out, blocks[k] + count + 1, size, colors[k]);
    }
    return 0;
}

static int duplicate_block_from_seeds(arc_t *t, int move, int solid)
{
    (void)move, (void)solid;
    int n = t->n, size = draw(t, 2, 4);
    if (size + 1 >= n || n <= 3 + size) return -1;
    int pos = draw(t, 2, n - size - 2), left = 0, right = 0;
    while (!left && !right) {
        left = rnd(t) < 0.5;
        right = rnd(t) < 0.5;
    }
    fill(t->in, pos, size, 1);
    int left_color = 0, right_color = 0;
    if (left) t->in[pos - 2] = (cell_t)(left_color = draw(t, 1, 9));
    if (right) t->in[pos + size + 1] = (cell_t)(right_color = draw(t, 1, 9));
    memcpy(t->out, t->in, (size_t)n);
    /* copies of the block repeat outwards from each seed, one gap apart,
     * cut at the edge */
    if (left) {
        for (int end = pos - 2; end >= 0;) {
            int start = end - size + 1;
            for (int i = start < 0 ? 0 : start; i <= end; i++) t->out[i] = (cell_t)left_color;
            if (start < 1) break;
            end = start - 2;
        }
    }
    if (right) {
        for (int start = pos + size + 1; start < n;) {
            for (int i = start; i < start + size && i < n; i++) t->out[i] = (cell_t)right_color;
            if (start + size + 1 >= n) break;
            start += size + 1;
        }
    }
    return 0;
}

static int fill_from_pixel(arc_t *t, int move, int solid)
{
    (void)move, (void)solid;
    int n = t->n;
    if (n < 8) return -1;
    int size = draw(t, 3, n - 5), pos = draw(t, 2, n - size - 2), color = draw(t, 1, 9);
    int seed = draw(t, 1, 8);
    if (seed >= color) seed++;
    int left = rnd(t) < 0.5;
    fill(t->in, pos, size, color);
    t->in[left ? pos - 1 : pos + size] = (cell_t)seed;
    memcpy(t->out, t->in, (size_t)n);
    if (left) fill(t->out, 0, pos, seed);
    else fill(t->out, pos + size, n - pos - size, seed);
    return 0;
}

static int mark_size_two_blocks(arc_t *t, int move, int solid)
{
    (void)move, (void)solid;
    int n = t->n, *sizes = t->s->a, count = 0;
    if (n < 8) return -1;
    /* block sizes (0 for one empty cell) that fit with two-cell gaps in
     * whatever order, one of them of size 2 */
    sizes[count++] = 2;
    for (int pos = 4; pos < n;) {
        if (rnd(t) < 0.4) {
            int size = draw(t, 1, 3);
            if (pos + size <= n) sizes[count++] = size;
            pos += size + 2;
        } else {
            sizes[count++] = 0;
            pos++;
        }
    }
    shuffle(t, sizes, count);
    for (int k = 0, pos = 0; k < count; k++) {
        if (sizes[k] == 0) {
            pos++;
            continue;
        }
        int color = draw(t, 1, 8);
        if (color >= 3) color++;
        fill(t->in, pos, sizes[k], color);
        pos += sizes[k] + 2;
    }
    memcpy(t->out, t->in, (size_t)n);
    for (int k = 0, pos = 0; k < count; k++) {
        if (sizes[k] == 0) {
            pos++;
            continue;
        }
        if (sizes[k] == 2) {
            if (pos > 0) t->out[pos - 1] = 3;
            if (pos + 2 < n) t->out[pos + 2] = 3;
        }
        pos += sizes[k] + 2;
    }
    return 0;
}

static int fill_until_collision(arc_t *t, int move, int solid)
{
    (void)move, (void)solid;
    int n = t->n;
    if (n < 4) return -1;
    int left = rnd(t) < 0.5, count = draw(t, 2, 4), *pos = t->s->a;
    t->in[left ? 0 : n - 1] = 5;
    for (int k = 0; k < count; k++) {
        int p, fresh;
        do {
            p = left ? draw(t, 1, n - 1) : draw(t, 0, n - 2);
            fresh = 1;
            for (int j = 0; j < k; j++) fresh &= pos[j] != p;
        } while (!fresh);
        pos[k] = p;
    }
    for (int k = 0; k < count; k++) {
        int c = draw(t, 1, 8);
        if (c >= 5) c++;
        t->in[pos[k]] = (cell_t)c;
    }
    qsort(pos, (size_t)count, sizeof *pos, cmp_int);
    memcpy(t->out, t->in, (size_t)n);
    /* each pixel paints the empty run between itself and the marker side */
    if (left) {
        for (int k = 0, prev = 0; k < count; prev = pos[k], k++)
            for (int i = prev + 1; i < pos[k]; i++) t->out[i] = t->in[pos[k]];
    } else {
        for (int k = count - 1, prev = n - 1; k >= 0; prev = pos[k], k--)
            for (int i = pos[k] + 1; i < prev; i++) t->out[i] = t->in[pos[k]];
    }
    return 0;
}

static int repeat_pattern_full(arc_t *t, int move, int solid)
{
    (void)move, (void)solid;
    int n = t->n, size = draw(t, 2, 5), *pattern = t->s->a;
    for (int i = 0; i < size; i++) pattern[i] = draw(t, 1, 9);
    if (2 * size >= n) return -1;
    for (int i = 0; i < size; i++) t->in[i] = t->in[i + size] = (cell_t)pattern[i];
    for (int i = 0; i < n; i++) t->out[i] = (cell_t)pattern[i % size];
    return 0;
}

static int gravity_weighted_colors(arc_t *t, int move, int solid)
{
    (void)move, (void)solid;
    random_row(t, 1, 2);
    int ones = 0, twos = 0;
    for (int i = 0; i < t->n; i++) ones += t->in[i] == 1, twos += t->in[i] == 2;
    fill(t->out, 0, twos, 2);
    fill(t->out, twos, ones, 1);
    return 0;
}

static int color_left_half_blocks(arc_t *t, int move, int solid)
{
    (void)move, (void)solid;
    int n = t->n, *starts = t->s->a, *sizes = t->s->b, count = 0;
    for (int pos = 0; pos < n;) {
        if (rnd(t) < 0.4) {
            int size = draw(t, 2, n / 2);
            if (pos + size > n) break;
            starts[count] = pos;
            sizes[count++] = size;
            fill(t->in, pos, size, 2);
            pos += size + 1;
        } else {
            pos++;
        }
    }
    if (count < 2) return -1;
    memcpy(t->out, t->in, (size_t)n);
    for (int k = 0; k < count; k++) fill(t->out, starts[k], sizes[k] / 2, 8);
    return 0;
}

typedef int (*rule_fn)(arc_t *t, int move, int solid);
/* what reasoning-gym applies to a rule's example: nothing, reverse both
 * rows (the _left variants), or swap input and output (_inv) */
enum { AS_IS, MIRROR, INVERSE };

typedef struct {
    const char *name;
    rule_fn fn;
    int move, solid, post;
} rule_t;

static const rule_t rules[] = {
    {"move_1pix_solid_right", move_n_pix, 1, 1, AS_IS},
    {"move_2pix_solid_right", move_n_pix, 2, 1, AS_IS},
    {"move_3pix_solid_right", move_n_pix, 3, 1, AS_IS},
    {"move_4pix_solid_right", move_n_pix, 4, 1, AS_IS},
    {"move_1pix_colorful_right", move_n_pix, 1, 0, AS_IS},
    {"move_2pix_colorful_right", move_n_pix, 2, 0, AS_IS},
    {"move_3pix_colorful_right", move_n_pix, 3, 0, AS_IS},
    {"move_4pix_colorful_right", move_n_pix, 4, 0, AS_IS},
    {"move_1pix_solid_left", move_n_pix, 1, 1, MIRROR},
    {"move_2pix_solid_left", move_n_pix, 2, 1, MIRROR},
    {"move_3pix_solid_left", move_n_pix, 3, 1, MIRROR},
    {"move_4pix_solid_left", move_n_pix, 4, 1, MIRROR},
    {"move_1pix_colorful_left", move_n_pix, 1, 0, MIRROR},
    {"move_2pix_colorful_left", move_n_pix, 2, 0, MIRROR},
    {"move_3pix_colorful_left", move_n_pix, 3, 0, MIRROR},
    {"move_4pix_colorful_left", move_n_pix, 4, 0, MIRROR},
    {"move_1pix_solid_wrapped_right", move_n_pix_wrapped, 1, 1, AS_IS},
    {"move_2pix_solid_wrapped_right", move_n_pix_wrapped, 2, 1, AS_IS},
    {"move_3pix_solid_wrapped_right", move_n_pix_wrapped, 3, 1, AS_IS},
    {"move_4pix_solid_wrapped_right", move_n_pix_wrapped, 4, 1, AS_IS},
    {"move_1pix_colorful_wrapped_right", move_n_pix_wrapped, 1, 0, AS_IS},
    {"move_2pix_colorful_wrapped_right", move_n_pix_wrapped, 2, 0, AS_IS},
    {"move_3pix_colorful_wrapped_right", move_n_pix_wrapped, 3, 0, AS_IS},
    {"move_4pix_colorful_wrapped_right", move_n_pix_wrapped, 4, 0, AS_IS},
    {"move_1pix_solid_wrapped_left", move_n_pix_wrapped, 1, 1, MIRROR},
    {"move_2pix_solid_wrapped_left", move_n_pix_wrapped, 2, 1, MIRROR},
    {"move_3pix_solid_wrapped_left", move_n_pix_wrapped, 3, 1, MIRROR},
    {"move_4pix_solid_wrapped_left", move_n_pix_wrapped, 4, 1, MIRROR},
    {"move_1pix_colorful_wrapped_left", move_n_pix_wrapped, 1, 0, MIRROR},
    {"move_2pix_colorful_wrapped_left", move_n_pix_wrapped, 2, 0, MIRROR},
    {"move_3pix_colorful_wrapped_left", move_n_pix_wrapped, 3, 0, MIRROR},
    {"move_4pix_colorful_wrapped_left", move_n_pix_wrapped, 4, 0, MIRROR},
    {"gravity_right", gravity, 0, 0, AS_IS},
    {"gravity_counting_right", gravity_counting, 0, 0, AS_IS},
    {"gravity_antigravity_right", gravity_antigravity, 0, 0, AS_IS},
    {"gravity_one_step_right", gravity_one_step, 0, 0, AS_IS},
    {"gravity_weighted_colors_right", gravity_weighted_colors, 0, 0, AS_IS},
    {"gravity_left", gravity, 0, 0, MIRROR},
    {"gravity_counting_left", gravity_counting, 0, 0, MIRROR},
    {"gravity_antigravity_left", gravity_antigravity, 0, 0, MIRROR},
    {"gravity_one_step_left", gravity_one_step, 0, 0, MIRROR},
    {"gravity_weighted_colors_left", gravity_weighted_colors, 0, 0, MIRROR},
    {"block_touch_dot", block_touch_dot, 0, 0, AS_IS},
    {"block_touch_dot_1pix", block_touch_dot_n_pix, 1, 0, AS_IS},
    {"block_touch_dot_2pix", block_touch_dot_n_pix, 2, 0, AS_IS},
    {"block_touch_dot_3pix", block_touch_dot_n_pix, 3, 0, AS_IS},
    {"block_touch_dot_4pix", block_touch_dot_n_pix, 4, 0, AS_IS},
    {"block_scale_to_dot", block_scale_to_dot, 0, 0, AS_IS},
    {"block_and_noise_remove", block_and_noise_remove, 0, 0, AS_IS},
    {"block_and_noise_remove_inside", block_and_noise_remove_inside, 0, 0, AS_IS},
    {"move_block_by_own_size", move_block_by_own_size, 0, 0, AS_IS},
    {"two_points_and_fill", two_points_and_fill, 0, 0, AS_IS},
    {"two_points_and_fill_inv", two_points_and_fill, 0, 0, INVERSE},
    {"copy_block_to_dots", copy_block_to_dots, 0, 0, AS_IS},
    {"copy_block_to_dots_colors", copy_block_to_dots_colors, 0, 0, AS_IS},
    {"repeat_pattern_full", repeat_pattern_full, 0, 0, AS_IS},
    {"reflect_block_with_border_pixel", reflect_block_with_border_pixel, 0, 0, AS_IS},
    {"reflect_block_random", reflect_block_random, 0, 0, AS_IS},
    {"reflect_block_around_dot", reflect_block_around_dot, 0, 0, AS_IS},
    {"paint_biggest_block", paint_biggest_block, 0, 0, AS_IS},
    {"recolor_blocks_by_size", recolor_blocks_by_size, 0, 0, AS_IS},
    {"change_to_five", change_to_five, 0, 0, AS_IS},
    {"recolor_blocks_from_palette", recolor_blocks_from_palette, 0, 0, AS_IS},
    {"color_left_half_blocks", color_left_half_blocks, 0, 0, AS_IS},
    {"sort_blocks_by_size", sort_blocks_by_size, 0, 0, AS_IS},
    {"sort_complete_sequence", sort_complete_sequence, 0, 0, AS_IS},
    {"duplicate_block_from_seeds", duplicate_block_from_seeds, 0, 0, AS_IS},
    {"fill_from_pixel", fill_from_pixel, 0, 0, AS_IS},
    {"fill_until_collision", fill_until_collision, 0, 0, AS_IS},
    {"mark_size_two_blocks", mark_size_two_blocks, 0, 0, AS_IS},
};
#define N_RULES ((int)(sizeof rules / sizeof rules[0]))

/* Makes one example of rule into in/out (n cells each), trying again
 * while the rule's construction fails; 0, or -1 after MAX_TRIES. */
static int make_example(const rule_t *rule, task_rng_t *r, int n, scratch_t *s, cell_t *in, cell_t *out)
{
    arc_t t = {r, n, in, out, s};
    for (int tries = 0; tries < MAX_TRIES; tries++) {
        memset(in, 0, (size_t)n);
        memset(out, 0, (size_t)n);
        if (rule->fn(&t, rule->move, rule->solid) < 0) continue;
        if (rule->post == MIRROR) {
            for (int i = 0, j = n - 1; i < j; i++, j--) {
                cell_t x = in[i];
                in[i] = in[j];
                in[j] = x;
                x = out[i];
                out[i] = out[j];
                out[j] = x;
            }
        } else if (rule->post == INVERSE) {
            for (int i = 0; i < n; i++) {
                cell_t x = in[i];
                in[i] = out[i];
                out[i] = x;
            }
        }
        return 0;
    }
    return -1;
}

static cJSON *default_config(void)
{
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "min_size", 10);
    cJSON_AddNumberToObject(c, "max_size", 30);
    cJSON_AddNumberToObject(c, "num_train", 3);
    return c;
}

typedef struct {
    int64_t min_size, max_size, num_train;
} config_t;

static int read_config(const cJSON *c, config_t *k, char *err, size_t errlen)
{
    return task_config_int(c, "min_size", &k->min_size, err, errlen) ||
                   task_config_int(c, "max_size", &k->max_size, err, errlen) ||
                   task_config_int(c, "num_train", &k->num_train, err, errlen)
               ? -1
               : 0;
}

static int validate_config(const cJSON *c, char *err, size_t errlen)
{
    config_t k;
    if (read_config(c, &k, err, errlen)) return -1;
    const char *bad = k.min_size < 8            ? "min_size must be >= 8"
                      : k.max_size < k.min_size ? "max_size must be >= min_size"
                      : k.max_size > MAX_SIZE   ? "max_size must be at most 200"
                      : k.num_train <= 0        ? "num_train must be positive"
                      : k.num_train > MAX_TRAIN ? "num_train must be at most 100"
                                                : NULL;
    if (bad) snprintf(err, errlen, "arc_1d config: %s", bad);
    return bad ? -1 : 0;
}

static cJSON *row_json(const cell_t *row, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(row[i]));
    return a;
}

static cJSON *example_json(const cell_t *in, const cell_t *out, int n)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "input", row_json(in, n));
    cJSON_AddItemToObject(o, "output", row_json(out, n));
    return o;
}

/* "d d d ... d" into text (room for 2n bytes) */
static char *row_text(const cell_t *row, int n, char *text)
{
    for (int i = 0; i < n; i++) {
        text[2 * i] = (char)('0' + row[i]);
        text[2 * i + 1] = i + 1 < n ? ' ' : '\0';
    }
    return text;
}

static int generate(const cJSON *c, uint64_t seed, uint64_t index, task_question_t *out, char *err, size_t errlen)
{
    config_t k;
    if (read_config(c, &k, err, errlen)) return -1;
    task_rng_t r;
    task_rng_init(&r, seed, index);
    const rule_t *rule = &rules[task_rng_below(&r, N_RULES)];
    int n = (int)task_rng_range(&r, k.min_size, k.max_size), examples = (int)k.num_train + 1;
    size_t room = (size_t)n + 16;
    scratch_t s = {malloc(3 * room * sizeof(int)), NULL, NULL};
    cell_t *rows = malloc((size_t)examples * 2 * (size_t)n);
    char *text = malloc(2 * (size_t)n + 1);
    s.b = s.a + room;
    s.c = s.b + room;
    for (int e = 0; e < examples; e++) {
        if (make_example(rule, &r, n, &s, rows + (size_t)e * 2 * (size_t)n, rows + ((size_t)e * 2 + 1) * (size_t)n) <
            0) {
            snprintf(err, errlen, "arc_1d: rule %s made no example of size %d in %d tries", rule->name, n, MAX_TRIES);
            free(s.a);
            free(rows);
            free(text);
            return -1;
        }
    }

    size_t qcap = 512 + (size_t)examples * (4 * (size_t)n + 64), qlen = 0;
    char *q = malloc(qcap);
    qlen += (size_t)snprintf(
        q, qcap,
        "Each example below turns an input row of cells into an output row by the same rule. A cell holds "
        "a colour from 0 to 9, and 0 means empty.\n\n");
    cJSON *m = out->metadata = task_metadata_new("arc_1d", index);
    cJSON_AddStringToObject(m, "task_name", rule->name);
    cJSON_AddNumberToObject(m, "size", n);
    cJSON *train = cJSON_AddArrayToObject(m, "train_examples");
    for (int e = 0; e < examples; e++) {
        const cell_t *in = rows + (size_t)e * 2 * (size_t)n, *o = in + n;
        if (e < examples - 1) {
            cJSON_AddItemToArray(train, example_json(in, o, n));
            qlen += (size_t)snprintf(q + qlen, qcap - qlen, "Example %d\ninput:  %s\n", e + 1, row_text(in, n, text));
            qlen += (size_t)snprintf(q + qlen, qcap - qlen, "output: %s\n\n", row_text(o, n, text));
        } else {
            cJSON_AddItemToObject(m, "test_example", example_json(in, o, n));
            qlen += (size_t)snprintf(
                q + qlen, qcap - qlen,
                "Find the rule and apply it to this test input:\n%s\n\n"
                "Answer with the output row only, its cells separated by single spaces, like the rows above.",
                row_text(in, n, text));
            out->answer = strdup(row_text(o, n, text));
        }
    }
    cJSON *d = cJSON_AddObjectToObject(m, "difficulty");
    cJSON_AddItemToObject(d, "size", task_json_pair((double)k.min_size, (double)k.max_size));
    out->question = q;
    free(s.a);
    free(rows);
    free(text);
    return 0;
}

static double score(const char *answer, const task_question_t *e) { return task_score_default(answer, e->answer); }

const task_family_t task_family_arc_1d = {
    "arc_1d", default_config, validate_config, generate, score,
};
