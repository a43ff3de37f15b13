/* gsm_symbolic: grade-school math word problems from templates whose
 * numbers are drawn from ranges, each answer a positive whole number (sums,
 * differences, products, rates, money, time). The templates and their
 * wording are ours; reasoning-gym's dataset is the model for the config,
 * the metadata and the scorer: the first number in the answer (an optional
 * minus and decimals) is compared as a float with the truth, 1.0 when
 * equal and 0.01 for any other number. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tasks/py.h"
#include "tasks/rng.h"
#include "tasks/task.h"

static const char *const suffix = " Give the final answer as a whole number, without units, between <answer> and "
                                  "</answer>.";

typedef struct {
    const char *name, *they, *their; /* "Maya", "she", "her" */
} person_t;

static const person_t people[] = {
    {"Maya", "she", "her"},   {"Tomas", "he", "his"}, {"Priya", "she", "her"}, {"Kwame", "he", "his"},
    {"Lena", "she", "her"},   {"Diego", "he", "his"}, {"Aiko", "she", "her"},  {"Omar", "he", "his"},
    {"Freya", "she", "her"},  {"Sipho", "he", "his"}, {"Nadia", "she", "her"}, {"Mateo", "he", "his"},
    {"Ingrid", "she", "her"}, {"Ravi", "he", "his"},  {"Zoe", "she", "her"},   {"Hamid", "he", "his"},
};
#define COUNT(a) (sizeof(a) / sizeof *(a))

/* One draw of a template: the question, a worked solution ending in
 * "#### N", the answer and the variables, as reasoning-gym's metadata
 * holds them. */
typedef struct {
    task_rng_t *r;
    cJSON *vars;
    char *question, *cot;
    int64_t answer;
} draw_t;

static int64_t num(draw_t *d, const char *name, int64_t lo, int64_t hi)
{
    int64_t v = task_rng_range(d->r, lo, hi);
    cJSON_AddNumberToObject(d->vars, name, (double)v);
    return v;
}

/* a multiple of step in [lo, hi] (lo and hi multiples of step) */
static int64_t num_step(draw_t *d, const char *name, int64_t lo, int64_t hi, int64_t step)
{
    int64_t v = lo + step * task_rng_range(d->r, 0, (hi - lo) / step);
    cJSON_AddNumberToObject(d->vars, name, (double)v);
    return v;
}

static void derived(draw_t *d, const char *name, int64_t v) { cJSON_AddNumberToObject(d->vars, name, (double)v); }

static const char *word(draw_t *d, const char *name, const char *const *list, size_t n)
{
    const char *w = list[task_rng_below(d->r, n)];
    cJSON_AddStringToObject(d->vars, name, w);
    return w;
}

static const person_t *person(draw_t *d, const char *name)
{
    const person_t *p = &people[task_rng_below(d->r, COUNT(people))];
    cJSON_AddStringToObject(d->vars, name, p->name);
    return p;
}

/* a second person other than p */
static const person_t *other(draw_t *d, const char *name, const person_t *p)
{
    const person_t *q;
    do q = &people[task_rng_below(d->r, COUNT(people))];
    while (q == p);
    cJSON_AddStringToObject(d->vars, name, q->name);
    return q;
}

static void shelves(draw_t *d)
{
    const person_t *p = person(d, "name");
    static const char *const places[] = {"library", "classroom", "bookshop", "attic"};
    const char *place = word(d, "place", places, COUNT(places));
    int64_t a = num(d, "shelf1", 12, 60), b = num(d, "shelf2", 12, 60), c = num(d, "shelf3", 12, 60);
    d->answer = a + b + c;
    d->question = task_strdupf("%s is tidying the %s, which has three shelves of books. The first shelf holds %lld "
                               "books, the second holds %lld and the third holds %lld. How many books are on the "
                               "three shelves altogether?",
                               p->name, place, (long long)a, (long long)b, (long long)c);
    d->cot = task_strdupf("%lld + %lld + %lld = %lld books.\n#### %lld", (long long)a, (long long)b, (long long)c,
                          (long long)d->answer, (long long)d->answer);
}

