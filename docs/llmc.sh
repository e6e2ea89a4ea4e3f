#!/usr/bin/env bash
# llmc.sh: time llm.c's CPU reference trainer (karpathy/llm.c train_gpt2.c, fp32, OpenMP) on
# gptlab's baby config (vocab 65, block 64, 4 layers, 4 heads, embd 128, batch 12), to fill
# the llm.c column of docs/performance.md.
#
#   bash docs/llmc.sh [LLMC_DIR]
#
# LLMC_DIR is a checkout of https://github.com/karpathy/llm.c; without it the script clones it
# (needs internet). Everything is built and run in a temporary directory: neither this repo nor
# LLMC_DIR is written. Needs gcc with OpenMP (libgomp) and python3 (standard library only).
# Environment: STEPS (default 20) steps a run, the first 2 dropped; CFLAGS (default
# "-Ofast -march=native -fopenmp -DOMP", as llm.c's Makefile builds it: the peer at its best;
# -O3 ran its step ~1.9x slower on a 2-vCPU EPYC; -DOMP because train_gpt2.c includes omp.h
# only under it); LLMC_LOCK=FILE runs each timed run under `flock FILE`
# (serialises them with other benchmarks on a shared machine).
#
# The checkpoint is random (normal 0.02, layer norms 1, biases 0), written in train_gpt2.c's
# format: gpt2_build_from_checkpoint() wants an int32[256] header (magic 20240326, version 3,
# maxT, V, L, NH, C, Vp) then float32 tensors in fill_in_parameter_sizes() order. Vp = V = 65:
# no padding (llm.c pads GPT-2's 50257 to 50304 for GPUs; its CPU code works with any Vp >= V).
# The tokens are train_gpt2.c's own bytes mod 65, in dataloader.h's format (int32[256] header:
# magic 20240520, version 1, token count; then uint16 tokens). There is no gpt2_tokenizer.bin:
# train_gpt2.c warns and goes on, and with fewer than 21 steps it never samples. Its val loss
# (steps 0 and 10) runs outside the timed region, which covers only the training step.
set -euo pipefail

STEPS=${STEPS:-20}
CFLAGS=${CFLAGS:-"-Ofast -march=native -fopenmp -DOMP"}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ $# -ge 1 ]; then
  src=$(cd "$1" && pwd)
else
  git clone -q --depth 1 https://github.com/karpathy/llm.c "$work/llm.c"
  src=$work/llm.c
fi
rev=$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)
cd "$work"

# B = 12, T = 64, and STEPS steps (0..STEPS-1) instead of 41; fail if upstream changed the lines.
sed -e 's/int B = 4;/int B = 12;/' -e 's/int T = 64;/int T = 64;/' \
    -e "s/step <= 40; step++/step < $STEPS; step++/" "$src/train_gpt2.c" > train_gpt2.c
for want in 'int B = 12;' 'int T = 64;' "step < $STEPS; step++" 'if (model_header[1] != 3)'; do
  grep -qF "$want" train_gpt2.c || { echo "llmc.sh: train_gpt2.c has no '$want'" >&2; exit 2; }
done
# shellcheck disable=SC2086
gcc $CFLAGS -I"$src" train_gpt2.c -lm -o train_gpt2

python3 - "$src/train_gpt2.c" <<'EOF'
import array, os, random, sys
V, maxT, L, NH, C = 65, 64, 4, 4, 128
Vp = V
rng = random.Random(1337)
def normal(n): return array.array('f', (rng.gauss(0.0, 0.02) for _ in range(n)))
def const(n, v): return array.array('f', [v]) * n
tensors = [normal(Vp * C), normal(maxT * C),            # wte, wpe
           const(L * C, 1), const(L * C, 0),            # ln1w, ln1b
           normal(L * 3 * C * C), const(L * 3 * C, 0),  # qkvw, qkvb
           normal(L * C * C), const(L * C, 0),          # attprojw, attprojb
           const(L * C, 1), const(L * C, 0),            # ln2w, ln2b
           normal(L * 4 * C * C), const(L * 4 * C, 0),  # fcw, fcb
           normal(L * C * 4 * C), const(L * C, 0),      # fcprojw, fcprojb
           const(C, 1), const(C, 0)]                    # lnfw, lnfb
assert sys.byteorder == 'little'
with open('gpt2_124M.bin', 'wb') as f:
    array.array('i', [20240326, 3, maxT, V, L, NH, C, Vp] + [0] * 248).tofile(f)
    for t in tensors: t.tofile(f)
text = open(sys.argv[1], 'rb').read()
os.makedirs('dev/data/tinyshakespeare')
for split, toks in (('train', text), ('val', text[::-1])):
    with open(f'dev/data/tinyshakespeare/tiny_shakespeare_{split}.bin', 'wb') as f:
        array.array('i', [20240520, 1, len(toks)] + [0] * 253).tofile(f)
        array.array('H', (b % V for b in toks)).tofile(f)
EOF

lock=()
[ -n "${LLMC_LOCK:-}" ] && lock=(flock "$LLMC_LOCK")
echo "llm.c $rev, train_gpt2.c, baby (V=65 T=64 L=4 NH=4 C=128 B=12), $CFLAGS, $STEPS steps"
for n in 1 2; do
  OMP_NUM_THREADS=$n "${lock[@]}" ./train_gpt2 > "run$n.log" || { cat "run$n.log"; exit 1; }
  grep -q '^num_parameters: ' "run$n.log"
  sed -n 's/^step \([0-9]*\): .*(took \([0-9.]*\) ms)$/\1 \2/p' "run$n.log" | awk '$1 >= 2 {print $2}' |
    sort -g | awk -v n="$n" '{t[NR] = $1} END {
      if (NR == 0) { print "no timed steps" > "/dev/stderr"; exit 1 }
      m = NR % 2 ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2
      printf "OMP_NUM_THREADS=%d: median %.1f ms/step (min %.1f, max %.1f, %d steps)\n", n, m, t[1], t[NR], NR }'
done
grep -E '^(num_parameters|val loss)' run1.log | head -2 | sed 's/^/  run 1 thread: /'
