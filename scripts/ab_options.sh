#!/usr/bin/env bash
# Dev tool (the device machine): A/B of build options in one call. Builds the working tree once per variant
# (concurrently, each into $AB_DIR/<name>, build dirs $AB_DIR/bd_<name>; AB_DIR defaults to build/ab, ignored by
# git, so that a later call on a machine still warm finds them: AB_SKIP_BUILD=1 reuses every variant already
# installed there), runs the GPU tests named by
# $AB_TESTS on every variant but the first, with AB_BITWISE=1 fingerprints of every dense entry's outputs per
# variant (scripts/ab_bitwise.py $AB_BITWISE_ARGS; options that do not change what a kernel sums must leave them equal), then the
# probe command once per variant per round, variants in turn (each probe times XLA beside us in its own process,
# so compare its ratios, not absolute times).
#   bash scripts/ab_options.sh OUT_DIR ROUNDS 'base=' 'pin=-Ccmake.define.JAX_TMEM_PIN_DESCRIPTORS=ON' \
#        -- python3 -P scripts/step_gemm_probe.py --sustain 0.5 --rounds 5
# A variant whose definition starts with @TARBALL is built from that source tree instead of the working tree (then
# its options, if any): the A/B of a code change, e.g. `git archive -o out/base.tar HEAD` here, then
#   bash scripts/ab_options.sh OUT_DIR 2 'base=@out/base.tar' 'new=' -- python3 -P benchmarks/bench_decode.py ...
# Budget: on an H200 machine (16 cores) two variants built side by side took 190 s (2026-11-29).
set -u
out=$1 rounds=$2
shift 2
mkdir -p "$out"
out=$(cd "$out" && pwd)
export PYTHONUNBUFFERED=1
names=() defs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do names+=("${1%%=*}"); defs+=("${1#*=}"); shift; done
[ "${1:-}" = "--" ] && shift
[ ${#names[@]} -ge 1 ] && [ $# -ge 1 ] || { echo "usage: $0 OUT ROUNDS name=defs... -- probe command" >&2; exit 2; }
t0=$(date +%s)
root=$(mkdir -p "${AB_DIR:-build/ab}" && cd "${AB_DIR:-build/ab}" && pwd)
jobs_each=$(( ($(nproc) + ${#names[@]} - 1) / ${#names[@]} ))
pids=()
for i in "${!names[@]}"; do
  if [ "${AB_SKIP_BUILD:-0}" = 1 ] && [ -d "$root/${names[$i]}/jax_tmem" ]; then
    echo "rc 0 (reused $root/${names[$i]})" > "$out/build_${names[$i]}.log"
    continue
  fi
  src=. d=${defs[$i]}
  if [ "${d#@}" != "$d" ]; then  # @TARBALL [options]: that tree
    tarball=${d%% *} && tarball=${tarball#@}
    case $d in *" "*) d=${d#* } ;; *) d= ;; esac
    src=$root/src_${names[$i]} && rm -rf "$src" && mkdir -p "$src" && tar -xf "$tarball" -C "$src" || exit 1
  fi
  # shellcheck disable=SC2086
  ( cd "$src" && CMAKE_BUILD_PARALLEL_LEVEL=$jobs_each python3 -m pip install --no-build-isolation --no-deps --upgrade \
      --target "$root/${names[$i]}" -Cbuild-dir="$root/bd_${names[$i]}" $d . > "$out/build_${names[$i]}.log" 2>&1
    echo "rc $?" >> "$out/build_${names[$i]}.log" ) &
  pids+=($!)
done
[ ${#pids[@]} -eq 0 ] || wait "${pids[@]}"  # (not a bare wait: beside an `exec > >(tee ...)` it waits for the tee too)
status=0
for n in "${names[@]}"; do
  echo "build $n: $(tail -1 "$out/build_$n.log") ($(( $(date +%s) - t0 )) s)"
  grep -q "^rc 0" "$out/build_$n.log" || status=1
done
[ $status = 0 ] || exit 1
if [ -n "${AB_TESTS:-}" ]; then
  for n in "${names[@]:1}"; do
    # shellcheck disable=SC2086
    PYTHONPATH="$root/$n" timeout "${AB_TEST_TIMEOUT:-200}" python3 -P -m pytest $AB_TESTS -q -x -p no:cacheprovider \
      > "$out/tests_$n.log" 2>&1 || status=1
    echo "tests $n: $(tail -1 "$out/tests_$n.log") ($(( $(date +%s) - t0 )) s)"
  done
fi
if [ "${AB_BITWISE:-0}" = 1 ]; then  # the dense entries' outputs, fingerprinted per variant, against the first's
  for n in "${names[@]}"; do
    PYTHONPATH="$root/$n" timeout "${AB_TEST_TIMEOUT:-200}" python3 -P scripts/ab_bitwise.py ${AB_BITWISE_ARGS:-} --out "$out/bitwise_$n.json" \
      > "$out/bitwise_$n.log" 2>&1 || status=1
    same=$(cmp -s "$out/bitwise_${names[0]}.json" "$out/bitwise_$n.json" && echo "equal to ${names[0]}" || echo "DIFFERENT from ${names[0]}")
    echo "bitwise $n: $(tail -1 "$out/bitwise_$n.log"); $same ($(( $(date +%s) - t0 )) s)"
    case $same in DIFFERENT*) status=1 ;; esac
  done
fi
for r in $(seq 1 "$rounds"); do
  for n in "${names[@]}"; do
    PYTHONPATH="$root/$n" timeout "${AB_PROBE_TIMEOUT:-200}" "$@" > "$out/probe_${n}_$r.log" 2>&1 || status=1
    echo "== $n, round $r ($(( $(date +%s) - t0 )) s)"
    cat "$out/probe_${n}_$r.log"
  done
done
exit $status