static void babysitting(draw_t *d)
{
    const person_t *p = person(d, "name");
    static const char *const items[] = {"bicycle", "guitar", "skateboard", "telescope", "tent"};
    const char *item = word(d, "item", items, COUNT(items));
    int64_t saved = num(d, "saved", 10, 100), wage = num(d, "hourly_pay", 5, 15), hours = num(d, "hours", 2, 20);
    int64_t price = saved + wage * hours;
    derived(d, "price", price);
    d->answer = hours;
    d->question =
        task_strdupf("%s wants to buy a %s that costs $%lld. %s has already saved $%lld and earns $%lld for "
                     "every hour of babysitting. How many hours of babysitting does %s still need to do to "
                     "afford the %s?",
                     p->name, item, (long long)price, p->name, (long long)saved, (long long)wage, p->they, item);
    d->cot = task_strdupf("%s still needs $%lld - $%lld = $%lld.\nAt $%lld an hour that is %lld / %lld = %lld hours.\n"
                          "#### %lld",
                          p->name, (long long)price, (long long)saved, (long long)(price - saved), (long long)wage,
                          (long long)(price - saved), (long long)wage, (long long)hours, (long long)hours);
}

static void crates(draw_t *d)
{
    static const char *const fruits[] = {"apples", "pears", "peaches", "oranges", "plums"};
    const char *fruit = word(d, "fruit", fruits, COUNT(fruits));
    int64_t n = num(d, "crates", 3, 25), rows = num(d, "rows", 2, 6), per_row = num(d, "per_row", 4, 12);
    d->answer = n * rows * per_row;
    d->question =
        task_strdupf("An orchard packs %lld crates of %s. Each crate holds %lld rows with %lld %s in each row. "
                     "How many %s are packed in all?",
                     (long long)n, fruit, (long long)rows, (long long)per_row, fruit, fruit);
    d->cot = task_strdupf("Each crate holds %lld * %lld = %lld %s.\n%lld crates hold %lld * %lld = %lld %s.\n#### %lld",
                          (long long)rows, (long long)per_row, (long long)(rows * per_row), fruit, (long long)n,
                          (long long)n, (long long)(rows * per_row), (long long)d->answer, fruit, (long long)d->answer);
}

static void reading(draw_t *d)
{
    const person_t *p = person(d, "name");
    int64_t per_day = num(d, "pages_per_day", 8, 30), days = num(d, "days", 3, 20), read = num(d, "pages_read", 10, 80);
    int64_t total = read + per_day * days;
    derived(d, "total_pages", total);
    d->answer = days;
    d->question =
        task_strdupf("%s is reading a novel of %lld pages and has already read %lld of them. If %s reads %lld "
                     "pages every day from now on, how many more days will it take %s to finish the book?",
                     p->name, (long long)total, (long long)read, p->they, (long long)per_day, p->name);
    d->cot = task_strdupf("%lld - %lld = %lld pages are left.\n%lld / %lld = %lld days.\n#### %lld", (long long)total,
                          (long long)read, (long long)(total - read), (long long)(total - read), (long long)per_day,
                          (long long)days, (long long)days);
}

static void cafe(draw_t *d)
{
    const person_t *p = person(d, "name");
    int64_t n1 = num(d, "sandwiches", 2, 4), p1 = num(d, "sandwich_price", 4, 9);
    int64_t n2 = num(d, "juices", 2, 4), p2 = num(d, "juice_price", 2, 5);
    int64_t cost = n1 * p1 + n2 * p2, bill = cost < 20 ? 20 : cost < 50 ? 50 : 100;
    derived(d, "bill", bill);
    d->answer = bill - cost;
    d->question =
        task_strdupf("At a cafe, %s buys %lld sandwiches at $%lld each and %lld juices at $%lld each, and pays "
                     "with a $%lld note. How many dollars of change does %s get back?",
                     p->name, (long long)n1, (long long)p1, (long long)n2, (long long)p2, (long long)bill, p->they);
    d->cot = task_strdupf("The food costs %lld * $%lld + %lld * $%lld = $%lld.\nThe change is $%lld - $%lld = $%lld.\n"
                          "#### %lld",
                          (long long)n1, (long long)p1, (long long)n2, (long long)p2, (long long)cost, (long long)bill,
                          (long long)cost, (long long)d->answer, (long long)d->answer);
}

