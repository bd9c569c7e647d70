#!/usr/bin/env bash
# Bounded fuzzing in CI (`make fuzz`, part of `make test`): every cargo-fuzz target of the
# crates listed runs for FUZZ_SECONDS (default 20) from its committed corpus. New inputs go
# to a scratch directory, never into the repository; a crash fails the run and libFuzzer
# leaves the input under the crate's fuzz/artifacts/.
#
# cargo-fuzz needs a nightly toolchain: installed with rustup (minimal profile) and
# `cargo install cargo-fuzz --locked` when missing. FUZZ_CRATES picks the crates (default:
# live, whose target builds without the Arrow stack; the other crates' corpora are replayed
# by their tests/fuzz_corpus.rs on stable in every `cargo test`).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${FUZZ_SECONDS:-20}
crates=${FUZZ_CRATES:-live}
# A machine that cannot get a nightly toolchain (only the stable one ships with it, and no
# other can be fetched everywhere) skips this pass and says so; the corpora and the
# deterministic mutants still run in every `cargo test`.
if ! rustup toolchain list | grep -q '^nightly'; then
  rustup toolchain install nightly --profile minimal || {
    echo "fuzz: SKIPPED: no nightly toolchain on this machine and none could be installed (cargo-fuzz needs one); the committed corpora are replayed by cargo test"
    exit 0
  }
fi
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
for c in $crates; do
  dir=crates/$c/fuzz
  for t in $(cd "$dir" && cargo +nightly fuzz list); do
    scratch=$(mktemp -d)
    echo "fuzz: $c/$t for ${secs}s from $(ls "$dir/corpus/$t" | wc -l) seeds"
    (cd "$dir" && cargo +nightly fuzz run --release "$t" "$scratch" "corpus/$t" -- \
      -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=1 2>&1 | tail -n 12)
    rm -rf "$scratch"
  done
done
