#!/usr/bin/env bash
# Retrains and re-exports the six shipped text classifiers (not part of CI): DGT, the
# vanilla Transformer and the Differential Transformer, same size and recipe, on the
# WordNet noun glosses (26 classes) and the SpamAssassin e-mails (ham / spam). Each
# training runs on one thread and takes at most ~4 min on a 2-core machine; they run one
# after another (one training at a time: the machine is shared with builds). The corpus
# tokenizer is trained by the first run of a corpus and cached in
# build/train/tokenizer_<corpus>.model, so the three architectures share it; delete it to
# retrain it. Cards compare with models/checkpoints/text_baselines.json (TF-IDF + logistic
# regression on the same split).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
scripts/fetch_text_data.sh
mkdir -p build/train
# corpus:recipe (models/train_text.py CORPUS_DEFAULTS, spelt out so the cards show it)
CORPORA=("wordnet:--epochs 3 --batch-size 64 --warmup-steps 200 --max-tokens 64"
         "spam:--epochs 4 --batch-size 32 --warmup-steps 50 --max-tokens 128")
ARCHS=(dgt transformer difftransformer)
for spec in "${CORPORA[@]}"; do
  corpus=${spec%%:*} recipe=${spec#*:}
  for arch in "${ARCHS[@]}"; do
    # shellcheck disable=SC2086
    /usr/bin/python3 models/train_text.py --corpus "$corpus" --arch "$arch" $recipe --lr 2e-3 \
      --threads 1 --seed 0 --out "build/train/${arch}_${corpus}.ckpt" \
      >"build/train/${arch}_${corpus}.log" 2>&1
  done
done
for spec in "${CORPORA[@]}"; do
  corpus=${spec%%:*}
  for arch in "${ARCHS[@]}"; do
    /usr/bin/python3 models/export_text.py --ckpt "build/train/${arch}_${corpus}.ckpt" \
      --name "${arch}_${corpus}"
  done
done

# Then, as for the image models: batching knobs measured on this machine's core 0
# (docs/performance.md: the WordNet models at 16 pieces, the length of most glosses; the
# spam models at max_tokens, which most e-mails are truncated to), the DGT cards' drift
# references over the held-out texts, and the check that the drift rules cover them.
taskset -c 0 /usr/bin/python3 scripts/gatescope_tune.py --cores 0 --write --p99-ms 50 \
  --text-tokens 16 --models dgt_wordnet,transformer_wordnet,difftransformer_wordnet
taskset -c 0 /usr/bin/python3 scripts/gatescope_tune.py --cores 0 --write --p99-ms 50 \
  --models dgt_spam,transformer_spam,difftransformer_spam
/usr/bin/python3 models/monitoring_reference.py dgt_wordnet dgt_spam
/usr/bin/python3 deploy/monitoring/drift_rules.py --check
