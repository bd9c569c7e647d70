#!/usr/bin/env bash
# Bounded fuzzing in CI (`make fuzz`, part of `make test`): every cargo-fuzz target of the
# crates listed runs for FUZZ_SECONDS (default 20) from its committed corpus. New inputs go
# to a scratch directory, never into the repository; a crash fails the run and libFuzzer
# leaves the input under the crate's fuzz/artifacts/<target>/.
#
# The fuzz crates are cargo-fuzz projects (`cargo +nightly fuzz run <target>` works on a
# developer's machine). CI builds them the way cargo-fuzz 0.13 does, with its flags spelled
# out below, instead of compiling cargo-fuzz itself first (a minute of CI's 30-minute
# budget on two cores). FUZZ_CRATES picks the crates, each as `crate` (all its targets) or
# `crate:t1,t2` (those targets). Default: live's NBD server and the formats crate's two
# Parquet readers (columnar and memory traces: the Parquet crate still panics on malformed
# files, which the readers must contain); the other targets' corpora are replayed by their
# fuzz_corpus tests on stable in every `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${FUZZ_SECONDS:-20}
crates=${FUZZ_CRATES:-live formats:columnar,memtrace}
# A machine that cannot get a nightly toolchain (only the stable one ships with it, and no
# other can be fetched everywhere) skips this pass and says so; the corpora and the
# deterministic mutants still run in every `cargo test`.
if ! rustup toolchain list | grep -q '^nightly'; then
  rustup toolchain install nightly --profile minimal || {
    echo "fuzz: SKIPPED: no nightly toolchain on this machine and none could be installed (libFuzzer instrumentation needs one); the committed corpora are replayed by cargo test"
    exit 0
  }
fi
host=$(rustc +nightly -vV | sed -n 's/^host: //p')
# cargo-fuzz 0.13's default build (`cargo fuzz run` without --release: the dev profile, with
# debug assertions; sancov instrumentation for libFuzzer, AddressSanitizer, cfg(fuzzing)).
# --target keeps the flags off build scripts and proc macros. Not --release: on a clean
# clone the optimised, instrumented build of wattio-live and its dependencies took most of
# this stage (233 s on two cores); a 20 s run from the corpus needs coverage, ASan and the
# assertions, not speed.
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing \
-Cllvm-args=-simplifycfg-branch-fold-threshold=0 -Zsanitizer=address \
-Cllvm-args=-sanitizer-coverage-stack-depth -Ccodegen-units=1"
export CARGO_PROFILE_DEV_DEBUG=line-tables-only
for entry in $crates; do
  c=${entry%%:*}
  dir=crates/$c/fuzz
  # The [[bin]] targets of the fuzz crate (what `cargo fuzz list` prints), or those named.
  if [ "$entry" = "$c" ]; then
    targets=$(sed -n '/^\[\[bin\]\]/{n;s/^name = "\(.*\)"/\1/p}' "$dir/Cargo.toml")
  else
    targets=$(echo "${entry#*:}" | tr ',' ' ')
  fi
  bins=""
  for t in $targets; do bins="$bins --bin $t"; done
  # shellcheck disable=SC2086 # one word per --bin
  cargo +nightly build -q --manifest-path "$dir/Cargo.toml" --target "$host" $bins
  for t in $targets; do
    scratch=$(mktemp -d)
    mkdir -p "$dir/artifacts/$t"
    echo "fuzz: $c/$t for ${secs}s from $(ls "$dir/corpus/$t" | wc -l) seeds"
    rc=0
    "$dir/target/$host/debug/$t" -artifact_prefix="$dir/artifacts/$t/" "$scratch" "$dir/corpus/$t" \
      -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=1 > "$scratch.log" 2>&1 || rc=$?
    if [ "$rc" -eq 0 ]; then
      tail -n 12 "$scratch.log"
    else
      # The finding itself (its kind, an allocation's size, the first frames), not only the
      # stack's tail: a CI log is often all there is to go on.
      grep -m 1 -A 40 -E '^==[0-9]+== ?ERROR|ERROR: libFuzzer|^thread .* panicked' "$scratch.log" || tail -n 60 "$scratch.log"
      # The input too, in the log (base64; the artifacts directory may not outlive the job).
      for a in "$dir/artifacts/$t"/*; do
        [ -f "$a" ] && [ "$(stat -c %s "$a")" -le 65536 ] && { echo "fuzz: $a (base64):"; base64 -w 0 "$a"; echo; }
      done
    fi
    rm -rf "$scratch" "$scratch.log"
    [ "$rc" -eq 0 ] || { echo "fuzz: $c/$t FAILED (exit $rc): the input is under $dir/artifacts/$t/"; exit "$rc"; }
  done
done