static void marathon(draw_t *d)
{
    const person_t *p = person(d, "name");
    int64_t n = num(d, "episodes", 3, 8), len = num(d, "episode_minutes", 20, 55),
            pause = num(d, "break_minutes", 5, 15);
    d->answer = n * len + (n - 1) * pause;
    d->question = task_strdupf("%s watches %lld episodes of a series in one evening. Each episode lasts %lld minutes, "
                               "with a break of %lld minutes between one episode and the next but none after the last. "
                               "How many minutes does the evening of watching take from start to finish?",
                               p->name, (long long)n, (long long)len, (long long)pause);
    d->cot = task_strdupf("The episodes take %lld * %lld = %lld minutes.\nThere are %lld breaks: %lld * %lld = %lld "
                          "minutes.\n%lld + %lld = %lld minutes.\n#### %lld",
                          (long long)n, (long long)len, (long long)(n * len), (long long)(n - 1), (long long)(n - 1),
                          (long long)pause, (long long)((n - 1) * pause), (long long)(n * len),
                          (long long)((n - 1) * pause), (long long)d->answer, (long long)d->answer);
}

static void shift(draw_t *d)
{
    const person_t *p = person(d, "name");
    int64_t start = num(d, "start_hour_am", 6, 10), end = num(d, "end_hour_pm", 1, 6);
    int64_t lunch = num_step(d, "lunch_minutes", 20, 60, 5);
    int64_t hours = end + 12 - start;
    d->answer = hours * 60 - lunch;
    d->question =
        task_strdupf("%s starts work at %lld a.m. and leaves at %lld p.m., taking a %lld-minute lunch break in "
                     "between. How many minutes does %s actually work that day?",
                     p->name, (long long)start, (long long)end, (long long)lunch, p->they);
    d->cot = task_strdupf("From %lld a.m. to %lld p.m. is %lld hours, or %lld minutes.\nWithout lunch: %lld - %lld = "
                          "%lld minutes.\n#### %lld",
                          (long long)start, (long long)end, (long long)hours, (long long)(hours * 60),
                          (long long)(hours * 60), (long long)lunch, (long long)d->answer, (long long)d->answer);
}

static void sale(draw_t *d)
{
    const person_t *p = person(d, "name");
    static const char *const items[] = {"lamp", "backpack", "jacket", "kettle", "chair"};
    const char *item = word(d, "item", items, COUNT(items));
    /* a price in twenties and a cut in fives give a whole-dollar discount */
    int64_t price = num_step(d, "price", 20, 200, 20), pct = num_step(d, "discount_percent", 5, 50, 5);
    int64_t n = num(d, "count", 2, 5), each = price - price * pct / 100;
    derived(d, "sale_price", each);
    d->answer = n * each;
    d->question =
        task_strdupf("A %s usually costs $%lld. In a sale, its price is cut by %lld%%. %s buys %lld of them in "
                     "the sale. How many dollars does %s pay?",
                     item, (long long)price, (long long)pct, p->name, (long long)n, p->they);
    d->cot = task_strdupf("The discount is %lld%% of $%lld = $%lld, so one %s costs $%lld.\n%lld * $%lld = $%lld.\n"
                          "#### %lld",
                          (long long)pct, (long long)price, (long long)(price * pct / 100), item, (long long)each,
                          (long long)n, (long long)each, (long long)d->answer, (long long)d->answer);
}

