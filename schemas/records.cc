// The C API of records.h over the flatc-generated C++ of schemas/*.fbs.
// Every function is noexcept towards C: allocation failures inside the
// FlatBuffers builder or std::string surface as -1 / NULL.
#include "records.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "flatbuffers/idl.h"
#include "batch_generated.h"
#include "policy_generated.h"
#include "group_generated.h"
#include "task_generated.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "views hand out pointers to FlatBuffers' little-endian arrays");

namespace
{

using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

// the last record kind: kinds run from REC_TASK to it
constexpr rec_kind_t kLastKind = REC_POLICY;
// the kinds as errors and tap name them: a group record keeps the name it
// has on the wire (identifier "SROL", the stream rollouts)
const char *const kind_names[] = {"unknown", "task", "rollout", "batch", "policy"};
const char *const root_types[] = {nullptr, "sapo.Task", "sapo.Group", "sapo.Batch", "sapo.PolicyNotice"};
static_assert(sizeof kind_names / sizeof *kind_names == kLastKind + 1, "a name per record kind");

const char *identifier(rec_kind_t kind)
{
    switch (kind) {
    case REC_TASK: return sapo::TaskIdentifier();
    case REC_GROUP: return sapo::GroupIdentifier();
    case REC_BATCH: return sapo::BatchIdentifier();
    case REC_POLICY: return sapo::PolicyNoticeIdentifier();
    default: return nullptr;
    }
}

// Depth: batch > group > task/completion > vectors; a batch of 64 groups
// of 8 completions is about 1,200 tables.
flatbuffers::Verifier::Options verifier_options()
{
    flatbuffers::Verifier::Options o;
    o.max_depth = 16;
    o.max_tables = 1u << 20;
    return o;
}

bool verify_kind(rec_kind_t kind, flatbuffers::Verifier &v)
{
    switch (kind) {
    case REC_TASK: return sapo::VerifyTaskBuffer(v);
    case REC_GROUP: return sapo::VerifyGroupBuffer(v);
    case REC_BATCH: return sapo::VerifyBatchBuffer(v);
    case REC_POLICY: return sapo::VerifyPolicyNoticeBuffer(v);
    default: return false;
    }
}

// Group.signature (schemas/common.fbs) is deprecated: flatc generates
// no accessor for it and its Verifier skips it, but GenerateText prints a
// present one, so a planted offset would send rec_to_json outside the
// buffer. It is verified here as the Verifier did before. Its slot is the
// one between external and scored.
const flatbuffers::voffset_t kSignatureField = sapo::Group::VT_EXTERNAL + sizeof(flatbuffers::voffset_t);
static_assert(sapo::Group::VT_SCORED == kSignatureField + sizeof(flatbuffers::voffset_t),
              "Group.signature sits between external and scored");

bool signature_ok(const sapo::Group *r, flatbuffers::Verifier &v)
{
    // a generated table is a flatbuffers::Table (privately), as GetRoot takes it
    const auto *t = reinterpret_cast<const flatbuffers::Table *>(r);
    return t->VerifyOffset(v, kSignatureField) &&
           v.VerifyVector(t->GetPointer<const flatbuffers::Vector<uint8_t> *>(kSignatureField));
}

// the deprecated fields of a record the Verifier passed
bool deprecated_ok(rec_kind_t kind, const void *buf, flatbuffers::Verifier &v)
{
    if (kind == REC_GROUP) return signature_ok(sapo::GetGroup(buf), v);
    if (kind != REC_BATCH) return true;
    const auto *groups = sapo::GetBatch(buf)->groups();
    for (flatbuffers::uoffset_t i = 0; groups && i < groups->size(); i++)
        if (!signature_ok(groups->Get(i), v)) return false;
    return true;
}

void set_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

// Checks that buf can be verified as `want` (or as whatever it identifies
// as, when want is REC_UNKNOWN) and runs the Verifier. Returns the kind or
// REC_UNKNOWN with err set.
rec_kind_t check(const void *buf, size_t len, rec_kind_t want, char *err, size_t errlen)
{
    if (!buf || len < 8) {
        set_err(err, errlen, "record of %zu bytes is too short to hold a FlatBuffer", len);
        return REC_UNKNOWN;
    }
    if (len > REC_MAX_BYTES) {
        set_err(err, errlen, "record of %zu bytes exceeds the %zu-byte limit", len, REC_MAX_BYTES);
        return REC_UNKNOWN;
    }
    if (reinterpret_cast<uintptr_t>(buf) % REC_ALIGN) {
        set_err(err, errlen, "record at address %p is not %d-byte aligned (copy it with rec_aligned)", buf, REC_ALIGN);
        return REC_UNKNOWN;
    }
    rec_kind_t kind = rec_identify(buf, len);
    if (kind == REC_UNKNOWN || (want != REC_UNKNOWN && kind != want)) {
        char id[5];
        for (int i = 0; i < 4; i++) {
            unsigned char c = static_cast<const unsigned char *>(buf)[4 + i];
            id[i] = c >= ' ' && c <= '~' ? static_cast<char>(c) : '?';
        }
        id[4] = '\0';
        if (want == REC_UNKNOWN) set_err(err, errlen, "record has unknown file identifier '%s'", id);
        else
            set_err(err, errlen, "expected a %s record (identifier '%s'), got identifier '%s'", kind_names[want],
                    identifier(want), id);
        return REC_UNKNOWN;
    }
    flatbuffers::Verifier v(static_cast<const uint8_t *>(buf), len, verifier_options());
    if (!verify_kind(kind, v) || !deprecated_ok(kind, buf, v)) {
        set_err(err, errlen, "%s record of %zu bytes fails FlatBuffers verification", kind_names[kind], len);
        return REC_UNKNOWN;
    }
    return kind;
}

const char *str(const flatbuffers::String *s) { return s ? s->c_str() : ""; }

Offset<flatbuffers::String> opt_string(FlatBufferBuilder &fbb, const char *s) { return s ? fbb.CreateString(s) : 0; }

Offset<sapo::Task> task_offset(FlatBufferBuilder &fbb, const rec_task_t *t)
{
    auto family = opt_string(fbb, t->family);
    auto question = opt_string(fbb, t->question);
    auto answer = opt_string(fbb, t->answer);
    auto metadata = opt_string(fbb, t->metadata_json);
    auto node = opt_string(fbb, t->node);
    return sapo::CreateTask(fbb, t->task_id, family, question, answer, metadata, t->seed, t->index, node, t->round,
                            t->policy_version);
}

Offset<sapo::Group> group_offset(FlatBufferBuilder &fbb, const rec_group_t *r)
{
    std::vector<Offset<sapo::Completion>> comps(r->n_completions);
    for (size_t i = 0; i < r->n_completions; i++) {
        const rec_completion_t *c = &r->completions[i];
        auto text = opt_string(fbb, c->text);
        auto ids = c->token_ids ? fbb.CreateVector(c->token_ids, c->n_tokens) : 0;
        auto lps = c->logprobs ? fbb.CreateVector(c->logprobs, c->n_logprobs) : 0;
        comps[i] = sapo::CreateCompletion(fbb, text, ids, lps, c->reward, c->finished);
    }
    auto node = opt_string(fbb, r->node);
    auto model = opt_string(fbb, r->model);
    auto task = task_offset(fbb, &r->task);
    auto cvec = fbb.CreateVector(comps);
    return sapo::CreateGroup(fbb, node, r->policy_version, r->round, model, task, cvec, r->created_ms, r->external,
                             r->scored, r->gen_ms, r->verify_ms, r->pool_age_ms, r->pool_age_rounds);
}

// Builds with one builder per thread, reused so that steady traffic does not
// reallocate; a builder grown by a huge record gives its memory back.
template <typename Fill> int build(rec_kind_t kind, uint8_t **buf, size_t *len, Fill fill) noexcept
{
    *buf = nullptr;
    *len = 0;
    try {
        thread_local FlatBufferBuilder fbb(4096);
        fbb.Clear();
        // reward and the flags must be present for rec_group_score to mutate them
        fbb.ForceDefaults(true);
        fbb.Finish(fill(fbb), identifier(kind));
        size_t n = fbb.GetSize();
        uint8_t *out = n <= REC_MAX_BYTES ? static_cast<uint8_t *>(malloc(n)) : nullptr;
        if (out) memcpy(out, fbb.GetBufferPointer(), n);
        if (n > (1u << 20)) fbb.Reset();
        if (!out) return -1;
        *buf = out;
        *len = n;
        return 0;
    } catch (const std::bad_alloc &) {
        return -1;
    }
}

void task_read(const sapo::Task *t, rec_task_t *o)
{
    memset(o, 0, sizeof *o);
    o->family = o->question = o->answer = o->metadata_json = o->node = "";
    if (!t) return;
    o->task_id = t->task_id();
    o->family = str(t->family());
    o->question = str(t->question());
    o->answer = str(t->answer());
    o->metadata_json = str(t->metadata_json());
    o->seed = t->seed();
    o->index = t->index();
    o->node = str(t->node());
    o->round = t->round();
    o->policy_version = t->policy_version();
}

void group_read(const sapo::Group *r, rec_group_view_t *o)
{
    memset(o, 0, sizeof *o);
    o->table_ = r;
    o->r.node = str(r->node());
    o->r.policy_version = r->policy_version();
    o->r.round = r->round();
    o->r.model = str(r->model());
    task_read(r->task(), &o->r.task);
    o->r.n_completions = r->completions() ? r->completions()->size() : 0;
    o->r.created_ms = r->created_ms();
    o->r.external = r->external();
    o->r.scored = r->scored();
    o->r.gen_ms = r->gen_ms();
    o->r.verify_ms = r->verify_ms();
    o->r.pool_age_ms = r->pool_age_ms();
    o->r.pool_age_rounds = r->pool_age_rounds();
}

// A parser per record type, each holding the whole schema with its own root
// type: GenerateText reads the root from the parser.
struct Printers {
    flatbuffers::Parser parsers[kLastKind + 1];
    bool ok = true;
    Printers()
    {
        static const char schema[] =
#include "common_fbs.inc"
            ;
        for (int k = REC_TASK; k <= kLastKind; k++) {
            flatbuffers::Parser &p = parsers[k];
            p.opts.strict_json = true;
            p.opts.output_default_scalars_in_json = true;
            p.opts.indent_step = -1;
            ok = ok && p.Parse(schema) && p.SetRootType(root_types[k]);
        }
    }
};

// GenerateText prints a NaN or infinite float as nan / inf, which is not
// JSON; strict JSON has no such numbers, so they become null.
void nonfinite_to_null(std::string &text)
{
    std::string out;
    out.reserve(text.size());
    bool in_string = false;
    for (size_t i = 0; i < text.size(); i++) {
        char c = text[i];
        if (in_string) {
            if (c == '\\') out += text[i++];
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else {
            size_t j = i + (c == '-');
            if (text.compare(j, 3, "nan") == 0 || text.compare(j, 3, "inf") == 0) {
                out += "null";
                i = j + 2;
                continue;
            }
        }
        if (i < text.size()) out += text[i];
    }
    text.swap(out);
}

} // namespace

extern "C" {

int rec_task_build(const rec_task_t *in, uint8_t **buf, size_t *len)
{
    return build(REC_TASK, buf, len, [in](FlatBufferBuilder &fbb) { return task_offset(fbb, in); });
}

int rec_group_build(const rec_group_t *in, uint8_t **buf, size_t *len)
{
    return build(REC_GROUP, buf, len, [in](FlatBufferBuilder &fbb) { return group_offset(fbb, in); });
}

int rec_batch_build(const rec_batch_t *in, uint8_t **buf, size_t *len)
{
    return build(REC_BATCH, buf, len, [in](FlatBufferBuilder &fbb) {
        std::vector<Offset<sapo::Group>> groups(in->n_groups);
        for (size_t i = 0; i < in->n_groups; i++) groups[i] = group_offset(fbb, &in->groups[i]);
        auto node = opt_string(fbb, in->node);
        auto gvec = fbb.CreateVector(groups);
        auto stats = opt_string(fbb, in->stats_json);
        return sapo::CreateBatch(fbb, node, in->round, in->policy_version, gvec, in->local_count, in->external_count,
                                 stats);
    });
}

int rec_policy_build(const rec_policy_t *in, uint8_t **buf, size_t *len)
{
    return build(REC_POLICY, buf, len, [in](FlatBufferBuilder &fbb) {
        auto node = opt_string(fbb, in->node);
        auto ckpt = opt_string(fbb, in->checkpoint);
        return sapo::CreatePolicyNotice(fbb, node, in->policy_version, in->round, ckpt, in->created_ms);
    });
}

void rec_free(uint8_t *buf) { free(buf); }

rec_kind_t rec_identify(const void *buf, size_t len)
{
    if (!buf || len < 8) return REC_UNKNOWN;
    for (int k = REC_TASK; k <= kLastKind; k++)
        if (memcmp(static_cast<const char *>(buf) + 4, identifier(static_cast<rec_kind_t>(k)), 4) == 0)
            return static_cast<rec_kind_t>(k);
    return REC_UNKNOWN;
}

const char *rec_kind_name(rec_kind_t kind)
{
    return kind >= REC_TASK && kind <= kLastKind ? kind_names[kind] : kind_names[0];
}

const void *rec_aligned(const void *buf, size_t len, void **copy)
{
    *copy = nullptr;
    if (reinterpret_cast<uintptr_t>(buf) % REC_ALIGN == 0) return buf;
    void *p = aligned_alloc(REC_ALIGN, (len + REC_ALIGN - 1) / REC_ALIGN * REC_ALIGN);
    if (!p) return nullptr;
    memcpy(p, buf, len);
    *copy = p;
    return p;
}

rec_kind_t rec_verify(const void *buf, size_t len, char *err, size_t errlen)
{
    return check(buf, len, REC_UNKNOWN, err, errlen);
}

int rec_task_view(const void *buf, size_t len, rec_task_t *out, char *err, size_t errlen)
{
    if (check(buf, len, REC_TASK, err, errlen) == REC_UNKNOWN) return -1;
    task_read(sapo::GetTask(buf), out);
    return 0;
}

int rec_group_view(const void *buf, size_t len, rec_group_view_t *out, char *err, size_t errlen)
{
    if (check(buf, len, REC_GROUP, err, errlen) == REC_UNKNOWN) return -1;
    group_read(sapo::GetGroup(buf), out);
    return 0;
}

int rec_batch_view(const void *buf, size_t len, rec_batch_view_t *out, char *err, size_t errlen)
{
    if (check(buf, len, REC_BATCH, err, errlen) == REC_UNKNOWN) return -1;
    const sapo::Batch *b = sapo::GetBatch(buf);
    memset(out, 0, sizeof *out);
    out->table_ = b;
    out->b.node = str(b->node());
    out->b.round = b->round();
    out->b.policy_version = b->policy_version();
    out->b.n_groups = b->groups() ? b->groups()->size() : 0;
    out->b.local_count = b->local_count();
    out->b.external_count = b->external_count();
    out->b.stats_json = str(b->stats_json());
    return 0;
}

int rec_policy_view(const void *buf, size_t len, rec_policy_t *out, char *err, size_t errlen)
{
    if (check(buf, len, REC_POLICY, err, errlen) == REC_UNKNOWN) return -1;
    const sapo::PolicyNotice *p = sapo::GetPolicyNotice(buf);
    out->node = str(p->node());
    out->policy_version = p->policy_version();
    out->round = p->round();
    out->checkpoint = str(p->checkpoint());
    out->created_ms = p->created_ms();
    return 0;
}

void rec_group_completion(const rec_group_view_t *v, size_t i, rec_completion_t *out)
{
    const sapo::Completion *c =
        static_cast<const sapo::Group *>(v->table_)->completions()->Get(static_cast<flatbuffers::uoffset_t>(i));
    memset(out, 0, sizeof *out);
    out->text = str(c->text());
    if (auto ids = c->token_ids()) {
        out->token_ids = ids->data();
        out->n_tokens = ids->size();
    }
    if (auto lps = c->logprobs()) {
        out->logprobs = lps->data();
        out->n_logprobs = lps->size();
    }
    out->reward = v->rewards ? v->rewards[i] : c->reward();
    out->finished = c->finished();
}

void rec_batch_group(const rec_batch_view_t *v, size_t i, rec_group_view_t *out)
{
    group_read(static_cast<const sapo::Batch *>(v->table_)->groups()->Get(static_cast<flatbuffers::uoffset_t>(i)), out);
}

void rec_group_unpack(const rec_group_view_t *v, rec_group_t *out, rec_completion_t *comps)
{
    *out = v->r;
    for (size_t i = 0; i < v->r.n_completions; i++) rec_group_completion(v, i, &comps[i]);
    out->completions = comps;
}

int rec_group_score(void *buf, size_t len, const float *rewards, size_t n, bool scored, char *err, size_t errlen)
{
    if (check(buf, len, REC_GROUP, err, errlen) == REC_UNKNOWN) return -1;
    sapo::Group *r = sapo::GetMutableGroup(buf);
    auto *comps = r->mutable_completions();
    size_t have = comps ? comps->size() : 0;
    if (have != n) {
        set_err(err, errlen, "group has %zu completions, got %zu rewards", have, n);
        return -1;
    }
    // A producer may have left out a default-valued field, which cannot be
    // written in place: undo the rewards already written and report it.
    std::vector<float> old(n);
    bool ok = true;
    size_t i = 0;
    for (; ok && i < n; i++) {
        auto *c = comps->GetMutableObject(static_cast<flatbuffers::uoffset_t>(i));
        old[i] = c->reward();
        ok = c->mutate_reward(rewards[i]);
    }
    if (ok) ok = r->mutate_scored(scored);
    if (!ok) {
        for (size_t j = 0; j < i; j++)
            comps->GetMutableObject(static_cast<flatbuffers::uoffset_t>(j))->mutate_reward(old[j]);
        set_err(err, errlen, "group lacks a reward or scored field to overwrite in place; rebuild it");
        return -1;
    }
    return 0;
}

int rec_group_set_verify_ms(void *buf, size_t len, uint32_t verify_ms, char *err, size_t errlen)
{
    if (check(buf, len, REC_GROUP, err, errlen) == REC_UNKNOWN) return -1;
    if (!sapo::GetMutableGroup(buf)->mutate_verify_ms(verify_ms)) {
        set_err(err, errlen, "group lacks a verify_ms field to overwrite in place; rebuild it");
        return -1;
    }
    return 0;
}

char *rec_to_json(const void *buf, size_t len, char *err, size_t errlen)
{
    rec_kind_t kind = check(buf, len, REC_UNKNOWN, err, errlen);
    if (kind == REC_UNKNOWN) return nullptr;
    try {
        static const Printers printers;
        if (!printers.ok) {
            set_err(err, errlen, "the schema compiled into this program does not parse");
            return nullptr;
        }
        std::string text;
        if (!flatbuffers::GenerateText(printers.parsers[kind], buf, &text)) {
            set_err(err, errlen, "%s record has a string that is not valid UTF-8", kind_names[kind]);
            return nullptr;
        }
        if (text.find("nan") != std::string::npos || text.find("inf") != std::string::npos) nonfinite_to_null(text);
        char *out = static_cast<char *>(malloc(text.size() + 1));
        if (!out) {
            set_err(err, errlen, "out of memory for %zu bytes of JSON", text.size());
            return nullptr;
        }
        memcpy(out, text.c_str(), text.size() + 1);
        return out;
    } catch (const std::bad_alloc &) {
        set_err(err, errlen, "out of memory printing a %s record", kind_names[kind]);
        return nullptr;
    }
}

} // extern "C"
