#!/usr/bin/env bash
# The documentation against the code: docs/config.md is what the built
# sampler's config table prints today (scripts/docs.sh config), the README
# stays a guide of at most 350 lines, its copy of the SmolLM2 preset is the
# file and its main settings have config.md's defaults, every relative
# link in README.md and docs/*.md reaches a file (and a heading, where it
# names one), the docs index lists every page of docs/, and the docs'
# script that pairs held-out evaluations (paired.py) counts right.
set -u
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-build/asan/bin}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check() { if eval "$2"; then echo "PASS docs_$1"; else echo "FAIL docs_$1"; fi; }

if [ -x "$bin/sampler" ]; then
  scripts/docs.sh config --bin "$bin" --out "$tmp/config.md" 2> "$tmp/err"
  check config_current 'cmp -s "$tmp/config.md" docs/config.md || { diff docs/config.md "$tmp/config.md" | head -n 20; echo "docs/config.md is stale: run make && scripts/docs.sh config"; false; }'
else
  echo "SKIP docs_config_current: $bin/sampler not built"
fi

lines=$(wc -l < README.md)
check readme_length '[ "$lines" -le 350 ] || { echo "README.md has $lines lines, at most 350: move reference material to docs/"; false; }'

# the README's copy of the SmolLM2 preset is the file: the fenced block
# after the comment that names it
preset=config/presets/smollm2-135m.env
awk -v mark="<!-- $preset" 'index($0, mark) == 1 { on = 1; next } on && /^```/ { if (in_block) exit; in_block = 1; next } in_block' README.md > "$tmp/preset"
check readme_preset 'cmp -s "$tmp/preset" "$preset" || { diff "$preset" "$tmp/preset"; echo "README.md: the block after <!-- $preset ... --> is not the file: copy it"; false; }'

# the README's main settings: flag, variable and default as docs/config.md has them
stale=""
while IFS= read -r row; do
  grep -qF "$row" docs/config.md 2> /dev/null || stale="$stale
  $row"
done < <(grep -o '^| `--[a-z0-9-]*` | `SAPO_[A-Z0-9_]*` | `[^`]*` |' README.md)
check readme_settings '[ -z "$stale" ] || { echo "README.md settings not as in docs/config.md:$stale"; false; }'

# docs/README.md, the index, links every page of docs/
missing=""
for f in docs/*.md; do
  [ "$f" = docs/README.md ] && continue
  grep -qF "](${f#docs/})" docs/README.md 2> /dev/null || missing="$missing ${f#docs/}"
done
check index_complete '[ -z "$missing" ] || { echo "docs/README.md does not list:$missing"; false; }'

if ! command -v python3 > /dev/null; then
  echo "SKIP docs_links: python3 not installed"
  exit 0
fi
# [text](target) outside code: a target that is no URL must name a file or
# folder that exists, relative to the page; a #heading in a markdown target
# must be one of its headings (GitHub's anchors: lower case, punctuation
# dropped, spaces to hyphens)
python3 - README.md docs/*.md > "$tmp/links" << 'PY'
import os, re, sys

def strip_code(text):
    text = re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)

def anchors(path):
    out, seen = set(), {}
    text = re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", open(path, encoding="utf-8").read(), flags=re.S | re.M)
    for m in re.finditer(r"^#{1,6}\s+(.*?)\s*#*\s*$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", m.group(1).replace("`", "").lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out

bad = 0
for page in sys.argv[1:]:
    text = strip_code(open(page, encoding="utf-8").read())
    for m in re.finditer(r"\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)", text):
        target = m.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue
        path, _, frag = target.partition("#")
        full = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        if not os.path.exists(full):
            print(f"{page}: link to {target}: {full} does not exist")
            bad += 1
        elif frag and full.endswith(".md") and frag not in anchors(full):
            print(f"{page}: link to {target}: no heading #{frag} in {full}")
            bad += 1
print(f"{bad} broken links")
PY
check links 'grep -q "^0 broken links" "$tmp/links" || { cat "$tmp/links"; false; }'

# docs/results-cuda-prep/paired.py on a hand-made file of three
# evaluations of four questions: the start (right on a and d), version 5
# (right on a and b: one gained, one lost) and version 10 (right on all,
# b and c gained), each later one paired with the start
for e in "0 1 0 0 1" "5 1 1 0 0" "10 1 1 1 1"; do
  read -r v sa sb sc sd <<< "$e"
  text=plain
  [ "$v" = 0 ] && text="floor of it"
  for q in a b c d; do
    s=s$q
    printf '{"round": %s, "policy_version": %s, "family": "f", "question": "%s", "score": %s, "completion": "%s"}\n' \
      "$v" "$v" "$q" "${!s}" "$text"
  done
done > "$tmp/completions.jsonl"
python3 docs/results-cuda-prep/paired.py "$tmp/completions.jsonl" floor > "$tmp/paired" 2>&1
check paired_each_version 'grep -q "^pass@1 round 5 (policy version 5): 0.500$" "$tmp/paired" &&
  grep -q "^right in both 1, only before 1, only after 1, in neither 1$" "$tmp/paired" &&
  grep -q "^pass@1 round 10 (policy version 10): 1.000$" "$tmp/paired" &&
  grep -q "^change +0.500; McNemar exact p 0.5$" "$tmp/paired" &&
  [ "$(grep -c "every question (4): 4 before, 0 after" "$tmp/paired")" = 2 ] || { cat "$tmp/paired"; false; }'
gzip -c "$tmp/completions.jsonl" > "$tmp/completions.jsonl.gz"
check paired_gzip 'python3 docs/results-cuda-prep/paired.py "$tmp/completions.jsonl.gz" floor | cmp -s - "$tmp/paired"'