static void commute(draw_t *d)
{
    /* fractions in lowest terms */
    static const int64_t fractions[][2] = {{1, 2}, {1, 3}, {2, 3}, {1, 4}, {3, 4}, {1, 5}, {2, 5}, {3, 5}, {4, 5}};
    size_t f = task_rng_below(d->r, COUNT(fractions));
    int64_t nu = fractions[f][0], den = fractions[f][1];
    derived(d, "numerator", nu);
    derived(d, "denominator", den);
    int64_t total = den * num(d, "groups", 5, 10), walk = total * nu / den, rest = total - walk;
    derived(d, "students", total);
    int64_t bus = num(d, "bus", 2, rest - 1);
    d->answer = rest - bus;
    d->question =
        task_strdupf("A class has %lld students. %lld/%lld of them walk to school, and %lld of the others take "
                     "the bus. Everyone else is driven by a parent. How many students are driven to school?",
                     (long long)total, (long long)nu, (long long)den, (long long)bus);
    d->cot = task_strdupf("%lld * %lld/%lld = %lld students walk, leaving %lld - %lld = %lld.\n%lld - %lld = %lld are "
                          "driven.\n#### %lld",
                          (long long)total, (long long)nu, (long long)den, (long long)walk, (long long)total,
                          (long long)walk, (long long)rest, (long long)rest, (long long)bus, (long long)d->answer,
                          (long long)d->answer);
}

static void fence(draw_t *d)
{
    const person_t *p = person(d, "name"), *q = other(d, "friend", p);
    int64_t a = num(d, "rate1", 2, 9), b = num(d, "rate2", 2, 9), hours = num(d, "hours", 2, 12);
    int64_t panels = (a + b) * hours;
    derived(d, "panels", panels);
    d->answer = hours;
    d->question = task_strdupf("%s paints %lld fence panels an hour and %s paints %lld an hour. Working together, how "
                               "many hours do they need to paint %lld panels?",
                               p->name, (long long)a, q->name, (long long)b, (long long)panels);
    d->cot = task_strdupf(
        "Together they paint %lld + %lld = %lld panels an hour.\n%lld / %lld = %lld hours.\n#### %lld", (long long)a,
        (long long)b, (long long)(a + b), (long long)panels, (long long)(a + b), (long long)hours, (long long)hours);
}

static void cycling(draw_t *d)
{
    const person_t *p = person(d, "name");
    int64_t v1 = num(d, "speed1", 10, 25), h1 = num(d, "hours1", 2, 4);
    int64_t v2 = num(d, "speed2", 8, 20), h2 = num(d, "hours2", 2, 3);
    d->answer = v1 * h1 + v2 * h2;
    d->question =
        task_strdupf("%s rides a bicycle at %lld kilometres per hour for %lld hours, stops for lunch, and then "
                     "rides %lld more hours at %lld kilometres per hour. How many kilometres does %s ride in "
                     "total?",
                     p->name, (long long)v1, (long long)h1, (long long)h2, (long long)v2, p->they);
    d->cot = task_strdupf(
        "Before lunch: %lld * %lld = %lld km. After lunch: %lld * %lld = %lld km.\n%lld + %lld = %lld "
        "km.\n#### %lld",
        (long long)v1, (long long)h1, (long long)(v1 * h1), (long long)v2, (long long)h2, (long long)(v2 * h2),
        (long long)(v1 * h1), (long long)(v2 * h2), (long long)d->answer, (long long)d->answer);
}

static void ages(draw_t *d)
{
    const person_t *p = person(d, "name");
    /* the sister at least 8, the father at least 24 */
    int64_t age = num(d, "age", 10, 16), younger = num(d, "years_younger", 2, age - 8 < 6 ? age - 8 : 6);
    int64_t times = num(d, "times", 3, 5), later = num(d, "years_later", 1, 10);
    int64_t sister = age - younger, father = sister * times;
    derived(d, "sister_age", sister);
    derived(d, "father_age", father);
    d->answer = father + later;
    d->question =
        task_strdupf("%s is %lld years old. %s's sister is %lld years younger, and their father is %lld times "
                     "as old as the sister. How old will the father be in %lld years?",
                     p->name, (long long)age, p->name, (long long)younger, (long long)times, (long long)later);
    d->cot = task_strdupf("The sister is %lld - %lld = %lld.\nThe father is %lld * %lld = %lld.\nIn %lld years he will "
                          "be %lld + %lld = %lld.\n#### %lld",
                          (long long)age, (long long)younger, (long long)sister, (long long)sister, (long long)times,
                          (long long)father, (long long)later, (long long)father, (long long)later,
                          (long long)d->answer, (long long)d->answer);
}

