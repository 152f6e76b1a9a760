#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang in their own build folder
# and runs each for a bounded time, seeded with the corpus and the shipped
# examples. Exits non-zero if any target finds a crash, a leak, undefined
# behaviour or a timeout; the input that did it is kept in the output folder.
#
# usage: utils/run_fuzzers.sh [BUILD_DIR] [FUZZ_BUILD_DIR] [OUT_DIR]
#   BUILD_DIR       the normal build, whose tools make .hlob/.tpu seeds (build)
#   FUZZ_BUILD_DIR  the clang build (build-fuzz)
#   OUT_DIR         new corpus entries and crash inputs (build-fuzz/runs)
#   FUZZ_SECONDS    seconds per target (default 30)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
fuzz_build=${2:-build-fuzz}
out=${3:-$fuzz_build/runs}
seconds=${FUZZ_SECONDS:-30}
corpus=../shared/corpus
targets="hlo_text_fuzz hlo_binary_fuzz hlo_passes_fuzz llo_text_fuzz tpu_binary_fuzz npy_fuzz"

CXX=clang++ cmake -S . -B "$fuzz_build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTPU_BUILD_FUZZERS=ON \
  -DTPU_BUILD_TESTS=OFF >/dev/null
cmake --build "$fuzz_build" --target $targets

# Seeds, one folder per target.
rm -rf "$out" && mkdir -p "$out"
seeds() { mkdir -p "$out/seeds/$1"; echo "$out/seeds/$1"; }
# (testdata/models duplicates two corpus modules by name.)
cp $corpus/*.hlo testdata/examples/*.hlo "$(seeds hlo_text_fuzz)"
cp $corpus/*.hlo testdata/examples/*.hlo "$(seeds hlo_passes_fuzz)"
for f in $corpus/*.hlo testdata/examples/*.hlo; do
  "$build/tools/hlo-parse" "$f" -o "$(seeds hlo_binary_fuzz)/$(basename "$f" .hlo).hlob" 2>/dev/null || true
done
cp testdata/llo/*.llo testdata/sim/*.llo "$(seeds llo_text_fuzz)"
for f in testdata/llo/*.llo testdata/sim/*.llo; do
  "$build/tools/llo-asm" "$f" -o "$(seeds tpu_binary_fuzz)/$(basename "$f" .llo).tpu"
done
cp testdata/eval/npy/*.npy "$(seeds npy_fuzz)"

failed=0
for target in $targets; do
  mkdir -p "$out/corpus/$target" "$out/crashes/$target"
  n=$(ls "$out/seeds/$target" | wc -l)
  echo "fuzzing $target for ${seconds}s from $n seeds"
  if ! "$fuzz_build/fuzz/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=131072 \
      -print_final_stats=1 -artifact_prefix="$out/crashes/$target/" \
      "$out/corpus/$target" "$out/seeds/$target" >"$out/$target.log" 2>&1; then
    echo "FAILED: $target (log: $out/$target.log, input: $(ls "$out/crashes/$target" | head -1))"
    tail -40 "$out/$target.log"
    failed=$((failed + 1))
  else
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$out/$target.log" | tr '\n' ' '
    echo
  fi
done
echo "fuzzing: $(($(echo $targets | wc -w) - failed)) passed, $failed failed"
exit $((failed > 0))