static void recipe(draw_t *d)
{
    static const char *const bakes[] = {"cookies", "muffins", "pancakes", "scones"};
    const char *bake = word(d, "baked_good", bakes, COUNT(bakes));
    int64_t batch = num_step(d, "batch", 6, 12, 2), flour = num_step(d, "flour_grams", 150, 400, 10);
    int64_t k = num(d, "batches", 2, 6);
    derived(d, "wanted", batch * k);
    d->answer = flour * k;
    d->question = task_strdupf("A recipe makes %lld %s from %lld grams of flour. How many grams of flour are needed to "
                               "make %lld %s?",
                               (long long)batch, bake, (long long)flour, (long long)(batch * k), bake);
    d->cot = task_strdupf("%lld %s is %lld / %lld = %lld batches.\n%lld * %lld = %lld grams.\n#### %lld",
                          (long long)(batch * k), bake, (long long)(batch * k), (long long)batch, (long long)k,
                          (long long)k, (long long)flour, (long long)d->answer, (long long)d->answer);
}

static void piggy_bank(draw_t *d)
{
    const person_t *p = person(d, "name");
    static const char *const items[] = {"board game", "kite", "pair of skates", "puzzle", "football"};
    const char *item = word(d, "item", items, COUNT(items));
    int64_t start = num(d, "start", 5, 50), weekly = num(d, "weekly", 3, 15), weeks = num(d, "weeks", 4, 12);
    int64_t saved = start + weekly * weeks;
    derived(d, "saved", saved);
    int64_t spend = num(d, "spent", 5, saved - 1);
    d->answer = saved - spend;
    d->question =
        task_strdupf("%s has $%lld in a piggy bank and adds $%lld to it every week. After %lld weeks, %s buys a "
                     "%s for $%lld with money from the piggy bank. How many dollars are left in it?",
                     p->name, (long long)start, (long long)weekly, (long long)weeks, p->they, item, (long long)spend);
    d->cot = task_strdupf("After %lld weeks there is $%lld + %lld * $%lld = $%lld.\n$%lld - $%lld = $%lld.\n#### %lld",
                          (long long)weeks, (long long)start, (long long)weeks, (long long)weekly, (long long)saved,
                          (long long)saved, (long long)spend, (long long)d->answer, (long long)d->answer);
}

static void aquarium(draw_t *d)
{
    int64_t a = num(d, "tank_a", 5, 20), times = num(d, "times", 3, 6);
    int64_t b = a * times;
    derived(d, "tank_b", b);
    /* at most what leaves tank B still ahead */
    int64_t moved = num(d, "moved", 1, (b - a - 1) / 2);
    d->answer = (b - moved) - (a + moved);
    d->question = task_strdupf("Tank A holds %lld fish and tank B holds %lld times as many. After %lld fish are moved "
                               "from tank B to tank A, how many more fish are in tank B than in tank A?",
                               (long long)a, (long long)times, (long long)moved);
    d->cot = task_strdupf("Tank B holds %lld * %lld = %lld fish.\nAfter the move: A has %lld + %lld = %lld, B has %lld "
                          "- %lld = %lld.\n%lld - %lld = %lld.\n#### %lld",
                          (long long)a, (long long)times, (long long)b, (long long)a, (long long)moved,
                          (long long)(a + moved), (long long)b, (long long)moved, (long long)(b - moved),
                          (long long)(b - moved), (long long)(a + moved), (long long)d->answer, (long long)d->answer);
}

static void parking(draw_t *d)
{
    const person_t *p = person(d, "name");
    int64_t first = num(d, "first_hour", 3, 8), half = num(d, "per_half_hour", 1, 4), hours = num(d, "hours", 2, 8);
    int64_t extra = 2 * (hours - 1);
    d->answer = first + half * extra;
    d->question = task_strdupf("A car park charges $%lld for the first hour and $%lld for every half hour after that. "
                               "%s parks there for exactly %lld hours. How many dollars does %s pay?",
                               (long long)first, (long long)half, p->name, (long long)hours, p->they);
    d->cot = task_strdupf("After the first hour there are %lld half hours.\n$%lld + %lld * $%lld = $%lld.\n#### %lld",
                          (long long)extra, (long long)first, (long long)extra, (long long)half, (long long)d->answer,
                          (long long)d->answer);
}

static void garden(draw_t *d)
{
    const person_t *p = person(d, "name");
    static const char *const crops[] = {"tomatoes", "peppers", "cucumbers", "zucchinis"};
    const char *crop = word(d, "crop", crops, COUNT(crops));
    int64_t rows = num(d, "rows", 2, 8), per_row = num(d, "plants_per_row", 3, 10), each = num(d, "per_plant", 2, 9);
    int64_t grown = rows * per_row * each;
    derived(d, "grown", grown);
    int64_t lost = num(d, "eaten", 1, grown / 4);
    d->answer = grown - lost;
    d->question = task_strdupf("%s plants %lld rows of %s with %lld plants in each row, and every plant gives %lld %s. "
                               "Birds eat %lld of them before the harvest. How many %s does %s harvest?",
                               p->name, (long long)rows, crop, (long long)per_row, (long long)each, crop,
                               (long long)lost, crop, p->name);
    d->cot = task_strdupf("%lld * %lld = %lld plants give %lld * %lld = %lld %s.\n%lld - %lld = %lld.\n#### %lld",
                          (long long)rows, (long long)per_row, (long long)(rows * per_row), (long long)(rows * per_row),
                          (long long)each, (long long)grown, crop, (long long)grown, (long long)lost,
                          (long long)d->answer, (long long)d->answer);
}

static void quizzes(draw_t *d)
{
    const person_t *p = person(d, "name");
    int64_t s1, s2, s3, avg, need;
    /* drawn again until the fourth score is one a quiz out of 100 allows */
    do {
        cJSON_Delete(d->vars);
        d->vars = cJSON_CreateObject();
        cJSON_AddStringToObject(d->vars, "name", p->name);
        s1 = num(d, "score1", 60, 100), s2 = num(d, "score2", 60, 100), s3 = num(d, "score3", 60, 100);
        avg = num(d, "average", 70, 90);
        need = 4 * avg - s1 - s2 - s3;
    } while (need < 1 || need > 100);
    d->answer = need;
    d->question =
        task_strdupf("%s scored %lld, %lld and %lld on three quizzes, each marked out of 100. What score does "
                     "%s need on the fourth quiz for an average of exactly %lld over all four?",
                     p->name, (long long)s1, (long long)s2, (long long)s3, p->they, (long long)avg);
    d->cot = task_strdupf("Four quizzes averaging %lld total %lld * 4 = %lld points.\n%lld - %lld - %lld - %lld = "
                          "%lld.\n#### %lld",
                          (long long)avg, (long long)avg, (long long)(4 * avg), (long long)(4 * avg), (long long)s1,
                          (long long)s2, (long long)s3, (long long)d->answer, (long long)d->answer);
}

static const struct {
    const char *name;
    void (*draw)(draw_t *d);
} templates[] = {
    {"shelves", shelves},   {"babysitting", babysitting},
    {"crates", crates},     {"reading", reading},
    {"cafe", cafe},         {"marathon", marathon},
    {"shift", shift},       {"sale", sale},
    {"commute", commute},   {"fence", fence},
    {"cycling", cycling},   {"ages", ages},
    {"recipe", recipe},     {"piggy_bank", piggy_bank},
    {"aquarium", aquarium}, {"parking", parking},
    {"garden", garden},     {"quizzes", quizzes},
};

static cJSON *default_config(void)
{
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "difficulty", 1.0);
    return c;
}

static int validate_config(const cJSON *c, char *err, size_t errlen)
{
    double difficulty;
    if (task_config_double(c, "difficulty", &difficulty, err, errlen)) return -1;
    /* reasoning-gym asserts 1.0 <= difficulty <= 1.0 */
    if (difficulty != 1.0) {
        snprintf(err, errlen, "gsm_symbolic config: difficulty must be 1.0 (the only one reasoning-gym supports)");
        return -1;
    }
    return 0;
}

static int generate(const cJSON *c, uint64_t seed, uint64_t index, task_question_t *out, char *err, size_t errlen)
{
    (void)c, (void)err, (void)errlen;
    task_rng_t r;
    task_rng_init(&r, seed, index);
    size_t t = task_rng_below(&r, COUNT(templates));
    draw_t d = {&r, cJSON_CreateObject(), NULL, NULL, 0};
    templates[t].draw(&d);
    out->question = task_strdupf("%s%s", d.question, suffix);
    out->answer = task_strdupf("%lld", (long long)d.answer);
    cJSON *m = out->metadata = task_metadata_new("gsm_symbolic", index);
    cJSON_AddNumberToObject(m, "difficulty", 1.0);
    cJSON_AddStringToObject(m, "template", templates[t].name);
    cJSON_AddNumberToObject(m, "answer_value", (double)d.answer);
    cJSON_AddStringToObject(m, "answer_cot", d.cot);
    cJSON_AddItemToObject(m, "variables", d.vars);
    free(d.question);
    free(d.cot);
    return 0;
}

/* Python's \w for a str pattern: letters, anything numeric, and '_' */
static int is_word(uint32_t c)
{
    if (c == '_') return 1;
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO: return 1;
    default: return 0;
    }
}

/* re.search(r"\b-?\d+(?:\.\d+)?\b", answer) then float() of the match:
 * 0 with *value set, or -1 when nothing matches. A run of digits matches
 * only whole (a shorter one ends before a digit, where there is no \b); the
 * decimals are kept only when a \b follows them; a minus counts only after
 * a word character (the \b before it), so " -5" reads as 5. */
static int first_number(const char *s, double *value)
{
    size_t n = strlen(s), k = 0;
    uint32_t *cp = malloc((n + 1) * sizeof *cp);
    for (size_t i = 0; i < n; k++) i += py_utf8_next(s + i, n - i, &cp[k]);
    int found = -1;
    for (size_t i = 0; i < k && found < 0; i++) {
        int before = i > 0 && is_word(cp[i - 1]);
        size_t j = i;
        if (cp[i] == '-' && before) j++;
        else if (before || py_digit(cp[i]) < 0) continue;
        size_t e = j;
        while (e < k && py_digit(cp[e]) >= 0) e++;
        if (e == j) continue;
        size_t f = e;
        if (e + 1 < k && cp[e] == '.' && py_digit(cp[e + 1]) >= 0) {
            f = e + 1;
            while (f < k && py_digit(cp[f]) >= 0) f++;
            if (f < k && is_word(cp[f])) f = e;
        }
        if (f == e && e < k && is_word(cp[e])) continue;
        char *ascii = malloc(f - i + 1), *w = ascii;
        for (size_t x = i; x < f; x++)
            *w++ = cp[x] == '-' || cp[x] == '.' ? (char)cp[x] : (char)('0' + py_digit(cp[x]));
        *w = '\0';
        *value = strtod(ascii, NULL);
        free(ascii);
        found = 0;
    }
    free(cp);
    return found;
}

static double score(const char *answer, const task_question_t *e)
{
    double got, want;
    if (!answer || first_number(answer, &got) != 0) return 0.0;
    /* float(entry["answer"]) raising (no answer, not a number) gives 0 */
    if (!e->answer || py_float(e->answer, strlen(e->answer), &want) != PY_FLOAT_OK) return 0.0;
    return got == want ? 1.0 : 0.01;
}

const task_family_t task_family_gsm_symbolic = {
    .name = "gsm_symbolic",
    .default_config = default_config,
    .validate_config = validate_config,
    .generate = generate,
    .score = score,
};
